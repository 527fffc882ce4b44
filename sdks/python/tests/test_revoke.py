"""Revocation and the dashboard's routes against the real server: `Herald.revoke` of each kind
with its error paths, tokens with `jti` and `iat`, a subscriber revoked by its token's `jti` (it
stops with `revoked` and never connects again), `overview` and `device_inbox`."""

from __future__ import annotations

import time
from typing import List

from herald_client import (
    Connected,
    Disconnected,
    Herald,
    HeraldError,
    Subscriber,
    decode_token,
)

from conftest import ADMIN_KEY, API_KEY, HeraldServer, next_event, raises, unique, within


async def test_revoke_each_kind_and_its_errors(server: HeraldServer, herald: Herald) -> None:
    assert (await within(herald.revoke("default", all=True))).closed == 0
    assert (await within(herald.revoke("default", sub=unique("nobody")))).closed == 0
    assert (await within(herald.revoke("default", device=unique("no-device")))).closed == 0
    expires = int(time.time()) + 60
    assert (await within(herald.revoke("default", jti=unique("never-used"), expires=expires))).closed == 0
    async with Herald(server.url, API_KEY) as publisher_only:  # the app's publisher key may revoke too
        assert (await within(publisher_only.revoke("default", jti=unique("never-used")))).closed == 0

    two = await raises(herald.revoke("default", sub="a", device="b"))
    assert (two.code, two.status) == ("bad_request", 400)
    none = await raises(herald.revoke("default"))
    assert (none.code, none.status) == ("bad_request", 400)
    missing = await raises(herald.revoke(unique("no-app"), all=True))
    assert (missing.code, missing.status) == ("not_found", 404)
    async with Herald(server.url, "hk_wrong") as wrong:
        refused = await raises(wrong.revoke("default", all=True))
        assert (refused.code, refused.status) == ("unauthorized", 401)


async def test_tokens_carry_jti_and_iat_and_a_revoked_jti_is_refused(server: HeraldServer, herald: Herald) -> None:
    jti = unique("server-jti")
    minted = await within(herald.create_token(sub="j", channels=["**"], ttl=60, jti=jti))
    claims = decode_token(minted.token, server.token_secret)
    assert claims["jti"] == jti and isinstance(claims["iat"], int)
    await within(herald.revoke("default", jti=jti, expires=minted.expires))
    sub = Subscriber(server.url, minted.token)
    refused = await raises(sub.connect())
    assert refused.code == "unauthorized"
    await sub.close()


async def test_issued_before_refuses_older_tokens(fresh_server: HeraldServer) -> None:
    # Stored for the whole app, and it refuses tokens without `iat`: a server of its own.
    now = int(time.time())
    old = fresh_server.token(sub="old", channels=["x"], iat=now - 3600, jti="old")
    new = fresh_server.token(sub="new", channels=["x"], iat=now, jti="new")
    async with fresh_server.publisher() as herald:
        await within(herald.revoke("default", issued_before=now))
    old_sub = Subscriber(fresh_server.url, old)
    assert (await raises(old_sub.connect())).code == "unauthorized"
    await old_sub.close()
    async with Subscriber(fresh_server.url, new) as new_sub:
        assert (await next_event(new_sub, Connected)).sub == "new"  # type: ignore[union-attr]


async def test_a_revoked_subscriber_stops_and_does_not_reconnect(server: HeraldServer, herald: Herald) -> None:
    jti = unique("revoke-me")
    channel = unique("revoked")
    calls: List[int] = []

    def token() -> str:  # a callback that could go on forever: the subscriber must not ask again
        calls.append(1)
        return server.token(sub="r", channels=[channel], jti=jti)

    sub = Subscriber(server.url, token)
    await within(sub.connect())
    await within(sub.subscribe(channel))
    answer = await within(herald.revoke("default", jti=jti, expires=int(time.time()) + 600))
    assert answer.closed == 1
    event = await next_event(sub, Disconnected)
    assert isinstance(event, Disconnected)
    assert (event.code, event.close_code, event.reconnecting) == ("revoked", 4003, False)
    assert event.message
    ended = await raises(next_event(sub, Connected))  # the iterator raises the typed error
    assert ended.code == "revoked" and isinstance(ended, HeraldError)
    assert (await raises(sub.subscribe(unique("after")))).code == "revoked"
    assert calls == [1]
    # No connection holds the token any more (a reconnect would be refused, but none was tried).
    assert (await within(herald.revoke("default", jti=jti))).closed == 0
    assert calls == [1]
    await sub.close()


async def test_overview_with_the_admin_key_and_a_publisher_key(server: HeraldServer, herald: Herald) -> None:
    admin = await within(herald.overview())
    assert admin.role == "admin" and admin.server is not None and admin.time_ms > 0
    assert admin.server.delivery_lag.count >= 0
    assert "default" in [app.app for app in admin.apps]
    async with Herald(server.url, API_KEY) as publisher_only:
        own = await within(publisher_only.overview())
        assert own.role == "publisher" and own.server is None
        assert [app.app for app in own.apps] == ["default"]
        assert own.apps[0].usage.published >= 0
    async with Herald(server.url, "hk_wrong", admin_key=ADMIN_KEY + "x") as wrong:
        refused = await raises(wrong.overview())
        assert (refused.code, refused.status) == ("unauthorized", 401)


async def test_device_inbox(herald: Herald) -> None:
    device = unique("inbox-dev")
    await within(herald.register_device("herald", id=device))
    accepted = await within(herald.push(device=device, data={"n": 1}))
    inbox = await within(herald.device_inbox(device))
    assert inbox.device == device
    assert inbox.device_log.head.seq == 1 and inbox.device_log.unacked == 1
    assert [(e.id, e.log, e.acked) for e in inbox.recent] == [(accepted.id, "device", False)]
    assert inbox.recent[0].receipt is not None
    missing = await raises(herald.device_inbox(unique("nope")))
    assert (missing.code, missing.status) == ("not_found", 404)

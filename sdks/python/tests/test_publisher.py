"""Every route of docs/openapi.yaml through `Herald`, each at least once with an error path, against
the real server."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from herald_client import (
    UNSET,
    AppLimits,
    Herald,
    HeraldError,
    NotReadyError,
    PublicKey,
    Published,
    RawJson,
    SyncHerald,
    Subscriber,
)

from conftest import ADMIN_KEY, API_KEY, HeraldServer, raises, unique, within


async def test_health_metrics_openapi(herald: Herald) -> None:
    assert await within(herald.health())
    readiness = await within(herald.ready())
    assert (readiness.status, readiness.ready, readiness.failing()) == ("ready", True, {})
    assert (readiness.checks.store.status, readiness.checks.store.error) == ("ok", None)
    assert (readiness.checks.bus.status, readiness.checks.bus.link) == ("ok", "local")
    assert readiness.checks.draining is False
    assert "herald" in await within(herald.metrics())
    assert (await within(herald.openapi())).startswith("openapi:")


async def test_ready_names_a_full_store_while_health_stays_ok() -> None:
    """Under a 3 MiB file-size limit, publishes fill the store until it refuses them with
    `insufficient_storage`; `ready()` then raises `NotReadyError` naming the failing check, while
    `health()` (liveness) stays true."""
    server = HeraldServer(env={"HERALD_HISTORY_SIZE": "100000"},
                          through=["prlimit", f"--fsize={3 << 20}:"])
    server.start()
    try:
        async with server.publisher() as herald:
            blob = "x" * (16 * 1024)
            not_ready = None
            # A background write (the usage counters) may find room again after a checkpoint
            # emptied the write-ahead log and clear the fault: fill again then.
            for _ in range(20):
                for i in range(2000):
                    try:
                        await within(herald.publish("fill", {"i": i, "blob": blob}))
                    except HeraldError as refused:
                        assert (refused.code, refused.status) == ("insufficient_storage", 507)
                        break
                else:
                    raise AssertionError("2000 publishes of 16 KiB fitted under 3 MiB")
                try:
                    await within(herald.ready())
                except NotReadyError as error:
                    not_ready = error
                    break
            assert not_ready is not None, "ready() reported the full store"
            assert (not_ready.code, not_ready.status) == ("not_ready", 503)
            assert isinstance(not_ready, HeraldError)
            assert not_ready.message.startswith("store: insufficient_storage: "), not_ready.message
            assert "File too large" in not_ready.message
            readiness = not_ready.readiness
            assert (readiness.status, readiness.ready) == ("not_ready", False)
            assert readiness.checks.store.status == "failing"
            assert readiness.checks.store.error is not None
            assert readiness.checks.store.error.code == "insufficient_storage"
            assert (readiness.checks.bus.status, readiness.checks.draining) == ("ok", False)
            assert list(readiness.failing()) == ["store"]
            assert readiness.failing()["store"].code == "insufficient_storage"
            assert await within(herald.health())
    finally:
        server.cleanup()


async def test_publish_history_and_channel_state(herald: Herald) -> None:
    channel = unique("pub/news")
    first = await within(herald.publish(channel, {"n": 1}))
    assert (first.channel, first.seq, first.duplicate) == (channel, 1, False)
    second = await within(herald.publish(channel, RawJson('{ "n" : 2 }'), id="k-2"))
    again = await within(herald.publish(channel, {"ignored": True}, id="k-2"))
    assert (again.seq, again.id, again.duplicate) == (second.seq, "k-2", True)

    history = await within(herald.history(channel))
    assert [m.seq for m in history.messages] == [1, 2]
    assert history.messages[1].raw_data == '{ "n" : 2 }'  # the publisher's bytes, kept
    assert history.messages[1].data == {"n": 2}
    assert (history.epoch, history.first_seq) == (first.epoch, 1)
    assert [m.seq for m in (await within(herald.history(channel, last=1))).messages] == [2]
    assert [m.seq for m in (await within(herald.history(channel, since=1, limit=5))).messages] == [2]

    info = await within(herald.channel(channel))
    assert (info.seq, info.first_seq, info.subscribers) == (2, 1, 0)

    error = await raises(herald.history(channel, since=1, last=1))
    assert (error.code, error.status) == ("bad_request", 400)
    error = await raises(herald.publish("bad//name", 1))
    assert (error.code, error.status) == ("channel_invalid", 400)
    error = await raises(herald.publish(channel, "x" * 70000))
    assert (error.code, error.status) == ("too_large", 413)


async def test_presence_lists_a_presence_channels_members(tmp_path: Any) -> None:
    config = tmp_path / "herald.toml"
    config.write_text('[[namespaces]]\nprefix = "rooms/"\npresence = true\n')
    server = HeraldServer(args=["--config", str(config)])
    server.start()
    herald = server.publisher()
    try:
        token = server.token(sub="ada", channels=["rooms/*", "news"], user_info={"name": "Ada"})
        # A long-poll's user stays a member for a while after the poll answered.
        async with httpx.AsyncClient() as http:
            params = {"channel": "rooms/1", "presence": "true", "timeout": "0", "token": token}
            answer = (await within(http.get(f"{server.url}/v1/poll", params=params))).json()
        assert answer["presence"][0]["event"] == "members", answer
        members = await within(herald.presence("rooms/1"))
        assert (members.channel, members.count) == ("rooms/1", 1)
        assert [(m.user, m.data) for m in members.members] == [("ada", {"name": "Ada"})]
        error = await raises(herald.presence("news"))
        assert (error.code, error.status) == ("not_found", 404)
    finally:
        await herald.aclose()
        server.cleanup()


async def test_channel_listing_pages(herald: Herald) -> None:
    prefix = unique("list")
    for name in ("a", "b", "c"):
        await within(herald.publish(f"{prefix}/{name}", name))
    page = await within(herald.channels(after=f"{prefix}/", limit=2))
    assert [c.channel for c in page.channels] == [f"{prefix}/a", f"{prefix}/b"]
    assert page.next == f"{prefix}/b"
    rest = await within(herald.channels(after=page.next, limit=1))
    assert [c.channel for c in rest.channels] == [f"{prefix}/c"]
    error = await raises(herald.channels(limit=0))
    assert error.code == "bad_request"


async def test_batch_publish(herald: Herald) -> None:
    channel, other = unique("batch"), unique("batch")
    results = await within(
        herald.publish_batch(
            [{"channel": channel, "data": 1}, {"channel": other, "data": 2}, {"channel": channel, "data": 3, "id": "b3"}]
        )
    )
    assert all(isinstance(r, Published) for r in results)
    assert [(r.channel, r.seq) for r in results] == [(channel, 1), (other, 1), (channel, 2)]  # type: ignore[union-attr]
    assert results[2].id == "b3"  # type: ignore[union-attr]
    # One invalid item fails the whole request with that item's error; nothing is stored.
    error = await raises(herald.publish_batch([{"channel": channel, "data": 4}, {"channel": "bad name", "data": 5}]))
    assert (error.code, error.status) == ("channel_invalid", 400)
    assert error.message.startswith("messages[1]: ")
    assert (await within(herald.channel(channel))).seq == 2


async def test_wrong_key_and_unreachable_server(server: HeraldServer) -> None:
    async with Herald(server.url, "hk_wrong") as wrong:
        error = await raises(wrong.publish("news", 1))
        assert (error.code, error.status) == ("unauthorized", 401)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with Herald(f"http://127.0.0.1:{port}", API_KEY) as nowhere:
        error = await raises(nowhere.health())
        assert (error.code, error.status) == ("transport", None)
        error = await raises(nowhere.ready())
        assert (error.code, error.status) == ("transport", None)


async def test_apps_and_keys(herald: Herald, server: HeraldServer) -> None:
    app_id = unique("shop")
    created = await within(herald.create_app(app_id, name="Shop", limits=AppLimits(max_devices=10)))
    assert created.app.id == app_id and created.key.startswith("hk_")
    assert created.key not in repr(created) and created.token_secret not in repr(created)
    assert app_id in [a.id for a in await within(herald.apps())]
    assert (await within(herald.app(app_id))).limits.max_devices == 10
    updated = await within(herald.update_app(app_id, AppLimits(max_devices=20, max_connections=5)))
    assert (updated.limits.max_devices, updated.limits.max_connections) == (20, 5)

    key = await within(herald.add_key(app_id, label="ci"))
    assert {k.id for k in await within(herald.keys(app_id))} >= {created.key_id, key.key_id}
    async with Herald(server.url, key.key) as shop:  # the new key works, scoped to its app
        await within(shop.publish("orders/1", {"ok": True}))
        stats = await within(shop.app_stats(app_id))
        assert (stats.app, stats.usage.published) == (app_id, 1)
    await within(herald.delete_key(app_id, key.key_id))
    async with Herald(server.url, key.key) as revoked:
        assert (await raises(revoked.publish("orders/1", 1))).code == "unauthorized"

    assert (await raises(herald.create_app(app_id))).code == "conflict"
    assert (await raises(herald.delete_app("default"))).code == "forbidden"
    async with Herald(server.url, API_KEY) as publisher_only:  # no admin key
        assert (await raises(publisher_only.apps())).status in (401, 403)
    await within(herald.delete_app(app_id))
    error = await raises(herald.app(app_id))
    assert (error.code, error.status) == ("not_found", 404)


async def test_token_keys_and_secret_rotation(herald: Herald) -> None:
    import subprocess

    app_id = unique("keys")
    await within(herald.create_app(app_id))
    private = subprocess.run(
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        check=True, capture_output=True,
    ).stdout
    pem = subprocess.run(
        ["openssl", "pkey", "-pubout"], input=private, check=True, capture_output=True
    ).stdout.decode()
    keys = await within(herald.set_token_keys(app_id, [PublicKey(alg="ES256", pem=pem, kid="k1")]))
    assert (keys.app, keys.hs256, [k.kid for k in keys.keys]) == (app_id, True, ["k1"])
    assert (await within(herald.token_keys(app_id))).keys[0].pem == pem
    rotated = await within(herald.rotate_token_secret(app_id, overlap=60))
    assert rotated.token_secret.startswith("hs_") and rotated.token_secret not in repr(rotated)
    assert rotated.previous_valid_until is not None
    bad = await raises(herald.set_token_keys(app_id, [PublicKey(alg="ES256", pem="junk")]))
    assert (bad.code, bad.status) == ("bad_request", 400)
    assert (await raises(herald.rotate_token_secret("default"))).status == 400

    # Those actions, read back from the audit log, newest first, without a secret.
    page = await within(herald.audit(app=app_id, limit=3))
    assert [(e.action, e.result) for e in page.entries] == [
        ("token_keys.set", "bad_request"),
        ("token_secret.rotate", "ok"),
        ("token_keys.set", "ok"),
    ]
    assert page.entries[0].actor.role == "admin" and page.next_cursor is not None
    older = await within(herald.audit(app=app_id, cursor=page.next_cursor))
    assert [e.action for e in older.entries] == ["app.create"]
    assert rotated.token_secret not in repr(page) + repr(older)
    assert (await raises(herald.audit(limit=0))).status == 400


async def test_providers_and_vapid_key(herald: Herald) -> None:
    app_id = unique("web")
    await within(herald.create_app(app_id))
    assert await within(herald.providers(app_id)) == []
    public = await within(herald.set_provider(app_id, "webpush", {"subject": "mailto:ops@example.com", "generate": True}))
    assert public.provider == "webpush" and public.public_key
    assert (await within(herald.provider(app_id, "webpush"))).public_key == public.public_key
    assert [p.provider for p in await within(herald.providers(app_id))] == ["webpush"]
    assert await within(herald.vapid_public_key(app_id)) == public.public_key
    error = await raises(herald.set_provider(app_id, "apns", {"topic": "x"}))
    assert (error.code, error.status) == ("bad_request", 400)
    await within(herald.delete_provider(app_id, "webpush"))
    assert (await raises(herald.provider(app_id, "webpush"))).code == "not_found"
    assert (await raises(herald.vapid_public_key(app_id))).code == "not_found"
    await within(herald.delete_app(app_id))


async def test_job_queue_routes(herald: Herald) -> None:
    stats = await within(herald.job_stats())
    assert stats.app == "default"
    dead = await within(herald.dead_letters(limit=10))
    assert dead.jobs == [] and dead.next is None
    assert (await raises(herald.replay_job(999999))).code == "not_found"
    assert (await raises(herald.drop_job(999999))).code == "not_found"
    assert (await raises(herald.dead_letters(after="x", limit=10))).code == "bad_request"  # type: ignore[arg-type]


async def test_devices(herald: Herald) -> None:
    user = unique("user")
    ids = [unique("dev") for _ in range(3)]
    registered = await within(herald.register_device("herald", id=ids[0], user=user, tags=["a", "b"], locale="en-GB"))
    assert registered.created and registered.device.tags == ["a", "b"]
    again = await within(herald.register_device("herald", id=ids[0], user=user, tags=["a"]))
    assert not again.created and again.device.locale is None
    batch = await within(
        herald.register_devices([{"id": ids[1], "platform": "herald", "user": user}, {"id": ids[2], "platform": "herald", "tags": ["a"]}])
    )
    assert (batch.created, batch.updated, sorted(batch.ids)) == (2, 0, sorted(ids[1:]))

    assert (await within(herald.device(ids[0]))).user == user
    patched = await within(herald.update_device(ids[0], add_tags=["c"], remove_tags=["a"], user=None))
    assert (patched.tags, patched.user) == (["c"], None)
    assert (await within(herald.update_device(ids[0], locale="fr", tags=UNSET))).locale == "fr"

    mine = await within(herald.devices(user=user))
    assert [d.id for d in mine.devices] == [ids[1]]
    tagged = await within(herald.devices(tag="a"))
    assert ids[2] in [d.id for d in tagged.devices]
    page = await within(herald.devices(limit=1))
    assert len(page.devices) == 1 and page.next == page.devices[0].id

    off = await within(herald.deactivate_device(ids[2]))
    assert not off.active
    assert (await within(herald.activate_device(ids[2]))).active
    await within(herald.delete_device(ids[2]))

    error = await raises(herald.device(ids[2]))
    assert (error.code, error.status) == ("not_found", 404)
    assert (await raises(herald.register_device("herald", id="bad id!"))).code == "device_invalid"
    assert (await raises(herald.register_device("herald", id=unique("d"), tags=["NOT"]))).code == "tag_invalid"
    assert (await raises(herald.devices(tag="a", user=user))).code == "bad_request"


async def test_pushes_receipts_tokens_and_http_ack(herald: Herald, server: HeraldServer) -> None:
    device = unique("phone")
    await within(herald.register_device("herald", id=device, tags=["news"]))
    accepted = await within(herald.push(device=device, data={"n": 1}, notification={"title": "hi"}, id=unique("p")))
    assert (accepted.targeted, accepted.duplicate) == (1, False)
    receipt = await within(herald.receipt(accepted.id))
    assert (receipt.targeted, receipt.delivered, receipt.pending) == (1, 0, 1)

    token = await within(herald.create_token(sub=device, device=device, ttl=60))
    assert token.expires is not None and token.token not in repr(token)
    # The device reads its inbox over WebSocket, then acknowledges over HTTP.
    async with Subscriber(server.url, token.token, auto_ack=False) as sub:
        from herald_client import InboxMessageEvent
        from conftest import next_event

        event = await next_event(sub, InboxMessageEvent)
        assert event.message.id == accepted.id  # type: ignore[union-attr]
    acked = await within(herald.ack(token.token, channel="$device", seq=event.message.seq))  # type: ignore[union-attr]
    assert acked.device.seq == event.message.seq  # type: ignore[union-attr]
    assert (await within(herald.receipt(accepted.id))).delivered == 1
    acked = await within(herald.ack(token.token, cursor=acked.cursor))
    assert acked.device.seq == event.message.seq  # type: ignore[union-attr]

    broadcast = await within(herald.push(tags="news AND NOT muted", data={"all": True}))
    assert broadcast.id.startswith("p-")
    assert (await within(herald.push(app=True, data=1))).duplicate is False

    assert (await raises(herald.push(tags="news AND (", data=1))).code == "tag_expression_invalid"
    assert (await raises(herald.push(device=unique("nobody"), data=1))).code == "not_found"
    await within(herald.deactivate_device(device))
    assert (await raises(herald.push(device=device, data=1))).code == "conflict"
    assert (await raises(herald.receipt("p-000000000000000000000000"))).code == "not_found"
    assert (await raises(herald.create_token(device=unique("ghost")))).code == "not_found"
    user_token = await within(herald.create_token(sub="plain", channels=["x"]))
    error = await raises(herald.ack(user_token.token, channel="$device", seq=1))
    assert (error.code, error.status) == ("forbidden", 403)


def test_sync_wrapper(server: HeraldServer) -> None:
    with SyncHerald(server.url, API_KEY, admin_key=ADMIN_KEY) as herald:
        channel = unique("sync")
        assert herald.publish(channel, {"x": 1}).seq == 1
        assert herald.history(channel).messages[0].data == {"x": 1}
        with pytest.raises(HeraldError) as refused:
            herald.publish("bad name", 1)
        assert refused.value.code == "channel_invalid"


def test_retry_after_is_read_from_the_header() -> None:
    body = '{"error":{"code":"store_unavailable","message":"the store cannot be reached"}}'
    error = HeraldError.from_http(503, body, "1")
    assert (error.code, error.status, error.retry_after) == ("store_unavailable", 503, 1.0)
    assert HeraldError.from_http(502, "<html>bad gateway</html>").code == "unexpected_response"

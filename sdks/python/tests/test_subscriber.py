"""The subscriber against the real server: publish and receive, WebSocket commands, refused
subscribes and tokens as typed errors, token refresh on a short `exp`."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict, Iterator, List

import pytest

from herald_client import (
    Backoff,
    Connected,
    Cursor,
    Disconnected,
    Herald,
    HeraldError,
    MessageEvent,
    RawJson,
    Subscribed,
    Subscriber,
    Unsubscribed,
)

from conftest import VECTORS, HeraldServer, next_event, raises, unique, within

FAST = Backoff(initial=0.05, maximum=0.5)


async def test_publish_then_receive_in_order(server: HeraldServer, herald: Herald) -> None:
    channel = unique("live")
    token = server.token(sub="alice", channels=[channel])
    async with Subscriber(server.url, token) as sub:
        outcome = await within(sub.subscribe(channel))
        assert (outcome.channel, outcome.seq, outcome.epoch, outcome.recovered) == (channel, 0, "", False)
        connected = await next_event(sub, Connected)
        assert (connected.sub, connected.reconnect) == ("alice", False)  # type: ignore[union-attr]
        for n in range(5):
            await within(herald.publish(channel, {"n": n}))
        got = [await next_event(sub, MessageEvent) for _ in range(5)]
        assert [e.message.data["n"] for e in got] == list(range(5))  # type: ignore[union-attr]
        assert [e.message.seq for e in got] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
        assert sub.cursor(channel) == Cursor(got[-1].message.epoch, 5)  # type: ignore[union-attr]


async def test_resume_from_a_kept_cursor_and_last(server: HeraldServer, herald: Herald) -> None:
    channel = unique("kept")
    published = [await within(herald.publish(channel, n)) for n in range(4)]
    token = server.token(channels=[channel])
    async with Subscriber(server.url, token) as sub:
        outcome = await within(sub.subscribe(channel, since=Cursor(published[0].epoch, 2)))
        assert outcome.recovered and outcome.seq == 4
        event = await next_event(sub, Subscribed)
        assert event.resumed_from == Cursor(published[0].epoch, 2) and not event.may_have_missed  # type: ignore[union-attr]
        assert [(await next_event(sub, MessageEvent)).message.seq for _ in range(2)] == [3, 4]  # type: ignore[union-attr]
    async with Subscriber(server.url, token) as sub:
        outcome = await within(sub.subscribe(channel, since=Cursor("00000000", 1)))
        assert not outcome.recovered  # another epoch: nothing replayed
        event = await next_event(sub, Subscribed)
        assert event.may_have_missed  # type: ignore[union-attr]
    async with Subscriber(server.url, token) as sub:
        await within(sub.subscribe(channel, last=True))
        assert (await next_event(sub, MessageEvent)).message.seq == 4  # type: ignore[union-attr]


async def test_websocket_publish_history_unsubscribe(server: HeraldServer) -> None:
    channel = unique("ws")
    token = server.token(sub="bob", channels=[channel], publish=[channel])
    async with Subscriber(server.url, token) as sub:
        await within(sub.subscribe(channel))
        published = await within(sub.publish(channel, RawJson('{"keep" :  "bytes"}'), id="w-1"))
        assert (published.seq, published.id, published.duplicate) == (1, "w-1", False)
        assert (await within(sub.publish(channel, {"other": 1}, id="w-1"))).duplicate
        message = (await next_event(sub, MessageEvent)).message  # type: ignore[union-attr]
        assert message.raw_data == '{"keep" :  "bytes"}'
        history = await within(sub.history(channel, since=0, limit=10))
        assert [m.id for m in history.messages] == ["w-1"] and history.first_seq is None
        await within(sub.ping())
        await within(sub.unsubscribe(channel))
        assert sub.cursor(channel) is None
        assert (await raises(sub.unsubscribe(channel))).code == "not_subscribed"
        error = await raises(sub.history(channel, limit=0))
        assert (error.code, error.status) == ("bad_request", None)


async def test_refused_subscribe_and_publish_are_typed_errors(server: HeraldServer) -> None:
    allowed = unique("allowed")
    async with Subscriber(server.url, server.token(sub="carol", channels=[allowed])) as sub:
        error = await raises(sub.subscribe("secret"))
        assert error.code == "forbidden" and "secret" in error.message
        assert "secret" not in sub.cursors  # a refused subscription is not kept
        assert (await raises(sub.subscribe("bad//name"))).code == "channel_invalid"
        assert (await raises(sub.publish(allowed, 1))).code == "forbidden"
        await within(sub.subscribe(allowed))
        assert (await raises(sub.subscribe(allowed))).code == "already_subscribed"


def _vector_tokens() -> Iterator[Dict[str, Any]]:
    with open(VECTORS / "tokens.json", encoding="utf-8") as file:
        yield from json.load(file)["invalid"]


@pytest.fixture(scope="module")
def vector_server() -> Iterator[HeraldServer]:
    """A server whose token secret is the vectors' (its default app is the only app)."""
    herald = HeraldServer(token_secret="vector-secret-do-not-use")
    herald.start()
    yield herald
    herald.cleanup()


@pytest.mark.parametrize("case", list(_vector_tokens()), ids=lambda c: c["name"])
async def test_refused_token_vectors(vector_server: HeraldServer, case: Dict[str, Any]) -> None:
    sub = Subscriber(vector_server.url, case["token"])
    error = await raises(sub.connect())
    assert (error.code, error.error_code is not None) == (case["error"], True)
    assert error.message


async def test_refresh_with_a_refused_token_is_a_typed_error(server: HeraldServer) -> None:
    calls: List[int] = []

    def token() -> str:
        calls.append(1)
        return server.token(sub="x", channels=["a"]) if len(calls) == 1 else "not.a.jwt"

    sub = Subscriber(server.url, token, backoff=FAST)
    await within(sub.connect())
    server_side = await raises(sub.refresh_token())
    assert server_side.code == "unauthorized"
    await sub.close()


async def test_token_refresh_on_a_short_exp(server: HeraldServer, herald: Herald) -> None:
    channel = unique("expiring")
    issued: List[int] = []

    async def fresh_token() -> str:
        issued.append(int(time.time()) + 2)
        return server.token(sub="dave", channels=[channel], exp=issued[-1])

    async with Subscriber(server.url, fresh_token, backoff=FAST) as sub:
        await within(sub.subscribe(channel))
        await within(herald.publish(channel, "before"))
        assert (await next_event(sub, MessageEvent)).message.data == "before"  # type: ignore[union-attr]
        disconnected = await next_event(sub, Disconnected, seconds=10)
        assert (disconnected.code, disconnected.close_code, disconnected.reconnecting) == ("token_expired", 4001, True)  # type: ignore[union-attr]
        await within(herald.publish(channel, "while away"))
        connected = await next_event(sub, Connected)
        assert connected.reconnect and connected.expires == issued[-1]  # type: ignore[union-attr]
        assert len(issued) >= 2  # the callback was asked again
        resumed = await next_event(sub, Subscribed)
        assert resumed.recovered  # type: ignore[union-attr]
        await within(herald.publish(channel, "after"))
        data = [(await next_event(sub, MessageEvent)).message.data for _ in range(2)]  # type: ignore[union-attr]
        assert data == ["while away", "after"]


async def test_refresh_token_keeps_the_connection_and_reports_dropped_channels(server: HeraldServer) -> None:
    keep, drop = unique("keep"), unique("drop")
    channels = [[keep, drop]]

    async def token() -> str:
        return server.token(sub="erin", channels=channels[-1], ttl=60)

    async with Subscriber(server.url, token) as sub:
        await within(sub.subscribe(keep))
        await within(sub.subscribe(drop))
        channels.append([keep])
        reply = await within(sub.refresh_token())
        assert reply.unsubscribed == [drop] and reply.sub == "erin"
        assert (await next_event(sub, Unsubscribed)).channel == drop  # type: ignore[union-attr]
        assert set(sub.cursors) == {keep}


async def test_static_token_that_expires_is_a_fatal_typed_error(server: HeraldServer) -> None:
    token = server.token(sub="frank", channels=["x"], exp=int(time.time()) + 1)
    async with Subscriber(server.url, token, backoff=FAST) as sub:
        disconnected = await next_event(sub, Disconnected, seconds=10)
        assert (disconnected.code, disconnected.reconnecting) == ("token_expired", False)  # type: ignore[union-attr]
        error = await raises(sub.__anext__())
        assert error.code == "token_expired"


async def test_events_via_run_with_a_callback(server: HeraldServer, herald: Herald) -> None:
    channel = unique("run")
    seen: List[Any] = []
    async with Subscriber(server.url, server.token(channels=[channel])) as sub:
        await within(sub.subscribe(channel))
        await within(herald.publish(channel, 1))
        done = asyncio.get_running_loop().create_future()

        async def handler(event: Any) -> None:
            if isinstance(event, MessageEvent):
                seen.append(event.message.data)
                done.set_result(None)

        runner = asyncio.ensure_future(sub.run(handler))
        await within(done)
        await sub.close()
        await within(runner)
    assert seen == [1]

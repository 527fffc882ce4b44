"""Exact resume across a server crash (kill -9, restart on the same port and data directory) and
across a `slow_consumer` disconnect: every message once, in order, nothing missing."""

from __future__ import annotations

import asyncio
from typing import Iterator, List

import pytest

from herald_client import (
    Backoff,
    Connected,
    Disconnected,
    Herald,
    MessageEvent,
    Reconnecting,
    Subscribed,
    Subscriber,
)

from conftest import HeraldServer, next_event, unique, within

FAST = Backoff(initial=0.05, maximum=0.5)


async def test_resume_across_kill_9_and_restart(fresh_server: HeraldServer) -> None:
    server = fresh_server
    channels = [unique("crash/a"), unique("crash/b")]
    gate = asyncio.Event()  # the token callback holds the reconnect until the test opens it
    calls: List[int] = []

    async def token() -> str:
        calls.append(1)
        if len(calls) > 1:
            await gate.wait()
        return server.token(sub="resumer", channels=channels)

    async with server.publisher() as herald:
        for channel in channels:
            for n in range(3):
                await within(herald.publish(channel, f"{channel}:{n + 1}"))
    async with Subscriber(server.url, token, backoff=FAST) as sub:
        for channel in channels:
            await within(sub.subscribe(channel, last=False))
        # Fresh subscriptions start at the head: nothing is replayed.
        async with server.publisher() as herald:
            for channel in channels:
                await within(herald.publish(channel, f"{channel}:4"))
        seen = [(await next_event(sub, MessageEvent)).message for _ in range(2)]  # type: ignore[union-attr]
        assert sorted((m.channel, m.seq) for m in seen) == sorted((c, 4) for c in channels)

        server.kill()
        disconnected = await next_event(sub, Disconnected)
        assert disconnected.code is None and disconnected.reconnecting  # type: ignore[union-attr]

        server.restart()  # same port, same data: the epochs survive
        async with server.publisher() as herald:  # published while the client is away
            for n in range(5, 9):
                for channel in channels:
                    await within(herald.publish(channel, f"{channel}:{n}"))
            gate.set()
            connected = await next_event(sub, Connected)
            assert connected.reconnect  # type: ignore[union-attr]
            got = {channel: [] for channel in channels}  # type: ignore[var-annotated]
            recovered = []
            while sum(len(v) for v in got.values()) < 8 or len(recovered) < 2:
                event = await next_event(sub)
                if isinstance(event, Subscribed):
                    recovered.append(event.recovered)
                elif isinstance(event, MessageEvent):
                    got[event.message.channel].append(event.message.data)
            assert recovered == [True, True]
            for channel in channels:
                assert got[channel] == [f"{channel}:{n}" for n in range(5, 9)]
            # ... and live messages continue after the replay, still exactly once.
            await within(herald.publish(channels[0], "live"))
            assert (await next_event(sub, MessageEvent)).message.data == "live"  # type: ignore[union-attr]
        assert sub.cursor(channels[0]).seq == 9  # type: ignore[union-attr]


async def test_reconnect_attempts_are_reported_while_the_server_is_down(fresh_server: HeraldServer) -> None:
    server = fresh_server
    channel = unique("down")
    async with Subscriber(server.url, server.token(channels=[channel]), backoff=FAST) as sub:
        await within(sub.subscribe(channel))
        server.kill()
        await next_event(sub, Disconnected)
        retry = await next_event(sub, Reconnecting)
        assert retry.error.code == "transport" and retry.attempt == 1  # type: ignore[union-attr]
        assert 0 <= retry.delay <= FAST.ceiling(1)  # type: ignore[union-attr]
        server.restart()
        assert (await next_event(sub, Connected)).reconnect  # type: ignore[union-attr]


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    backoff = Backoff(initial=1, maximum=30, random=lambda: 0.999)
    assert [backoff.ceiling(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.ceiling(10_000) == 30
    assert 29.9 < backoff.delay(10) < 30
    assert Backoff(random=lambda: 0.0).delay(5) == 0.0


@pytest.fixture
def small_outbox_server() -> Iterator[HeraldServer]:
    herald = HeraldServer(env={"HERALD_OUTBOX_BYTES": "4096"})
    herald.start()
    yield herald
    herald.cleanup()


async def test_slow_consumer_is_a_typed_event_and_resumes_exactly(small_outbox_server: HeraldServer) -> None:
    server = small_outbox_server
    channel = unique("flood")
    total = 300
    payload = "x" * 16000
    async with Subscriber(server.url, server.token(channels=[channel]), backoff=FAST, queue_size=4) as sub:
        await within(sub.subscribe(channel))
        # The subscriber holds at most 4 events and we read none, so the socket backs up and the
        # server's 4 KiB outbound queue overflows.
        async with server.publisher() as herald:
            for start in range(0, total, 50):
                batch = [{"channel": channel, "data": {"n": n, "pad": payload}} for n in range(start, start + 50)]
                await within(herald.publish_batch(batch))
        seen: List[int] = []
        disconnect = None
        while len(seen) < total:
            event = await next_event(sub, seconds=30)
            if isinstance(event, MessageEvent):
                seen.append(event.message.data["n"])
            elif isinstance(event, Disconnected) and disconnect is None:
                disconnect = event
        assert disconnect is not None, "the server never found the consumer slow"
        assert (disconnect.code, disconnect.close_code, disconnect.reconnecting) == ("slow_consumer", 4008, True)
        assert disconnect.message
        assert seen == list(range(total))  # every message once, in order, across the disconnect

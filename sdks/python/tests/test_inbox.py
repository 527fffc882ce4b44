"""The device inbox through the subscriber: manual and automatic acks, against the real server.
Acked pushes are not delivered again on the next connection; unacked ones are."""

from __future__ import annotations

from typing import Any, List

import pytest

from herald_client import (
    ErrorEvent,
    Herald,
    InboxMessageEvent,
    Message,
    Subscribed,
    Subscriber,
)

from conftest import HeraldServer, next_event, unique, within


async def _device(herald: Herald, tags: Any = None) -> str:
    device = unique("phone")
    await within(herald.register_device("herald", id=device, tags=tags))
    return device


async def _token(herald: Herald, device: str) -> str:
    return (await within(herald.create_token(sub=device, device=device, ttl=600))).token


async def _inbox(sub: Subscriber, count: int) -> List[Message]:
    return [(await next_event(sub, InboxMessageEvent)).message for _ in range(count)]  # type: ignore[union-attr]


async def test_inbox_opens_with_both_logs(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald, tags=["sports"])
    async with Subscriber(server.url, await _token(herald, device)) as sub:
        opened = [await next_event(sub, Subscribed) for _ in range(2)]
        assert [e.channel for e in opened] == ["$app", "$device"]  # type: ignore[union-attr]
        await within(herald.push(tags="sports", data={"goal": 1}))
        await within(herald.push(device=device, data={"direct": 1}, notification={"title": "t"}))
        messages = await _inbox(sub, 2)
        assert sorted(m.channel for m in messages) == ["$app", "$device"]
        direct = next(m for m in messages if m.channel == "$device")
        assert direct.data["data"] == {"direct": 1} and direct.data["notification"] == {"title": "t"}
        assert direct.is_inbox and "expires" in direct.data


async def test_manual_ack_only_acked_pushes_stay_away(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald)
    token = await _token(herald, device)
    pushes = [await within(herald.push(device=device, data={"n": n})) for n in range(3)]
    async with Subscriber(server.url, token, auto_ack=False) as sub:
        first = await _inbox(sub, 3)
        assert [m.id for m in first] == [p.id for p in pushes]
        reply = await within(sub.ack(first[0]))
        assert (reply.channel, reply.seq) == ("$device", first[0].seq)
    assert (await within(herald.receipt(pushes[0].id))).delivered == 1
    assert (await within(herald.receipt(pushes[1].id))).delivered == 0
    async with Subscriber(server.url, token, auto_ack=False) as sub:
        again = await _inbox(sub, 2)
        assert [m.id for m in again] == [p.id for p in pushes[1:]]  # the unacked ones, again
        await within(sub.ack(again[-1]))  # acks everything up to it in that log
    async with Subscriber(server.url, token, auto_ack=False) as sub:
        late = await within(herald.push(device=device, data={"n": 3}))
        assert [m.id for m in await _inbox(sub, 1)] == [late.id]


async def test_automatic_ack_after_the_handler_returns(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald)
    token = await _token(herald, device)
    pushes = [await within(herald.push(device=device, data={"n": n})) for n in range(3)]
    async with Subscriber(server.url, token) as sub:  # auto_ack is the default
        handled = await _inbox(sub, 2)
        assert [m.id for m in handled] == [p.id for p in pushes[:2]]
        # The first was acked when the loop asked for the second; leaving the block without an
        # exception acks the second. The third was never handed to the code: not acked.
    assert [(await within(herald.receipt(p.id))).delivered for p in pushes] == [1, 1, 0]
    async with Subscriber(server.url, token) as sub:
        late = await within(herald.push(device=device, data={"n": 3}))
        assert [m.id for m in await _inbox(sub, 2)] == [pushes[2].id, late.id]


async def test_an_exception_leaving_the_block_does_not_ack(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald)
    token = await _token(herald, device)
    push = await within(herald.push(device=device, data="fragile"))
    with pytest.raises(RuntimeError):
        async with Subscriber(server.url, token) as sub:
            assert [m.id for m in await _inbox(sub, 1)] == [push.id]
            raise RuntimeError("the handler failed")
    assert (await within(herald.receipt(push.id))).delivered == 0


async def test_run_acks_after_the_handler_and_not_when_it_raises(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald)
    token = await _token(herald, device)
    ok = await within(herald.push(device=device, data="ok"))
    bad = await within(herald.push(device=device, data="boom"))

    class Boom(Exception):
        pass

    handled: List[str] = []

    def handler(event: Any) -> None:
        if isinstance(event, InboxMessageEvent):
            handled.append(event.message.data["data"])
            if event.message.data["data"] == "boom":
                raise Boom()

    with pytest.raises(Boom):
        async with Subscriber(server.url, token) as sub:
            await within(sub.run(handler))
    assert handled == ["ok", "boom"]
    assert (await within(herald.receipt(ok.id))).delivered == 1
    assert (await within(herald.receipt(bad.id))).delivered == 0
    async with Subscriber(server.url, token) as sub:
        assert [m.id for m in await _inbox(sub, 1)] == [bad.id]  # only the failed one comes again


async def test_inbox_of_a_deactivated_device_is_a_typed_error(server: HeraldServer, herald: Herald) -> None:
    device = await _device(herald)
    token = await _token(herald, device)
    await within(herald.deactivate_device(device))
    async with Subscriber(server.url, token) as sub:
        event = await next_event(sub, ErrorEvent)
        assert event.error.code == "forbidden" and event.error.message  # type: ignore[union-attr]

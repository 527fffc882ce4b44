"""A reconnect's resubscribes in batches: 250 channels resubscribed in a few WebSocket messages
(JSON arrays of commands), each resuming exactly; and the batches' planning, including the
fallback for a server that predates batches (one command a message after its refusal)."""

from __future__ import annotations

import asyncio
import importlib
import json
from typing import Any, Dict, List

import pytest

from herald_client import Backoff, Connected, Disconnected, MessageEvent, Subscriber
from herald_client.subscriber.batches import Batches

from conftest import HeraldServer, next_event, unique, within

FAST = Backoff(initial=0.05, maximum=0.5)
_client_module = importlib.import_module("herald_client.subscriber.client")


def _subscribes(messages: List[str]) -> Dict[str, Any]:
    """The subscribe commands in one connection's messages, and how many messages held them."""
    commands: List[Dict[str, Any]] = []
    carrying = 0
    for text in messages:
        parsed = json.loads(text)
        found = [c for c in (parsed if isinstance(parsed, list) else [parsed]) if "subscribe" in c]
        carrying += 1 if found else 0
        commands.extend(found)
    return {"commands": commands, "carrying": carrying}


async def test_a_reconnect_resubscribes_in_batches_and_resumes_exactly(
    fresh_server: HeraldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fresh_server
    prefix = unique("batch")
    channels = [f"{prefix}/c{i}" for i in range(250)]
    sent: List[List[str]] = []  # each connection's messages, as written
    real_open = _client_module.open_websocket

    async def recording_open(*args: Any, **kwargs: Any) -> Any:
        ws = await real_open(*args, **kwargs)
        messages: List[str] = []
        sent.append(messages)
        send = ws.send

        async def recording_send(message: Any, *rest: Any, **named: Any) -> Any:
            messages.append(message)
            return await send(message, *rest, **named)

        ws.send = recording_send
        return ws

    monkeypatch.setattr(_client_module, "open_websocket", recording_open)
    gate = asyncio.Event()  # the token callback holds the reconnect until the test opens it
    calls: List[int] = []

    async def token() -> str:
        calls.append(1)
        if len(calls) > 1:
            await gate.wait()
        return server.token(sub="batcher", channels=[f"{prefix}/*"])

    async def publish_round(n: int) -> None:
        async with server.publisher() as herald:
            await within(herald.publish_batch([{"channel": c, "data": n} for c in channels]))

    async with Subscriber(server.url, token, backoff=FAST) as sub:
        await within(asyncio.gather(*(sub.subscribe(c) for c in channels)))
        await publish_round(1)
        got: Dict[str, List[int]] = {c: [] for c in channels}
        for _ in channels:
            event = await next_event(sub, MessageEvent)
            got[event.message.channel].append(event.message.data)  # type: ignore[union-attr]

        server.kill()
        assert (await next_event(sub, Disconnected)).reconnecting  # type: ignore[union-attr]
        server.restart()
        await publish_round(2)
        await publish_round(3)
        gate.set()
        assert (await next_event(sub, Connected)).reconnect  # type: ignore[union-attr]
        await publish_round(4)
        for _ in range(3 * len(channels)):
            event = await next_event(sub, MessageEvent)
            got[event.message.channel].append(event.message.data)  # type: ignore[union-attr]
        for channel in channels:
            assert got[channel] == [1, 2, 3, 4], channel

    assert len(sent) == 2, "one reconnect"
    resubscribes = _subscribes(sent[1])
    assert len(resubscribes["commands"]) == len(channels), "a subscribe per channel"
    assert resubscribes["carrying"] == 3, "250 subscribes in batches of at most 100"
    assert len({c["id"] for c in resubscribes["commands"]}) == len(channels), "each with its own id"
    assert all(c["subscribe"]["since"]["seq"] == 1 for c in resubscribes["commands"])


def test_batches_are_bounded_and_a_refused_batch_goes_again_one_command_a_message() -> None:
    batches = Batches()
    commands = [(i, json.dumps({"id": i, "subscribe": {"channel": f"c{i}"}})) for i in range(1, 151)]
    messages = batches.plan(commands)
    assert [len(json.loads(m)) for m in messages] == [100, 50]
    assert batches.plan([(151, '{"id":151,"ping":{}}')]) == ['[{"id":151,"ping":{}}]'], (
        "while a batch is unanswered a lone command goes in an array too"
    )
    old = "frame is not a JSON object: invalid type: sequence, expected a map at line 1 column 0"
    assert batches.refusal("bad_request", "binary messages are refused") is None
    again = batches.refusal("bad_request", old)
    assert again == commands[:100]
    assert batches.plan([(152, "{}")]) == ["{}"], "one a message from now on"
    assert batches.refusal("bad_request", old) == commands[100:]
    assert batches.refusal("bad_request", old) == [(151, '{"id":151,"ping":{}}')]
    assert batches.refusal("bad_request", old) is None

    batches.new_connection()
    long = "x" * 5000
    messages = batches.plan([(i, json.dumps({"id": i, "subscribe": {"channel": long}})) for i in range(7)])
    assert [len(json.loads(m)) for m in messages] == [3, 3, 1], "16 KiB at most"
    batches.answered(0)
    assert batches.plan([(9, "{}")]) == ["{}"], "answered: the server takes batches"
    batches.closed_with(1009)
    batches.new_connection()
    assert batches.plan([(1, "{}"), (2, "{}")]) == ["{}", "{}"], "too big for the server: no more batches"

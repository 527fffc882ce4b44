"""The reading side of a `Subscriber`'s connection: every frame the server sends, decoded and
applied in arrival order (answers to waiting calls, cursor updates, events queued for the user),
and the writing of command frames (several at once in batches: `batches`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from websockets.exceptions import ConnectionClosed

from ..cursors import Cursor
from ..errors import TRANSPORT, HeraldError
from ..models.channels import ConnectReply, Disconnect, ErrorBody, Message, PresenceFrame, SubscribeOutcome
from ..wire import Frame, decode_frame
from .batches import Batches, Written
from .events import (
    ErrorEvent,
    Event,
    InboxMessageEvent,
    MessageEvent,
    PresenceEvent,
    Subscribed,
    Unsubscribed,
)
from .state import INBOX_LOGS, ChannelState, InboxTracker, PendingCommand


class FrameReader:
    """Mixin of `Subscriber`: owns frame dispatch. The attributes below are set by `Subscriber`."""

    _channels: Dict[str, ChannelState]
    _pending: Dict[int, PendingCommand]
    _inbox: InboxTracker
    _ws: Any

    def __init__(self) -> None:
        #: The server's `disconnect` frame on the current connection, if it sent one.
        self._disconnect: Optional[Disconnect] = None
        #: Whether commands go in batches on this connection, and those not yet answered.
        self._batches = Batches()

    async def _emit(self, event: Event) -> None:  # provided by Subscriber
        raise NotImplementedError

    async def _write(self, text: str, command_id: int) -> None:
        """Writes a command frame; if the connection is gone its caller gets `transport`."""
        await self._write_commands([(command_id, text)])

    async def _write_commands(self, commands: List[Written]) -> None:
        """Writes commands in order, several to a message (a batch) where batches are on; if the
        connection is gone their callers get `transport`."""
        ws = self._ws
        try:
            if ws is None:
                raise ConnectionError("not connected")
            for message in self._batches.plan(commands):
                await ws.send(message)
        except (ConnectionClosed, ConnectionError) as error:
            for command_id, _ in commands:
                pending = self._pending.pop(command_id, None)
                if pending is not None and not pending.future.done():
                    pending.future.set_exception(HeraldError(TRANSPORT, f"cannot send: {error}"))
                    if pending.command == "subscribe":
                        pending.future.exception()  # nobody awaits it: the channel state reports

    async def _read(self, ws: Any) -> None:
        """Reads until the connection ends. Waiting to queue an event stops the reading, so a
        consumer that falls behind makes the server's outbound queue fill (backpressure)."""
        try:
            async for text in ws:
                if not isinstance(text, str):
                    await self._emit(ErrorEvent(HeraldError("bad_request", "binary frame from the server")))
                    continue
                try:
                    frame = decode_frame(text)
                except HeraldError as error:
                    await self._emit(ErrorEvent(error))
                    continue
                await self._dispatch(frame)
        except ConnectionClosed:
            pass

    async def _dispatch(self, frame: Frame) -> None:
        body = frame.body
        if frame.id is not None:
            self._batches.answered(frame.id)
        if frame.kind == "message":
            assert isinstance(body, Message)
            await self._on_message(body)
        elif frame.kind == "disconnect":
            assert isinstance(body, Disconnect)
            self._disconnect = body
        elif frame.kind == "error":
            assert isinstance(body, ErrorBody)
            refused = self._batches.refusal(body.code, body.message) if frame.id is None else None
            if refused is not None:
                # A server that predates batches: the same commands again, one a message.
                await self._write_commands([c for c in refused if c[0] in self._pending])
                return
            await self._on_error(frame.id, HeraldError(body.code, body.message))
        elif frame.kind == "subscribe":
            assert isinstance(body, SubscribeOutcome)
            await self._on_subscribed(frame.id, body)
        elif frame.kind == "presence":
            assert isinstance(body, PresenceFrame)
            await self._on_presence(body)
        else:
            pending = self._pending.pop(frame.id, None) if frame.id is not None else None
            if frame.kind == "connect":
                assert isinstance(body, ConnectReply)
                for channel in body.unsubscribed or []:
                    if self._channels.pop(channel, None) is not None:
                        await self._emit(Unsubscribed(channel))
            if pending is not None and not pending.future.done():
                pending.future.set_result(body)

    async def _on_message(self, message: Message) -> None:
        if message.channel in INBOX_LOGS:
            if self._inbox.admit(message):
                await self._emit(InboxMessageEvent(message))
            return
        state = self._channels.get(message.channel)
        if state is None:
            return  # unsubscribed by the user a moment ago
        state.cursor = Cursor(message.epoch, message.seq)
        await self._emit(MessageEvent(message))

    async def _on_presence(self, frame: PresenceFrame) -> None:
        state = self._channels.get(frame.channel)
        if state is None or not state.presence:
            return
        applied = state.apply_presence(frame)
        if applied is None:
            return
        member, user = applied
        await self._emit(PresenceEvent(frame.channel, frame.event, state.member_list() or [], member, user))

    async def _on_subscribed(self, frame_id: Optional[int], outcome: SubscribeOutcome) -> None:
        pending = self._pending.pop(frame_id, None) if frame_id is not None else None
        state = self._channels.get(outcome.channel)
        if pending is None and outcome.channel in INBOX_LOGS:
            await self._emit(Subscribed(outcome, None))
            return
        if state is None:
            return
        sent = state.sent_cursor
        if state.cursor is None or not outcome.recovered:
            state.cursor = Cursor(outcome.epoch, outcome.seq)
        await self._emit(Subscribed(outcome, sent))
        if not state.first.done():
            state.first.set_result(outcome)
        if pending is not None and not pending.future.done():
            pending.future.set_result(outcome)

    async def _on_error(self, frame_id: Optional[int], error: HeraldError) -> None:
        pending = self._pending.pop(frame_id, None) if frame_id is not None else None
        if pending is None:
            await self._emit(ErrorEvent(error))
            return
        if pending.command == "subscribe" and pending.channel is not None:
            state = self._channels.get(pending.channel)
            if state is not None:
                del self._channels[pending.channel]
                if not state.first.done():
                    state.first.set_exception(error)
                else:  # refused when sent again after a reconnect: nobody is waiting
                    await self._emit(ErrorEvent(error, pending.channel))
        if not pending.future.done():
            pending.future.set_exception(error)
        # nobody awaits a subscribe's own future: mark its exception retrieved
        if pending.command == "subscribe":
            pending.future.exception()


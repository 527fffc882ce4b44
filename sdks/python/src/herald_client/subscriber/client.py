"""`Subscriber`: one logical WebSocket session that survives reconnects. It keeps each channel's
cursor and resubscribes with it, so the events it yields carry every message once and in order;
it reconnects with capped, fully jittered backoff, asks the token source again each time, and
hands the device inbox over with manual or automatic acks. A reconnect's resubscribes go in
batches (up to 100 commands in one WebSocket message), one a message to a server that predates
batches."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Set, Union

from ..cursors import Cursor
from ..errors import CLOSED, REVOKED, TRANSPORT, HeraldError
from ..wire import encode_command
from ..models.channels import (
    AckReply,
    ConnectReply,
    Disconnect,
    History,
    Message,
    PresenceMember,
    Published,
    SubscribeOutcome,
)
from .backoff import Backoff
from .connection import TokenSource, fetch_token, open_websocket, websocket_url
from .events import Connected, Disconnected, ErrorEvent, Event, InboxMessageEvent, Reconnecting
from .reader import FrameReader
from .state import ChannelState, InboxTracker, PendingCommand

Handler = Callable[[Event], Union[None, Awaitable[None]]]

#: Disconnect codes after which reconnecting would only repeat the failure.
_CLIENT_BUGS = ("too_large", "bad_request")
#: Errors that end the subscriber: the credentials are refused.
_FATAL = ("unauthorized", "forbidden")
#: The WebSocket close code of a revoked connection (docs/protocol.md, "Revocation").
_REVOKED_CLOSE_CODE = 4003


class _End:
    """Queue marker: the subscriber stopped."""


class Subscriber(FrameReader):
    """A resuming WebSocket client. Use it as `async with Subscriber(url, token) as sub:`, then
    `await sub.subscribe(...)` and `async for event in sub:` (or `await sub.run(handler)`).

    `token` is a token string, or a function (plain or async) called for a fresh token on every
    connection, including after `token_expired`. `auto_ack` acknowledges each inbox message once
    your handler is done with it (see the README). `queue_size` bounds the events held for you:
    a consumer that stops reading makes the server disconnect it as a `slow_consumer`, after
    which it resumes where it was."""

    def __init__(
        self,
        url: str,
        token: TokenSource = None,
        *,
        auto_ack: bool = True,
        backoff: Optional[Backoff] = None,
        queue_size: int = 1000,
        request_timeout: float = 30.0,
        open_timeout: float = 10.0,
        ping_interval: Optional[float] = 20.0,
        max_frame_bytes: Optional[int] = 64 * 1024 * 1024,
    ) -> None:
        super().__init__()
        self.url = websocket_url(url)
        self.auto_ack = auto_ack
        self.backoff = backoff or Backoff()
        self.request_timeout = request_timeout
        self._token_source = token
        self._open_timeout = open_timeout
        self._ping_interval = ping_interval
        self._max_frame_bytes = max_frame_bytes
        self._queue: "asyncio.Queue[Union[Event, _End]]" = asyncio.Queue(maxsize=queue_size)
        self._channels: Dict[str, ChannelState] = {}
        self._pending: Dict[int, PendingCommand] = {}
        self._inbox = InboxTracker()
        self._next_id = 1
        self._generation = 0
        self._ws: Any = None
        self._connected = asyncio.Event()
        self._stopped = asyncio.Event()
        self._closed_by_user = False
        self._fatal: Optional[HeraldError] = None
        self._supervisor: Optional["asyncio.Task[None]"] = None
        self._reader_task: Optional["asyncio.Task[None]"] = None
        self._acks: Set["asyncio.Task[None]"] = set()
        self._handed_inbox: Optional[Message] = None
        self.sub: Optional[str] = None
        self.expires: Optional[int] = None

    def __repr__(self) -> str:  # the token never appears in logs
        return f"Subscriber(url={self.url!r}, channels={sorted(self._channels)!r})"

    # ----- lifecycle -------------------------------------------------------------------------

    async def connect(self) -> None:
        """Opens the first connection; raises HeraldError if the server cannot be reached or
        refuses the token. Later connections are made by the subscriber itself."""
        if self._supervisor is not None:
            raise RuntimeError("connect() was called already")
        await self._open(reconnect=False)
        self._supervisor = asyncio.ensure_future(self._supervise())

    async def close(self) -> None:
        """Waits (briefly) for automatic acks in flight, closes the connection, and ends the
        event iterator; calls still waiting fail with `closed`."""
        if self._closed_by_user:
            return
        if self._acks:
            await asyncio.wait(set(self._acks), timeout=self.request_timeout)
        self._closed_by_user = True
        if self._supervisor is not None:
            self._supervisor.cancel()
        await self._drop_connection()
        self._stop(None)

    async def __aenter__(self) -> "Subscriber":
        await self.connect()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:  # the last inbox message handed out was handled without error
            self._settle_handed_inbox()
        await self.close()

    # ----- commands --------------------------------------------------------------------------

    async def subscribe(
        self,
        channel: str,
        *,
        since: Optional[Cursor] = None,
        last: Optional[bool] = None,
        presence: bool = False,
        member: Optional[Dict[str, Any]] = None,
    ) -> SubscribeOutcome:
        """Subscribes (resuming after `since`, a cursor you kept); the subscription is renewed on
        every reconnect from the last message received. Raises HeraldError if the server refuses
        it (`forbidden`, `channel_invalid`, `limit_exceeded`, ...). Waits across reconnects for
        the outcome.

        With `presence=True`, on a presence channel: its members, then each join and leave, are
        yielded as `PresenceEvent`s, and `members(channel)` keeps the list. `member` is this
        client's member data (a dict), used only when the token has no `user_info` claim
        (supplied by the client, so nobody verifies it)."""
        self._check_running()
        if channel in self._channels:
            raise HeraldError("already_subscribed", f"already subscribed to {channel!r}")
        state = ChannelState(channel, since, last, asyncio.get_running_loop().create_future())
        state.presence = presence
        state.member = member if presence else None
        self._channels[channel] = state
        if self._connected.is_set():
            await self._send_subscribe(state)
        return await state.first

    async def unsubscribe(self, channel: str) -> None:
        """Ends a subscription; no message of the channel is yielded after this returns."""
        state = self._channels.pop(channel, None)
        if state is None:
            raise HeraldError("not_subscribed", f"not subscribed to {channel!r}")
        if not state.first.done():
            state.first.cancel()
        if self._connected.is_set():
            await self._command("unsubscribe", {"channel": channel})

    async def publish(self, channel: str, data: Any, *, id: Optional[str] = None) -> Published:
        """Publishes over the WebSocket (the token's `publish` patterns must allow it)."""
        result: Published = await self._command("publish", {"channel": channel, "data": data, "id": id})
        return result

    async def history(self, channel: str, *, since: Optional[int] = None, limit: Optional[int] = None) -> History:
        """Retained messages after seq `since`, at most `limit` (1 to 1000, default 100)."""
        result: History = await self._command("history", {"channel": channel, "since": since, "limit": limit})
        return result

    async def ping(self) -> None:
        await self._command("ping", {})

    async def ack(self, message: Message) -> AckReply:
        """Acknowledges an inbox message, and with it every earlier one of the same log."""
        body = {"channel": message.channel, "seq": message.seq, "epoch": message.epoch or None}
        result: AckReply = await self._command("ack", body)
        return result

    async def refresh_token(self) -> ConnectReply:
        """Gets a fresh token from the token source and sends it with `connect` on the live
        connection (same `sub`); channels it no longer allows are reported as `Unsubscribed`."""
        token = await fetch_token(self._token_source)
        reply: ConnectReply = await self._command("connect", {"token": token})
        return reply

    def cursor(self, channel: str) -> Optional[Cursor]:
        """The channel's cursor: the position of the last message handed to the event queue."""
        state = self._channels.get(channel)
        return state.cursor if state else None

    def members(self, channel: str) -> Optional[List[PresenceMember]]:
        """The members of a channel subscribed with `presence=True`, in the order they joined,
        as the presence frames read so far left them (the previous connection's until a
        resubscribe lists them again); None before they were first listed, or without
        presence."""
        state = self._channels.get(channel)
        return state.member_list() if state else None

    @property
    def cursors(self) -> Dict[str, Optional[Cursor]]:
        return {name: state.cursor for name, state in self._channels.items()}

    # ----- events ----------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        self._settle_handed_inbox()
        if self._closed_by_user:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, _End):
            self._queue.put_nowait(item)  # later calls end too
            if self._fatal is not None:
                raise self._fatal
            raise StopAsyncIteration
        if isinstance(item, InboxMessageEvent):
            self._inbox.handed_out(item.message)
            self._handed_inbox = item.message
        return item

    async def run(self, handler: Handler) -> None:
        """Calls `handler` (plain or async) with each event until the subscriber stops; an inbox
        message is acked (with `auto_ack`) right after the handler returns. An exception from the
        handler propagates (its message is not acked); a fatal error is raised."""
        async for event in self:
            result = handler(event)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                await result
            self._settle_handed_inbox()

    def _settle_handed_inbox(self) -> None:
        message, self._handed_inbox = self._handed_inbox, None
        if message is not None and self.auto_ack and not self._closed_by_user:
            task = asyncio.ensure_future(self._auto_ack(message))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _auto_ack(self, message: Message) -> None:
        try:
            await self.ack(message)
        except HeraldError as error:
            if error.code != CLOSED:
                await self._emit(ErrorEvent(error, message.channel))

    # ----- plumbing --------------------------------------------------------------------------

    def _check_running(self) -> None:
        if self._closed_by_user:
            raise HeraldError(CLOSED, "the subscriber is closed")
        if self._fatal is not None:
            raise self._fatal

    async def _emit(self, event: Event) -> None:
        """Queues an event, waiting while the queue is full (backpressure reaches the server)."""
        await self._queue.put(event)

    def _stop(self, error: Optional[HeraldError]) -> None:
        if self._stopped.is_set():
            return
        self._fatal = error
        self._stopped.set()
        failure = error or HeraldError(CLOSED, "the subscriber is closed")
        for state in self._channels.values():
            if not state.first.done():
                state.first.set_exception(failure)
        self._fail_pending(failure)
        try:
            self._queue.put_nowait(_End())
        except asyncio.QueueFull:
            if self._fatal is None:
                return  # __anext__ sees _closed_by_user
            asyncio.ensure_future(self._queue.put(_End()))

    def _fail_pending(self, error: HeraldError) -> None:
        pending, self._pending = self._pending, {}
        for command in pending.values():
            if not command.future.done():
                command.future.set_exception(error)
                if command.command == "subscribe":
                    command.future.exception()  # nobody awaits it: the channel state reports

    async def _wait_connected(self) -> None:
        if self._connected.is_set():
            return
        self._check_running()
        connected = asyncio.ensure_future(self._connected.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({connected, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            connected.cancel()
            stopped.cancel()
        self._check_running()

    async def _command(self, name: str, body: Dict[str, Any], channel: Optional[str] = None) -> Any:
        """Sends a command with a fresh id once connected and waits (bounded) for its answer."""
        await self._wait_connected()
        future = await self._send_command(name, body, channel)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.request_timeout)
        except asyncio.TimeoutError:
            raise HeraldError(TRANSPORT, f"no answer to {name} within {self.request_timeout} s") from None

    async def _send_command(
        self, name: str, body: Dict[str, Any], channel: Optional[str] = None
    ) -> "asyncio.Future[Any]":
        """Sends a command with a fresh id; the future resolves with its answer."""
        command_id = self._next_id
        self._next_id += 1
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._pending[command_id] = PendingCommand(name, future, channel)
        await self._write(encode_command(name, body, command_id), command_id)
        return future

    async def _send_subscribe(self, state: ChannelState) -> None:
        state.sent_on = self._generation
        state.sent_cursor = state.cursor
        await self._send_command("subscribe", state.subscribe_body(), state.channel)

    async def _send_subscribes(self, states: List[ChannelState]) -> None:
        """Sends the subscribes of `states` together: in batches (see `batches`)."""
        commands = []
        for state in states:
            state.sent_on = self._generation
            state.sent_cursor = state.cursor
            command_id = self._next_id
            self._next_id += 1
            future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
            self._pending[command_id] = PendingCommand("subscribe", future, state.channel)
            commands.append((command_id, encode_command("subscribe", state.subscribe_body(), command_id)))
        await self._write_commands(commands)

    async def _open(self, reconnect: bool) -> None:
        """Opens a connection, authenticates, resends every subscription, then marks the
        subscriber connected. Raises HeraldError on any failure (the socket is closed)."""
        token = await fetch_token(self._token_source)
        ws = await open_websocket(
            self.url,
            open_timeout=self._open_timeout,
            ping_interval=self._ping_interval,
            max_size=self._max_frame_bytes,
        )
        self._generation += 1
        self._ws = ws
        self._disconnect = None
        self._batches.new_connection()
        self._reader_task = asyncio.ensure_future(self._read(ws))
        try:
            reply = ConnectReply(sub="")
            if token:
                future = await self._send_command("connect", {"token": token})
                reply = await asyncio.wait_for(asyncio.shield(future), self.request_timeout)
            while True:  # channels added by subscribe() meanwhile are sent too
                unsent = [s for s in self._channels.values() if s.sent_on != self._generation]
                if not unsent:
                    break
                await self._send_subscribes(unsent)
        except BaseException as error:
            await self._drop_connection()
            if isinstance(error, asyncio.TimeoutError):
                raise HeraldError(TRANSPORT, "no answer to connect") from None
            raise
        self.sub, self.expires = reply.sub, reply.expires
        self._connected.set()
        await self._emit(Connected(reply.sub, reply.expires, reconnect))

    async def _drop_connection(self) -> None:
        self._connected.clear()
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()
        if self._reader_task is not None:
            await asyncio.wait({self._reader_task}, timeout=5)

    async def _supervise(self) -> None:
        """Waits for the connection to end, reports it, and reconnects with backoff."""
        try:
            while True:
                assert self._reader_task is not None
                await asyncio.wait({self._reader_task})
                fatal = await self._report_disconnect()
                if fatal is not None:
                    self._stop(fatal)
                    return
                attempt = 0
                while True:
                    delay = self.backoff.delay(attempt)
                    await asyncio.sleep(delay)
                    try:
                        await self._open(reconnect=True)
                        break
                    except HeraldError as error:
                        if self._is_fatal(error):
                            self._stop(error)
                            return
                        attempt += 1
                        await self._emit(Reconnecting(attempt, self.backoff.delay(attempt), error))
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a bug here must end the iterator, not hang it
            self._stop(HeraldError("internal", f"subscriber failed: {type(error).__name__}: {error}"))
            raise

    async def _report_disconnect(self) -> Optional[HeraldError]:
        ws, self._ws = self._ws, None
        self._connected.clear()
        self._fail_pending(HeraldError(TRANSPORT, "the connection was lost before the answer"))
        disconnect = self._disconnect
        close_code = ws.close_code if ws is not None else None
        self._batches.closed_with(close_code)
        fatal = None
        if disconnect is None and close_code == _REVOKED_CLOSE_CODE:
            disconnect = Disconnect(REVOKED, "access was revoked")
        if disconnect is not None and disconnect.code == REVOKED:
            # Revoked on purpose: reconnecting (even with a fresh token from the callback) would
            # undo an `all`/`sub`/`device` revocation, so the subscriber stops.
            fatal = HeraldError(REVOKED, disconnect.message)
        elif disconnect is not None and disconnect.code in _CLIENT_BUGS:
            fatal = HeraldError(disconnect.code, disconnect.message)
        elif disconnect is not None and disconnect.code == "token_expired" and not callable(self._token_source):
            fatal = HeraldError("token_expired", "the token expired and there is no token callback to renew it", 401)
        await self._emit(
            Disconnected(
                disconnect.code if disconnect else None,
                disconnect.message if disconnect else "the connection ended",
                close_code,
                fatal is None,
            )
        )
        return fatal

    def _is_fatal(self, error: HeraldError) -> bool:
        if error.code in _FATAL:
            return True
        return error.code == "token_expired" and not callable(self._token_source)

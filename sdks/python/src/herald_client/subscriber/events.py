"""What a `Subscriber` reports: the events its iterator yields, in the order they happened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

from ..cursors import Cursor
from ..errors import HeraldError
from ..models.channels import Message, PresenceMember, SubscribeOutcome


@dataclass
class Connected:
    """A connection is open and authenticated, and every subscription was sent again."""

    sub: str
    expires: Optional[int]
    reconnect: bool


@dataclass
class Subscribed:
    """A subscription (re)started. `resumed_from` is the cursor sent with it (None for a plain
    subscribe); if it is set and `recovered` is False, messages may have been missed (the
    channel's log was reset or trimmed): re-sync the channel from its history."""

    outcome: SubscribeOutcome
    resumed_from: Optional[Cursor]

    @property
    def channel(self) -> str:
        return self.outcome.channel

    @property
    def recovered(self) -> bool:
        return self.outcome.recovered

    @property
    def may_have_missed(self) -> bool:
        return self.resumed_from is not None and not self.outcome.recovered


@dataclass
class MessageEvent:
    """A message of a subscribed channel, each exactly once and in seq order per channel."""

    message: Message


@dataclass
class PresenceEvent:
    """A presence channel subscribed with `presence=True` listed its members (`event` is
    `"members"`, first on every (re)subscribe), or a user joined (`"join"`, `member` set) or left
    (`"leave"`). Already applied: `members` is the channel's list after it, in the order they
    joined (what `Subscriber.members(channel)` answers). Presence is live state, never resumed:
    after a reconnect the members come again and replace the list."""

    channel: str
    event: str
    members: List[PresenceMember]
    member: Optional[PresenceMember] = None
    user: Optional[str] = None


@dataclass
class InboxMessageEvent:
    """A push from the device inbox (`$app` or `$device`). Acknowledge it with
    `Subscriber.ack(event.message)`, or let auto-ack do it after your handler returns."""

    message: Message


@dataclass
class Unsubscribed:
    """The server dropped a subscription: a refreshed token no longer allows the channel."""

    channel: str


@dataclass
class Disconnected:
    """The connection ended. `code` and `message` are the server's `disconnect` frame
    (`slow_consumer`, `shutdown`, `token_expired`, `revoked`, `too_large`, `bad_request`), None
    when the connection ended without one; `close_code` is the WebSocket close code if one
    arrived. After `revoked` the subscriber stops (`reconnecting` is False) and its iterator
    raises `HeraldError("revoked", ...)`."""

    code: Optional[str]
    message: str
    close_code: Optional[int]
    reconnecting: bool


@dataclass
class Reconnecting:
    """A reconnect attempt failed (`error`); the next one starts after `delay` seconds."""

    attempt: int
    delay: float
    error: HeraldError


@dataclass
class ErrorEvent:
    """An error the server reported outside any call you are awaiting: a subscription refused when
    it was sent again after a reconnect (`channel` set, and the channel is dropped), an inbox that
    could not be opened, a failed automatic ack, an unreadable frame."""

    error: HeraldError
    channel: Optional[str] = None


Event = Union[
    Connected,
    Subscribed,
    MessageEvent,
    PresenceEvent,
    InboxMessageEvent,
    Unsubscribed,
    Disconnected,
    Reconnecting,
    ErrorEvent,
]

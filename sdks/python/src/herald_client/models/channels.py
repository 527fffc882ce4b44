"""Channels and messages as both the HTTP API and the WebSocket describe them: `Message`,
`Published`, `History`, `SubscribeOutcome`, `ChannelInfo`, and the other WebSocket replies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..errors import UNEXPECTED_RESPONSE, HeraldError
from ..rawjson import scan_array, scan_object
from ._json import LOCAL, from_json, raw_field


@dataclass
class Message:
    """One message of a channel (or of a device inbox, whose `channel` is `$app` or `$device`)."""

    channel: str
    seq: int
    epoch: str
    id: str
    time: int
    data: Any
    #: `data` exactly as the publisher sent it (whitespace included), when read from a frame.
    raw_data: Optional[str] = field(default=None, metadata=LOCAL, compare=False)

    @property
    def is_inbox(self) -> bool:
        """Whether this is a device inbox message (`$app` or `$device`)."""
        return self.channel in ("$app", "$device")

    @classmethod
    def from_text(cls, text: str) -> "Message":
        """A message from its JSON text, keeping `data`'s exact bytes in `raw_data`."""
        try:
            members = scan_object(text)
        except ValueError as error:
            raise HeraldError(UNEXPECTED_RESPONSE, f"message: {error}") from None
        message = from_json(cls, {key: json.loads(raw) for key, raw in members.items()})
        message.raw_data = members["data"]
        return message


def messages_from_text(text: str) -> List[Message]:
    """A JSON array of messages, each keeping its `data` bytes."""
    try:
        items = scan_array(text)
    except ValueError as error:
        raise HeraldError(UNEXPECTED_RESPONSE, f"messages: {error}") from None
    return [Message.from_text(item) for item in items]


@dataclass
class Published:
    """The answer to a publish (HTTP or WebSocket)."""

    channel: str
    seq: int
    id: str
    epoch: str
    time: int
    duplicate: bool


@dataclass
class History:
    """Retained messages of a channel with its state at the time of the read. `first_seq` (the
    oldest retained seq) is given by the HTTP API only."""

    channel: str
    epoch: str
    seq: int
    messages: List[Message]
    first_seq: Optional[int] = None

    @classmethod
    def from_text(cls, text: str) -> "History":
        """A history body, keeping each message's `data` bytes."""
        try:
            members = scan_object(text)
        except ValueError as error:
            raise HeraldError(UNEXPECTED_RESPONSE, f"history: {error}") from None
        history = from_json(cls, {key: json.loads(raw) for key, raw in members.items()})
        history.messages = messages_from_text(members["messages"])
        return history


@dataclass
class SubscribeOutcome:
    """A subscription's start: the channel's newest `seq` and `epoch` when it started, and whether
    the cursor given was resumed exactly (`recovered`)."""

    channel: str
    seq: int
    epoch: str
    recovered: bool


@dataclass
class ChannelInfo:
    """A channel's state (`GET /v1/channels/{name}`)."""

    channel: str
    epoch: str
    seq: int
    first_seq: int
    subscribers: int
    raw: Dict[str, Any] = raw_field()


@dataclass
class PresenceMember:
    """One member of a presence channel: the user id (the client token's `sub`) and its data
    (the token's `user_info` claim, else the client's subscribe `member`, else `{}`)."""

    user: str
    data: Dict[str, Any]


@dataclass
class PresenceFrame:
    """The `presence` frame, to a subscription that asked (docs/protocol.md section 10): the
    channel's `members` first, then each `join` (`user`, `data`) and `leave` (`user`)."""

    channel: str
    event: str
    members: Optional[List[PresenceMember]] = None
    user: Optional[str] = None
    data: Optional[Dict[str, Any]] = None


@dataclass
class ChannelPresence:
    """A presence channel's members, in the order they joined
    (`GET /v1/channels/{name}/presence`)."""

    channel: str
    members: List[PresenceMember]
    count: int


@dataclass
class ChannelList:
    """A page of channels; pass `next` as `after` for the next page (None when none follows)."""

    channels: List[ChannelInfo]
    next: Optional[str] = None


@dataclass
class ConnectReply:
    """The answer to `connect`: who the connection is, when its token expires, and the channels a
    refreshed token no longer allows (dropped)."""

    sub: str
    expires: Optional[int] = None
    unsubscribed: Optional[List[str]] = None


@dataclass
class UnsubscribeReply:
    channel: str


@dataclass
class AckReply:
    """The answer to a WebSocket `ack`: the inbox log and the seq acknowledged."""

    channel: str
    seq: int


@dataclass
class Pong:
    pass


@dataclass
class ErrorBody:
    code: str
    message: str


@dataclass
class Disconnect:
    """Why the server is about to close a WebSocket (`slow_consumer`, `shutdown`,
    `token_expired`, `revoked`, `too_large`, `bad_request`)."""

    code: str
    message: str

"""What a `Subscriber` remembers across connections: each channel's cursor and options, the
commands waiting for their reply, and the inbox messages waiting in the event queue."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from ..cursors import Cursor
from ..models.channels import Message, PresenceFrame, PresenceMember, SubscribeOutcome

INBOX_LOGS = ("$app", "$device")


@dataclass
class ChannelState:
    """One subscription the user asked for: it is sent again on every new connection."""

    channel: str
    #: The position of the last message handed to the event queue (or the subscribe reply's
    #: position before any); None until the first reply when the user gave no cursor.
    cursor: Optional[Cursor]
    last: Optional[bool]
    #: Resolved by the first subscribe reply (or error) after `subscribe()`.
    first: "asyncio.Future[SubscribeOutcome]"
    #: The connection number this subscription was last sent on.
    sent_on: int = -1
    #: The cursor sent with that subscribe (what the `Subscribed` event reports).
    sent_cursor: Optional[Cursor] = None
    #: Ask for the channel's presence frames (a presence channel's members, joins, leaves).
    presence: bool = False
    #: The member data the subscribe gives (used when the token has no `user_info`).
    member: Optional[Dict[str, Any]] = None
    #: With `presence`: the members by user id, in the order they joined; None until the server
    #: first listed them. Kept from the last connection until the next one lists them again.
    members: Optional[Dict[str, PresenceMember]] = None

    def subscribe_body(self) -> Dict[str, Any]:
        since = None
        if self.cursor is not None:
            since = {"seq": self.cursor.seq, "epoch": self.cursor.epoch or None}
        body: Dict[str, Any] = {"channel": self.channel, "since": since, "last": self.last}
        if self.presence:
            body["presence"] = True
            body["member"] = self.member
        return body

    def apply_presence(self, frame: PresenceFrame) -> Optional[Tuple[Optional[PresenceMember], Optional[str]]]:
        """Applies a `presence` frame to the member list: who joined and who left (None for a
        frame it cannot read)."""
        if frame.event == "members":
            self.members = {m.user: m for m in frame.members or []}
            return (None, None)
        if frame.event == "join" and frame.user is not None:
            joined = PresenceMember(frame.user, frame.data or {})
            members = self.members if self.members is not None else {}
            members.pop(joined.user, None)
            members[joined.user] = joined
            self.members = members
            return (joined, joined.user)
        if frame.event == "leave" and frame.user is not None:
            if self.members is not None:
                self.members.pop(frame.user, None)
            return (None, frame.user)
        return None

    def member_list(self) -> Optional[List[PresenceMember]]:
        return None if self.members is None else list(self.members.values())


@dataclass
class PendingCommand:
    """A command sent with an `id`, waiting for the frame that answers it."""

    command: str
    future: "asyncio.Future[Any]"
    channel: Optional[str] = None


def inbox_key(message: Message) -> Tuple[str, str, int]:
    return (message.channel, message.epoch, message.seq)


@dataclass
class InboxTracker:
    """Inbox messages in the event queue, so one redelivered by a new connection while the
    first copy still waits in the queue is not queued twice."""

    queued: Set[Tuple[str, str, int]] = field(default_factory=set)

    def admit(self, message: Message) -> bool:
        key = inbox_key(message)
        if key in self.queued:
            return False
        self.queued.add(key)
        return True

    def handed_out(self, message: Message) -> None:
        self.queued.discard(inbox_key(message))

"""Commands in batches (docs/protocol.md, "Batches": a JSON array of commands in one WebSocket
message, each answered as if sent alone), as a reconnect's resubscribes are sent, and the
fallback for a server that predates them: it answers a batch with one `bad_request` error without
an id (`frame is not a JSON object`) and runs nothing of it, so that batch's commands are sent
again one a message, as is everything after it on that connection. Until the server has answered
a command of a batch, every command goes in an array, so a command sent again after a refusal
keeps its place in the order. A server that closes with 1009 (message too big) after a batch
turns batches off for the subscriber's later connections. No sockets here: `FrameReader` writes
what this plans."""

from __future__ import annotations

from collections import deque
from typing import Deque, List, Optional, Set, Tuple

#: At most this many commands in one batch.
MAX_BATCH_COMMANDS = 100
#: At most this many bytes of commands in one batch: a quarter of the server's default
#: `max_frame_bytes` (64 KiB).
MAX_BATCH_BYTES = 16 * 1024
#: The WebSocket close code for a message over the server's size limit.
MESSAGE_TOO_BIG = 1009
#: How a server that predates batches answers one.
_REFUSAL = "frame is not a JSON object"

#: A command: its id and its text.
Written = Tuple[int, str]


class Batches:
    """Whether commands go in batches, and the batches not yet known to be understood."""

    def __init__(self) -> None:
        #: A server closed with 1009 after a batch: never again.
        self.too_big = False
        #: The current connection's server refused a batch: one command a message on it.
        self.refused = False
        #: Batches written on this connection before any of their commands was answered.
        self.unconfirmed: Deque[List[Written]] = deque()
        self._unconfirmed_ids: Set[int] = set()
        #: Whether a batch was written on this connection.
        self.sent = False

    def new_connection(self) -> None:
        self.refused = False
        self.sent = False
        self.unconfirmed.clear()
        self._unconfirmed_ids.clear()

    @property
    def on(self) -> bool:
        return not (self.too_big or self.refused)

    def plan(self, commands: List[Written]) -> List[str]:
        """The messages that carry `commands`, in order: batches of at most
        MAX_BATCH_COMMANDS commands and MAX_BATCH_BYTES bytes while batches are on (one command
        alone is a message of its own unless a batch is unanswered), else one a message."""
        if not self.on:
            return [text for _, text in commands]
        messages: List[str] = []
        batch: List[Written] = []
        size = 2
        for command in commands:
            length = len(command[1].encode("utf-8")) + 1
            if batch and (len(batch) == MAX_BATCH_COMMANDS or size + length > MAX_BATCH_BYTES):
                messages.append(self._message(batch))
                batch, size = [], 2
            batch.append(command)
            size += length
        if batch:
            messages.append(self._message(batch))
        return messages

    def _message(self, batch: List[Written]) -> str:
        if len(batch) == 1 and not self.unconfirmed:
            return batch[0][1]
        self.unconfirmed.append(batch)
        self._unconfirmed_ids.update(command_id for command_id, _ in batch)
        self.sent = True
        return "[" + ",".join(text for _, text in batch) + "]"

    def answered(self, command_id: int) -> None:
        """A frame answered `command_id`: if it was in a batch, the server takes batches."""
        if command_id in self._unconfirmed_ids:
            self.unconfirmed.clear()
            self._unconfirmed_ids.clear()

    def refusal(self, code: str, message: str) -> Optional[List[Written]]:
        """An `error` without an id: when it refuses the oldest unanswered batch, that batch's
        commands (to send again, one a message); None for any other error."""
        if code != "bad_request" or not message.startswith(_REFUSAL) or not self.unconfirmed:
            return None
        batch = self.unconfirmed.popleft()
        self._unconfirmed_ids.difference_update(command_id for command_id, _ in batch)
        self.refused = True
        return batch

    def closed_with(self, close_code: Optional[int]) -> None:
        if close_code == MESSAGE_TOO_BIG and self.sent:
            self.too_big = True

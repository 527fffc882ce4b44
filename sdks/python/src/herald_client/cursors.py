"""Cursors: a channel's position `(epoch, seq)`, the cursor strings SSE and long-poll use for a
list of channels (`EPOCH:SEQ,EPOCH:SEQ`), and a device's inbox cursor (`$app` then `$device`).

Keep a `Cursor` to resume a channel; persist `str(cursor)` (or `encode_cursors`) if the process
may restart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .errors import ErrorCode, HeraldError

_EPOCH = re.compile(r"[A-Za-z0-9]*\Z")
_SEQ = re.compile(r"[0-9]+\Z")
_U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Cursor:
    """A position in a channel: every message up to and including `seq` of `epoch` is processed.
    An empty epoch means "the channel's current epoch"; seq 0 is "before the first message"."""

    epoch: str = ""
    seq: int = 0

    def __str__(self) -> str:
        return f"{self.epoch}:{self.seq}"

    @classmethod
    def parse(cls, text: str) -> "Cursor":
        """One position (`EPOCH:SEQ`, `:SEQ` or `SEQ`); HeraldError(bad_request) otherwise."""
        (cursor,) = parse_cursors(text, 1)
        if cursor is None:
            raise _bad(f"empty cursor {text!r}")
        return cursor


def _bad(message: str) -> HeraldError:
    return HeraldError(ErrorCode.BAD_REQUEST.value, message)


def _parse_position(text: str) -> Cursor:
    epoch, _, seq = text.rpartition(":")
    if not _EPOCH.match(epoch):
        raise _bad(f"epoch {epoch!r} is not ASCII letters and digits")
    if not _SEQ.match(seq) or int(seq) > _U64_MAX:
        raise _bad(f"seq {seq!r} is not an integer from 0 to 2^64-1")
    return Cursor(epoch, int(seq))


def parse_cursors(text: str, channels: int) -> List[Optional[Cursor]]:
    """A cursor string for `channels` channels: one entry per channel, None where the string
    leaves it unset. Raises HeraldError(bad_request) as the server would answer."""
    if channels < 1:
        raise _bad("a cursor needs at least one channel")
    if not text.strip():
        return [None] * channels
    positions = [part.strip() for part in text.split(",")]
    if len(positions) > channels:
        raise _bad(f"{len(positions)} positions for {channels} channels")
    if any(not part for part in positions):
        raise _bad(f"empty position in {text!r}")
    parsed: List[Optional[Cursor]] = [_parse_position(part) for part in positions]
    return parsed + [None] * (channels - len(parsed))


def encode_cursors(cursors: Sequence[Optional[Cursor]]) -> Optional[str]:
    """The cursor string for these positions, in channel order; None when some are unset (a
    cursor string cannot leave a position out in the middle)."""
    if not cursors or any(cursor is None for cursor in cursors):
        return None
    return ",".join(str(cursor) for cursor in cursors)


@dataclass(frozen=True)
class InboxCursor:
    """A device's acknowledged inbox position: its `$app` log position and its `$device` one."""

    app: Cursor = Cursor()
    device: Cursor = Cursor()

    def __str__(self) -> str:
        return f"{self.app},{self.device}"

    @classmethod
    def parse(cls, text: str) -> "InboxCursor":
        """Never fails: a missing or unreadable position reads as `Cursor("", 0)`."""
        parts = text.split(",")
        return cls(_lenient(parts[0]), _lenient(parts[1] if len(parts) > 1 else ""))


def _lenient(text: str) -> Cursor:
    epoch, _, seq = text.strip().rpartition(":")
    number = int(seq) if _SEQ.match(seq) and int(seq) <= _U64_MAX else 0
    return Cursor(epoch if _EPOCH.match(epoch) else "", number)

"""The WebSocket wire format (docs/protocol.md, section 4): encoding the commands a client sends,
decoding the frames the server sends, and (for tools and tests) reading a command back.

Commands are written canonically: `id` first (left out when None), then the command key, body
fields in the order the protocol lists them, unset optional fields left out. A publish's `data`
may be a `RawJson` to be sent byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .errors import ErrorCode, HeraldError
from .models._json import from_json
from .models.channels import (
    AckReply,
    ConnectReply,
    Disconnect,
    ErrorBody,
    History,
    Message,
    Pong,
    PresenceFrame,
    Published,
    SubscribeOutcome,
    UnsubscribeReply,
)
from .rawjson import RawJson, dumps, scan_object

#: Each command's body fields, in the order the protocol lists them: name -> (kind, required).
COMMAND_FIELDS: Dict[str, Dict[str, Tuple[str, bool]]] = {
    "connect": {"token": ("str", False)},
    "subscribe": {
        "channel": ("str", True),
        "since": ("since", False),
        "last": ("bool", False),
        "presence": ("bool", False),
        "member": ("json", False),
    },
    "unsubscribe": {"channel": ("str", True)},
    "publish": {"channel": ("str", True), "data": ("json", True), "id": ("str", False)},
    "history": {"channel": ("str", True), "since": ("u64", False), "limit": ("u64", False)},
    "ping": {},
    "ack": {"channel": ("str", True), "seq": ("u64", True), "epoch": ("str", False)},
}
_SINCE_FIELDS = {"seq": ("u64", True), "epoch": ("str", False)}
_U64_MAX = 2**64 - 1

FrameBody = Union[
    ConnectReply,
    SubscribeOutcome,
    UnsubscribeReply,
    Published,
    History,
    AckReply,
    Pong,
    ErrorBody,
    Message,
    Disconnect,
    PresenceFrame,
]
_FRAME_TYPES = {
    "connect": ConnectReply,
    "subscribe": SubscribeOutcome,
    "unsubscribe": UnsubscribeReply,
    "publish": Published,
    "history": History,
    "ack": AckReply,
    "pong": Pong,
    "error": ErrorBody,
    "message": Message,
    "disconnect": Disconnect,
    "presence": PresenceFrame,
}


def encode_command(command: str, body: Mapping[str, Any], id: Optional[int] = None) -> str:
    """The text frame for `command` with `body` (None values are left out)."""
    fields = COMMAND_FIELDS.get(command)
    if fields is None:
        raise ValueError(f"unknown command {command!r}")
    ordered: Dict[str, Any] = {}
    if command != "ping":
        unknown = set(body) - set(fields)
        if unknown:
            raise ValueError(f"{command}: unknown fields {sorted(unknown)}")
        for name, (kind, _) in fields.items():
            value = body.get(name)
            if value is None:
                continue
            if kind == "since":
                value = {k: value[k] for k in _SINCE_FIELDS if value.get(k) is not None}
            ordered[name] = value
    frame: Dict[str, Any] = {} if id is None else {"id": id}
    frame[command] = ordered
    return dumps(frame)


@dataclass
class Command:
    """A client command read back from its frame (`decode_command`)."""

    id: Optional[int]
    command: str
    body: Dict[str, Any]


class InvalidCommand(HeraldError):
    """A command frame the server would refuse; `id` is the id its error frame would carry."""

    def __init__(self, code: str, message: str, id: Optional[int]) -> None:
        super().__init__(code, message)
        self.id = id


def decode_command(text: str) -> Command:
    """Reads a command frame as the server does; a publish's `data` comes back as `RawJson`.
    Raises `InvalidCommand` with the code and id the server would answer."""
    try:
        members = scan_object(text)
    except ValueError as error:
        raise InvalidCommand("bad_request", f"frame is not a JSON object: {error}", None) from None
    id_value = json.loads(members.pop("id", "null"))
    id_ok = id_value is None or (
        isinstance(id_value, int) and not isinstance(id_value, bool) and 0 <= id_value <= _U64_MAX
    )
    frame_id = id_value if id_ok else None
    if not id_ok:
        raise InvalidCommand("bad_request", "id must be a non-negative integer", None)
    if len(members) != 1:
        raise InvalidCommand("bad_request", "a frame holds exactly one command", frame_id)
    ((command, raw_body),) = members.items()
    fields = COMMAND_FIELDS.get(command)
    if fields is None:
        raise InvalidCommand("unknown_command", f"unknown command {command!r}", frame_id)
    if command == "ping":
        return Command(frame_id, command, {})
    try:
        raw_fields = scan_object(raw_body)
        body = _check_fields(raw_fields, fields, command)
    except ValueError as error:
        raise InvalidCommand("bad_request", f"{command}: {error}", frame_id) from None
    return Command(frame_id, command, body)


def _check_fields(
    raw_fields: Dict[str, str], fields: Dict[str, Tuple[str, bool]], where: str
) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    for name, raw in raw_fields.items():
        if name not in fields:
            raise ValueError(f"unknown field {name!r}")
        kind, _ = fields[name]
        if kind == "json":
            body[name] = RawJson(raw)
            continue
        value = json.loads(raw)
        if value is None:
            continue
        if kind == "since":
            value = _check_fields(scan_object(raw), _SINCE_FIELDS, f"{where}.since")
        elif not _is_kind(kind, value):
            raise ValueError(f"{name}: expected {kind}")
        body[name] = value
    for name, (_, required) in fields.items():
        if required and name not in body:
            raise ValueError(f"missing field {name!r}")
    return body


def _is_kind(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "u64":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _U64_MAX
    raise AssertionError(kind)


@dataclass
class Frame:
    """A server frame: `kind` is its key (`message`, `subscribe`, `error`, ...), `id` the id of
    the command it answers (None for pushes), `body` the typed content."""

    id: Optional[int]
    kind: str
    body: FrameBody


def decode_frame(text: str) -> Frame:
    """Reads one server text frame. Raises HeraldError(bad_request) for a frame that is not one
    JSON object with exactly one known key (plus `id`) and a body of the right shape."""
    try:
        members = scan_object(text)
        id_value = json.loads(members.pop("id", "null"))
    except ValueError as error:
        raise HeraldError(ErrorCode.BAD_REQUEST.value, f"unreadable frame: {error}") from None
    if id_value is not None and (not isinstance(id_value, int) or isinstance(id_value, bool)):
        raise HeraldError(ErrorCode.BAD_REQUEST.value, f"frame id is not an integer: {id_value!r}")
    if len(members) != 1:
        raise HeraldError(ErrorCode.BAD_REQUEST.value, f"a frame holds one key, not {sorted(members)}")
    ((kind, raw_body),) = members.items()
    body_type = _FRAME_TYPES.get(kind)
    if body_type is None:
        raise HeraldError(ErrorCode.BAD_REQUEST.value, f"unknown frame {kind!r}")
    try:
        if body_type is Message:
            body: Any = Message.from_text(raw_body)
        elif body_type is History:
            body = History.from_text(raw_body)
        else:
            body = from_json(body_type, json.loads(raw_body))
    except (HeraldError, ValueError) as error:
        message = error.message if isinstance(error, HeraldError) else str(error)
        raise HeraldError(ErrorCode.BAD_REQUEST.value, f"{kind} frame: {message}") from None
    return Frame(id_value, kind, body)

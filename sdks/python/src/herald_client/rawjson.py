"""JSON text kept byte for byte: `RawJson`, an encoder that writes it unchanged, and scanners that
split an object or array into the exact text of each of its values.

Herald carries a message's `data` as the publisher's bytes, whitespace included. Python's `json`
module forgets the bytes once it parses them, so this module keeps them: a frame's `data` is read
as the slice of the frame that holds it, and a `RawJson` given to `publish` is sent as written.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Tuple

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class RawJson:
    """JSON text to send exactly as written (checked to be one JSON value)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        json.loads(text)  # raises ValueError for anything that is not one JSON value
        self.text = text

    def value(self) -> Any:
        """The text parsed."""
        return json.loads(self.text)

    def __repr__(self) -> str:
        return f"RawJson({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJson) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def dumps(value: Any) -> str:
    """Compact JSON (no spaces, UTF-8 kept as is, like the server writes it); a `RawJson`
    anywhere inside `value` is written as its text."""
    if isinstance(value, RawJson):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{_plain(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return _plain(value)


def _plain(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _value_end(text: str, index: int) -> int:
    try:
        _, end = _DECODER.raw_decode(text, index)
    except ValueError as error:
        raise ValueError(f"invalid JSON value at {index}: {error}") from None
    return int(end)


def scan_object(text: str) -> Dict[str, str]:
    """The members of the JSON object `text`, each value as its exact text, in order.

    Raises ValueError if `text` is not exactly one JSON object, or repeats a key."""
    members, end = _scan_object_at(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise ValueError(f"trailing characters after the object at {end}")
    return members


def scan_array(text: str) -> List[str]:
    """The items of the JSON array `text`, each as its exact text. Raises ValueError otherwise."""
    index = _skip(text, 0)
    if text[index : index + 1] != "[":
        raise ValueError("not a JSON array")
    items: List[str] = []
    index = _skip(text, index + 1)
    if text[index : index + 1] == "]":
        index += 1
    else:
        while True:
            end = _value_end(text, index)
            items.append(text[index:end])
            index = _skip(text, end)
            separator = text[index : index + 1]
            index += 1
            if separator == "]":
                break
            if separator != ",":
                raise ValueError(f"expected ',' or ']' at {index - 1}")
            index = _skip(text, index)
    if _skip(text, index) != len(text):
        raise ValueError(f"trailing characters after the array at {index}")
    return items


def _scan_object_at(text: str, index: int) -> Tuple[Dict[str, str], int]:
    if text[index : index + 1] != "{":
        raise ValueError("not a JSON object")
    members: Dict[str, str] = {}
    index = _skip(text, index + 1)
    if text[index : index + 1] == "}":
        return members, index + 1
    while True:
        if text[index : index + 1] != '"':
            raise ValueError(f"expected a key at {index}")
        key, index = _DECODER.raw_decode(text, index)
        index = _skip(text, index)
        if text[index : index + 1] != ":":
            raise ValueError(f"expected ':' at {index}")
        index = _skip(text, index + 1)
        end = _value_end(text, index)
        if key in members:
            raise ValueError(f"duplicate key {key!r}")
        members[key] = text[index:end]
        index = _skip(text, end)
        separator = text[index : index + 1]
        index += 1
        if separator == "}":
            return members, index
        if separator != ",":
            raise ValueError(f"expected ',' or '}}' at {index - 1}")
        index = _skip(text, index)

"""Reading the server's JSON into this package's dataclasses, and writing them back.

Every result type is a dataclass whose fields are named as the JSON keys. `from_json` checks that
required keys are present and that every value has the declared type (so an unreadable answer is
a `HeraldError`, never a half-filled object); keys it does not know are kept in `raw`, so a newer
server's additions stay reachable.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import lru_cache
from typing import Any, Dict, Type, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import UNEXPECTED_RESPONSE, HeraldError

T = TypeVar("T")

#: Field metadata: leave the field out of `to_json` (client-side additions such as `raw_data`).
LOCAL = {"local": True}


def raw_field() -> Any:
    """The `raw` field every result carries: the JSON object it was read from."""
    return dataclasses.field(default_factory=dict, repr=False, compare=False, metadata=LOCAL)


@lru_cache(maxsize=None)
def _hints(cls: type) -> Dict[str, Any]:
    module = sys.modules[cls.__module__]
    return get_type_hints(cls, vars(module))


def from_json(cls: Type[T], value: Any) -> T:
    """`value` (parsed JSON) as a `cls`, or HeraldError(unexpected_response) if it does not fit."""
    return _convert(cls, value, cls.__name__)


def _convert(tp: Any, value: Any, where: str) -> Any:
    if tp is Any:
        return value
    origin = get_origin(tp)
    if origin is Union:
        options = [arg for arg in get_args(tp) if arg is not type(None)]
        if value is None:
            return None
        for option in options[:-1]:
            try:
                return _convert(option, value, where)
            except HeraldError:
                continue
        return _convert(options[-1], value, where)
    if origin in (list, tuple):
        (item,) = get_args(tp)[:1]
        if not isinstance(value, list):
            raise _mismatch(where, "an array", value)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _, item = get_args(tp)
        if not isinstance(value, dict):
            raise _mismatch(where, "an object", value)
        return {k: _convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _mismatch(where, "an object", value)
        return _build(tp, value, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _mismatch(where, "a boolean", value)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _mismatch(where, "an integer", value)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _mismatch(where, "a number", value)
    if tp is str:
        if isinstance(value, str):
            return value
        raise _mismatch(where, "a string", value)
    if tp is dict:
        if isinstance(value, dict):
            return value
        raise _mismatch(where, "an object", value)
    raise TypeError(f"no JSON conversion for {tp!r}")


def _build(cls: type, value: Dict[str, Any], where: str) -> Any:
    hints = _hints(cls)
    kwargs: Dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name == "raw":
            kwargs["raw"] = value
            continue
        if field.metadata.get("local"):
            continue
        if field.name in value:
            kwargs[field.name] = _convert(hints[field.name], value[field.name], f"{where}.{field.name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise HeraldError(UNEXPECTED_RESPONSE, f"{where}: missing field {field.name!r}")
    return cls(**kwargs)


def _mismatch(where: str, expected: str, value: Any) -> HeraldError:
    return HeraldError(UNEXPECTED_RESPONSE, f"{where}: expected {expected}, got {value!r:.80}")


def to_json(value: Any) -> Any:
    """A dataclass (recursively) as plain JSON values; optional fields left at None are left out,
    and so are client-side fields (`raw`, `raw_data`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: Dict[str, Any] = {}
        for field in dataclasses.fields(value):
            if field.name == "raw" or field.metadata.get("local"):
                continue
            item = getattr(value, field.name)
            if item is None and field.default is None:
                continue
            out[field.name] = to_json(item)
        return out
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value

"""Replays herald-proto's golden vectors (read from the repository, never copied): commands this
SDK encodes, frames it decodes, cursor strings, inbox cursors, error bodies and tokens."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from herald_client import (
    Cursor,
    ErrorCode,
    HeraldError,
    InboxCursor,
    RawJson,
    decode_token,
    encode_cursors,
    mint_token,
    parse_cursors,
)
from herald_client.models._json import to_json
from herald_client.rawjson import scan_object
from herald_client.wire import InvalidCommand, decode_command, decode_frame, encode_command

from conftest import VECTORS


def load(name: str) -> Dict[str, Any]:
    with open(VECTORS / f"{name}.json", encoding="utf-8") as file:
        return json.load(file)


def cases(name: str, group: str, transport: Any = None) -> Any:
    """Parametrizes a test over one group of a vector file (frames: of one transport). This SDK
    speaks WebSocket and the HTTP API, so it decodes the `ws` and `http` frames; the `sse` and
    `poll` ones belong to transports it does not use."""
    chosen = [c for c in load(name)[group] if transport is None or c.get("transport") == transport]
    return pytest.mark.parametrize("case", chosen, ids=lambda c: c.get("name") or c.get("code"))


def _meaning_of(command: Any) -> Dict[str, Any]:
    body = {k: (v.value() if isinstance(v, RawJson) else v) for k, v in command.body.items()}
    return {"id": command.id, "command": command.command, "body": body}


@cases("commands", "valid")
def test_command_encodes_canonically(case: Dict[str, Any]) -> None:
    meaning = case["meaning"]
    body = dict(meaning["body"])
    if meaning["command"] == "publish":
        # data travels byte for byte: take its exact bytes from the wire form
        body["data"] = RawJson(scan_object(scan_object(case["wire"])["publish"])["data"])
    assert encode_command(meaning["command"], body, meaning["id"]) == case["encoded"]
    assert _meaning_of(decode_command(case["wire"])) == meaning


@cases("commands", "valid")
def test_command_encodes_plain_values(case: Dict[str, Any]) -> None:
    # Without RawJson the encoder writes compact JSON; equal to `encoded` wherever its data is.
    meaning = case["meaning"]
    text = encode_command(meaning["command"], meaning["body"], meaning["id"])
    assert json.loads(text) == json.loads(case["encoded"])
    if "note" not in case:
        assert text == case["encoded"]


@cases("commands", "invalid")
def test_invalid_command_is_refused_like_the_server(case: Dict[str, Any]) -> None:
    with pytest.raises(InvalidCommand) as refused:
        decode_command(case["wire"])
    assert (refused.value.code, refused.value.id) == (case["error"]["code"], case["error"]["id"])


@cases("frames", "valid", "ws")
def test_frame_decodes(case: Dict[str, Any]) -> None:
    meaning = case["meaning"]
    frame = decode_frame(case["wire"])
    assert {"id": frame.id, "frame": frame.kind, "body": to_json(frame.body)} == meaning
    if frame.kind == "message":
        raw = scan_object(scan_object(case["wire"])["message"])["data"]
        assert frame.body.raw_data == raw  # type: ignore[union-attr]


@cases("frames", "valid", "http")
def test_http_history_body_decodes(case: Dict[str, Any]) -> None:
    from herald_client import History

    history = History.from_text(case["wire"])
    assert to_json(history) == case["meaning"]["body"]


@cases("frames", "invalid")
def test_invalid_frame_is_refused(case: Dict[str, Any]) -> None:
    with pytest.raises(HeraldError) as refused:
        decode_frame(case["wire"])
    assert refused.value.code == case["error"]


@cases("cursors", "valid")
def test_cursor_string(case: Dict[str, Any]) -> None:
    parsed = parse_cursors(case["wire"], case["channels"])
    expected = [None if m is None else Cursor(m["epoch"], m["seq"]) for m in case["meaning"]]
    assert parsed == expected
    assert encode_cursors(parsed) == case["encoded"]


@cases("cursors", "invalid")
def test_invalid_cursor_string(case: Dict[str, Any]) -> None:
    with pytest.raises(HeraldError) as refused:
        parse_cursors(case["wire"], case["channels"])
    assert refused.value.code == case["error"]


@pytest.mark.parametrize(
    "case", load("inbox_cursors")["valid"] + load("inbox_cursors")["lenient"], ids=lambda c: c["name"]
)
def test_inbox_cursor(case: Dict[str, Any]) -> None:
    cursor = InboxCursor.parse(case["wire"])
    meaning = case["meaning"]
    assert cursor == InboxCursor(Cursor(**meaning["app"]), Cursor(**meaning["device"]))
    assert str(cursor) == case["encoded"]


@cases("errors", "valid")
def test_error_bodies(case: Dict[str, Any]) -> None:
    code = ErrorCode.parse(case["code"])
    assert code is not None and code.status == case["status"]
    http = HeraldError.from_http(case["status"], case["http_body"])
    assert (http.code, http.message, http.status) == (case["code"], case["message"], case["status"])
    assert http.error_code is code
    frame = decode_frame(case["ws_frame"])
    assert (frame.id, frame.kind) == (1, "error")
    assert (frame.body.code, frame.body.message) == (case["code"], case["message"])  # type: ignore[union-attr]


def test_error_codes_in_documented_order() -> None:
    assert [code.value for code in ErrorCode] == [case["code"] for case in load("errors")["valid"]]


@cases("errors", "invalid")
def test_not_an_error_code(case: Dict[str, Any]) -> None:
    assert ErrorCode.parse(case["wire"]) is None


@cases("tokens", "valid")
def test_token_mints_byte_for_byte(case: Dict[str, Any]) -> None:
    claims = case["claims"]
    token = mint_token(
        case["secret"],
        sub=claims.get("sub"),
        exp=claims.get("exp"),
        channels=claims.get("channels"),
        publish=claims.get("publish"),
        device=claims.get("device"),
        iat=claims.get("iat"),
        jti=claims.get("jti"),
        app=case["app"],
    )
    assert token == case["token"]
    assert decode_token(case["token"], case["secret"], now=0) == claims


@pytest.mark.parametrize(
    "case", [c for c in load("tokens")["invalid"] if "kid" not in c["name"]], ids=lambda c: c["name"]
)
def test_invalid_token_is_refused_locally(case: Dict[str, Any]) -> None:
    # (a kid naming an unknown app only the server can refuse: see test_subscriber_errors.py)
    with pytest.raises(HeraldError) as refused:
        decode_token(case["token"], case["secret"])
    assert refused.value.code == case["error"]

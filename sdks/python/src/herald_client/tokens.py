"""Client tokens (docs/protocol.md, section 3): minting HS256 JWTs with the standard library, the
way Herald's own minting does it byte for byte, and reading one back.

A backend that holds an app's token secret can mint tokens for its users without a request to
Herald; `Herald.create_token` asks the server instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Dict, Optional, Sequence

from .errors import ErrorCode, HeraldError

_CLAIM_TYPES = {
    "sub": str,
    "exp": int,
    "nbf": int,
    "channels": list,
    "publish": list,
    "device": str,
    "iat": int,
    "jti": str,
    "user_info": dict,
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def mint_token(
    secret: str,
    *,
    sub: Optional[str] = None,
    channels: Optional[Sequence[str]] = None,
    publish: Optional[Sequence[str]] = None,
    device: Optional[str] = None,
    exp: Optional[int] = None,
    ttl: Optional[float] = None,
    iat: Optional[int] = None,
    jti: Optional[str] = None,
    user_info: Optional[Dict[str, Any]] = None,
    app: str = "default",
) -> str:
    """A client token signed with `secret` (the app's token secret).

    `exp` is seconds since the Unix epoch (or give `ttl`, seconds from now); without either the
    token never expires. `iat` (issued at, seconds since the Unix epoch) and `jti` (the token's
    id, 1 to 128 printable ASCII characters) make the token revocable by issue time or by id
    (`Herald.revoke`); neither is set unless given. For an app other than `default` the header
    names it as `kid`. `user_info` (a JSON object) is what presence channels show of the user.
    Claims are written in the order `sub, exp, channels, publish, device, iat, jti, user_info`,
    empty ones left out, so the same arguments always give the same token."""
    if exp is not None and ttl is not None:
        raise ValueError("give exp or ttl, not both")
    if ttl is not None:
        exp = int(time.time() + ttl)
    header: Dict[str, Any] = {"typ": "JWT", "alg": "HS256"}
    if app != "default":
        header["kid"] = app
    claims: Dict[str, Any] = {}
    for name, value in (
        ("sub", sub),
        ("exp", exp),
        ("channels", list(channels) if channels is not None else None),
        ("publish", list(publish) if publish is not None else None),
        ("device", device),
        ("iat", iat),
        ("jti", jti),
        ("user_info", user_info),
    ):
        if value is not None and value != "" and value != []:
            claims[name] = value
    signing_input = f"{_b64(_compact(header))}.{_b64(_compact(claims))}"
    signature = hmac.new(secret.encode("utf-8"), signing_input.encode("ascii"), hashlib.sha256)
    return f"{signing_input}.{_b64(signature.digest())}"


def decode_token(token: str, secret: str, *, now: Optional[float] = None) -> Dict[str, Any]:
    """The claims of a token signed with `secret`, checked as the server checks them (HS256 only,
    signature, claim types, `exp` and `nbf` without leeway). Raises HeraldError with
    `unauthorized` or `token_expired`. (Whether a `kid` names a known app only the server knows.)"""
    def refuse(why: str) -> HeraldError:
        return HeraldError(ErrorCode.UNAUTHORIZED.value, f"invalid token: {why}", 401)

    parts = token.split(".")
    if len(parts) != 3:
        raise refuse("not a JWT")
    try:
        header = json.loads(_unb64(parts[0]))
        claims = json.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except ValueError:
        raise refuse("not a JWT") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise refuse("the algorithm must be HS256")
    expected = hmac.new(
        secret.encode("utf-8"), f"{parts[0]}.{parts[1]}".encode("ascii"), hashlib.sha256
    ).digest()
    if not hmac.compare_digest(signature, expected):
        raise refuse("bad signature")
    if not isinstance(claims, dict):
        raise refuse("claims are not an object")
    for name, kind in _CLAIM_TYPES.items():
        value = claims.get(name)
        if value is None:
            continue
        wrong = not isinstance(value, kind) or isinstance(value, bool)
        if kind is list and not wrong:
            wrong = not all(isinstance(item, str) for item in value)
        if wrong:
            raise refuse(f"claim {name!r} has the wrong type")
    current = time.time() if now is None else now
    if isinstance(claims.get("nbf"), int) and current < claims["nbf"]:
        raise refuse("not valid yet (nbf)")
    if isinstance(claims.get("exp"), int) and current >= claims["exp"]:
        raise HeraldError(ErrorCode.TOKEN_EXPIRED.value, "the token has expired", 401)
    return claims

"""The HTTP plumbing every publisher call shares: base URL, credentials, JSON bodies (with
`RawJson` kept byte for byte), and turning every failure into a `HeraldError`."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Dict, Mapping, Optional, Sequence, Type, TypeVar
from urllib.parse import quote

import httpx

from ..errors import TRANSPORT, UNEXPECTED_RESPONSE, HeraldError
from ..models._json import from_json
from ..rawjson import dumps

T = TypeVar("T")


class _Unset(Enum):
    UNSET = "UNSET"


#: "Leave this field alone" in a patch, where None means "remove it".
UNSET = _Unset.UNSET


class Auth(Enum):
    """Which credential a route takes."""

    NONE = "none"
    PUBLISHER = "publisher"  # the publisher key
    ADMIN = "admin"  # the admin key (falls back to the publisher key if no admin key is set)
    EITHER = "either"  # the admin key if set, else the publisher key


def segment(value: str) -> str:
    """One path segment (an app id, device id, push id), percent-encoded."""
    return quote(value, safe="")


def channel_path(name: str) -> str:
    """A channel name in a path: written as is, slashes included (other bytes percent-encoded)."""
    return quote(name, safe="/:@=")


def body_of(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """A JSON body from keyword arguments: None and UNSET values left out."""
    return {k: v for k, v in fields.items() if v is not None and v is not UNSET}


class HttpBase:
    """Holds the connection pool and credentials; the route mixins call `_call`."""

    def __init__(
        self,
        url: str,
        key: Optional[str] = None,
        *,
        admin_key: Optional[str] = None,
        timeout: float = 30.0,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._key = key
        self._admin_key = admin_key
        self._owns_client = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)

    def __repr__(self) -> str:  # keys never appear in logs
        return f"{type(self).__name__}(url={self.url!r})"

    async def aclose(self) -> None:
        """Closes the connection pool (if this client made it)."""
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _credential(self, auth: Auth) -> Optional[str]:
        if auth is Auth.NONE:
            return None
        if auth in (Auth.ADMIN, Auth.EITHER) and self._admin_key:
            return self._admin_key
        return self._key

    async def _send(
        self,
        method: str,
        path: str,
        *,
        auth: Auth = Auth.PUBLISHER,
        bearer: Optional[str] = None,
        body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
        ok: Sequence[int] = (200,),
    ) -> httpx.Response:
        """Sends one request; answers the response when its status is in `ok`, else raises the
        server's error (or `transport` when the server could not be reached)."""
        all_headers: Dict[str, str] = dict(headers or {})
        credential = bearer if bearer is not None else self._credential(auth)
        if credential:
            all_headers["Authorization"] = f"Bearer {credential}"
        content: Optional[bytes] = None
        if body is not None:
            content = dumps(body).encode("utf-8")
            all_headers["Content-Type"] = "application/json"
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = await self._http.request(
                method, self.url + path, content=content, params=query, headers=all_headers
            )
        except httpx.HTTPError as error:
            raise HeraldError(TRANSPORT, f"{method} {path}: {type(error).__name__}: {error}") from None
        if response.status_code not in ok:
            raise HeraldError.from_http(
                response.status_code, response.text, response.headers.get("Retry-After")
            )
        return response

    async def _call(self, cls: Type[T], method: str, path: str, **kwargs: Any) -> T:
        """`_send`, then the body read as a `cls`."""
        response = await self._send(method, path, **kwargs)
        return from_json(cls, _json(response))

    async def _call_json(self, method: str, path: str, **kwargs: Any) -> Any:
        return _json(await self._send(method, path, **kwargs))


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json(response: httpx.Response) -> Any:
    try:
        return json.loads(response.text)
    except ValueError:
        raise HeraldError(
            UNEXPECTED_RESPONSE,
            f"HTTP {response.status_code}: not JSON: {response.text[:200]!r}",
            response.status_code,
        ) from None

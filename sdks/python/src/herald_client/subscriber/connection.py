"""Opening one WebSocket to `/v1/ws` and getting a token from the user's token source, with every
failure turned into a `HeraldError`."""

from __future__ import annotations

import inspect
from typing import Awaitable, Callable, Optional, Union
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus

from .._version import __version__
from ..errors import TRANSPORT, HeraldError

#: A token, or a function (plain or async) answering a fresh one; None connects anonymously.
TokenSource = Union[str, Callable[[], Union[str, Awaitable[str]]], None]

#: Client-side code: the token callback raised something other than a HeraldError.
TOKEN_CALLBACK = "token_callback"


def websocket_url(url: str) -> str:
    """`ws(s)://HOST/v1/ws` from a server URL (`http://HOST`, `https://HOST`, `ws://HOST`, or the
    full `/v1/ws` URL)."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss"):
        raise ValueError(f"not an http(s) or ws(s) URL: {url!r}")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/ws"):
        path += "/v1/ws"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


async def fetch_token(source: TokenSource) -> Optional[str]:
    """The current token from `source` (calling it if it is a function)."""
    if source is None or isinstance(source, str):
        return source
    try:
        token = source()
        if inspect.isawaitable(token):
            token = await token
    except HeraldError:
        raise
    except Exception as error:  # the user's callback: reported, never swallowed
        raise HeraldError(TOKEN_CALLBACK, f"the token callback raised {type(error).__name__}: {error}") from error
    if not isinstance(token, str):
        raise HeraldError(TOKEN_CALLBACK, f"the token callback answered {type(token).__name__}, not str")
    return token


async def open_websocket(
    url: str, *, open_timeout: float, ping_interval: Optional[float], max_size: Optional[int]
) -> ClientConnection:
    """Opens the WebSocket (no token in the URL: it is sent with `connect`). An HTTP refusal
    (for example `429 limit_exceeded`) is the server's error; anything else is `transport`."""
    try:
        return await connect(
            url,
            compression=None,  # the server negotiates no extension
            open_timeout=open_timeout,
            ping_interval=ping_interval,
            ping_timeout=ping_interval,
            close_timeout=5,
            max_size=max_size,
            user_agent_header=f"herald-client-python/{__version__}",
            proxy=None,
        )
    except InvalidStatus as error:
        response = error.response
        body = response.body.decode("utf-8", "replace") if response.body else ""
        raise HeraldError.from_http(
            response.status_code, body, response.headers.get("Retry-After")
        ) from None
    except (OSError, TimeoutError, InvalidHandshake) as error:
        raise HeraldError(TRANSPORT, f"cannot open {url}: {type(error).__name__}: {error}") from None

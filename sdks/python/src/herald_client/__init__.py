"""herald_client (distribution `herald-push-client`): the Python client for Herald, the self-hosted
push server.

* `Herald` — asyncio publisher client for every HTTP route (`SyncHerald` wraps it for plain code);
* `Subscriber` — resuming WebSocket client: exact resume, reconnect with backoff, token refresh,
  device inbox with acks, events as an async iterator;
* `mint_token` — HS256 client tokens with the standard library;
* `HeraldError` — every failure, with the server's `code`, `message`, HTTP `status`, `retry_after`.
"""

from ._version import __version__
from .cursors import Cursor, InboxCursor, encode_cursors, parse_cursors
from .errors import ErrorCode, HeraldError, NotReadyError
from .models import *  # noqa: F401,F403  (the result types)
from .models import __all__ as _models
from .publisher import UNSET, BatchResult, Herald
from .rawjson import RawJson
from .subscriber import (
    Backoff,
    Connected,
    Disconnected,
    ErrorEvent,
    Event,
    InboxMessageEvent,
    MessageEvent,
    PresenceEvent,
    Reconnecting,
    Subscribed,
    Subscriber,
    TokenSource,
    Unsubscribed,
)
from .sync import SyncHerald
from .tokens import decode_token, mint_token

__all__ = [
    "__version__",
    "Cursor",
    "InboxCursor",
    "encode_cursors",
    "parse_cursors",
    "ErrorCode",
    "HeraldError",
    "NotReadyError",
    "UNSET",
    "BatchResult",
    "Herald",
    "SyncHerald",
    "RawJson",
    "Backoff",
    "Connected",
    "Disconnected",
    "ErrorEvent",
    "Event",
    "InboxMessageEvent",
    "MessageEvent",
    "PresenceEvent",
    "Reconnecting",
    "Subscribed",
    "Subscriber",
    "TokenSource",
    "Unsubscribed",
    "decode_token",
    "mint_token",
    *_models,
]

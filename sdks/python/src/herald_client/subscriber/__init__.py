"""The subscriber client (WebSocket): resume, reconnect, token refresh, device inbox."""

from .backoff import Backoff
from .client import Subscriber
from .connection import TokenSource
from .events import (
    Connected,
    Disconnected,
    ErrorEvent,
    Event,
    InboxMessageEvent,
    MessageEvent,
    PresenceEvent,
    Reconnecting,
    Subscribed,
    Unsubscribed,
)

__all__ = [
    "Backoff",
    "Subscriber",
    "TokenSource",
    "Connected",
    "Disconnected",
    "ErrorEvent",
    "Event",
    "InboxMessageEvent",
    "MessageEvent",
    "PresenceEvent",
    "Reconnecting",
    "Subscribed",
    "Unsubscribed",
]

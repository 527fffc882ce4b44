"""What the admin dashboard reads, as typed results (docs/openapi.yaml, `GET /v1/overview` and
`GET /v1/devices/{id}/inbox`), and the answer of a revocation (`POST /v1/apps/{id}/revoke`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ._json import raw_field
from .apps import AppLimits, ProviderFigures, Usage
from .devices import LogPosition


@dataclass
class Histogram:
    """Cumulative buckets `[upper bound in seconds, observations at or below it]`, ascending."""

    buckets: List[List[float]]
    sum_seconds: float
    count: int


@dataclass
class ServerFigures:
    """This process's figures (admin key only); counters are cumulative since it started."""

    connections: Dict[str, int]
    subscriptions: int
    published: int
    deliveries: int
    written: Dict[str, int]
    slow_consumer_disconnects: int
    delivery_lag: Histogram
    publish_latency: Histogram
    raw: Dict[str, Any] = raw_field()


@dataclass
class AppOverview:
    """One app's figures: usage totals, live connections on this node, devices, limits, and per
    provider the delivery worker's figures and queue depth."""

    app: str
    name: str
    connections: int
    usage: Usage
    devices: int
    limits: AppLimits
    providers: Dict[str, ProviderFigures]
    raw: Dict[str, Any] = raw_field()


@dataclass
class Overview:
    """`GET /v1/overview`: `server` is None with a publisher key, and `apps` holds its app only."""

    role: str
    time_ms: int
    apps: List[AppOverview]
    server: Optional[ServerFigures] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class InboxLogPosition:
    """One inbox log of a device: the position it acknowledged, the log's newest message, and how
    many messages lie between."""

    acked: LogPosition
    head: LogPosition
    unacked: int


@dataclass
class InboxEntry:
    """One of a device's recent pushes: its log (`app` or `device`), whether the device
    acknowledged it, and its receipt (None when the receipt is gone)."""

    id: str
    log: str
    seq: int
    time: int
    acked: bool
    receipt: Optional[Dict[str, Any]] = None


@dataclass
class DeviceInbox:
    """`GET /v1/devices/{id}/inbox`: the acknowledged positions and the 10 newest pushes, newest
    first."""

    device: str
    cursor: str
    app_log: InboxLogPosition
    device_log: InboxLogPosition
    recent: List[InboxEntry]
    raw: Dict[str, Any] = raw_field()


@dataclass
class Revoked:
    """The answer of a revocation: how many connections the answering node closed."""

    closed: int

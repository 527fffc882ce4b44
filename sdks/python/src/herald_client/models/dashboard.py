"""What the admin dashboard reads, as typed results (docs/openapi.yaml, `GET /v1/overview` and
`GET /v1/devices/{id}/inbox`), the answer of a revocation (`POST /v1/apps/{id}/revoke`), and the
audit log of admin actions (`GET /v1/audit`)."""

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


@dataclass
class AuditActor:
    """Who acted: the credential's role (`admin`, `publisher`, or `anonymous` for a failed
    log-in), a publisher key's id (never the key), and how it came (`bearer`, `session`,
    `login`)."""

    role: str
    via: str
    key_id: Optional[str] = None


@dataclass
class AuditEntry:
    """One admin action: who, from where, what, when (server time, ms) and how it ended (`ok` or
    the error code). `details` never holds a secret."""

    id: int
    time: int
    actor: AuditActor
    action: str
    details: Dict[str, Any]
    result: str
    source: Optional[str] = None
    user_agent: Optional[str] = None
    app: Optional[str] = None
    target: Optional[str] = None


@dataclass
class AuditPage:
    """A page of the audit log, newest first; `next_cursor` continues with older entries."""

    entries: List[AuditEntry]
    next_cursor: Optional[str] = None

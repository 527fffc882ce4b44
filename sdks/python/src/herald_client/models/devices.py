"""Devices, pushes, receipts, inbox acknowledgements and minted tokens (docs/push.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ._json import raw_field


@dataclass
class WebPushKeys:
    p256dh: str
    auth: str


@dataclass
class Device:
    id: str
    platform: str
    tags: List[str]
    active: bool
    created: int
    updated: int
    token: Optional[str] = None
    keys: Optional[WebPushKeys] = None
    user: Optional[str] = None
    locale: Optional[str] = None
    inactive_reason: Optional[str] = None
    raw: Dict[str, Any] = raw_field()

    def __repr__(self) -> str:  # provider tokens stay out of logs
        return (
            f"Device(id={self.id!r}, platform={self.platform!r}, user={self.user!r}, "
            f"tags={self.tags!r}, active={self.active!r})"
        )


@dataclass
class RegisteredDevice:
    """A registration's answer: the device, and whether it was new (`201`) or replaced (`200`)."""

    device: Device
    created: bool


@dataclass
class DeviceList:
    """A page of devices; pass `next` as `after` for the next page (None when none follows)."""

    devices: List[Device]
    next: Optional[str] = None


@dataclass
class DeviceBatchResult:
    created: int
    updated: int
    ids: List[str]


@dataclass
class PushAccepted:
    """A push the server accepted: its id, how many devices it targets (None while a broadcast is
    being counted) and whether it repeats an earlier push with the same id."""

    id: str
    duplicate: bool
    targeted: Optional[int] = None


@dataclass
class ProviderReceipt:
    queued: int
    live: int
    sent: int
    accepted: int
    failed: Dict[str, int]
    skipped: Dict[str, int]
    dead: int
    in_doubt: int
    expanding: bool


@dataclass
class DeviceReceipt:
    device: str
    provider: str
    state: str
    attempts: int
    in_doubt: bool
    result: Optional[str] = None


@dataclass
class Receipt:
    """What became of a push: devices targeted, delivered (acknowledged), pending, expired."""

    id: str
    delivered: int
    pending: int
    expired: int
    created: int
    expires: int
    targeted: Optional[int] = None
    delivery: Optional[str] = None
    providers: Optional[ProviderReceipt] = None
    devices: Optional[List[DeviceReceipt]] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class LogPosition:
    epoch: str
    seq: int


@dataclass
class AckResult:
    """A device's acknowledged inbox cursor after an ack."""

    cursor: str
    app: LogPosition
    device: LogPosition


@dataclass
class MintedToken:
    token: str
    expires: Optional[int] = None

    def __repr__(self) -> str:
        return f"MintedToken(token=..., expires={self.expires!r})"

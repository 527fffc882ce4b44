"""Typed results of the HTTP API and the WebSocket protocol (dataclasses named as the JSON)."""

from .apps import (
    App,
    AppLimits,
    AppStats,
    CreatedApp,
    CreatedKey,
    DeadLetter,
    DeadLetterList,
    JobStats,
    KeyInfo,
    ProviderFigures,
    ProviderPublic,
    PublicKey,
    ReplayedJob,
    RotatedSecret,
    TokenKeys,
    Usage,
)
from .channels import (
    AckReply,
    ChannelInfo,
    ChannelList,
    ChannelPresence,
    ConnectReply,
    Disconnect,
    History,
    Message,
    PresenceFrame,
    PresenceMember,
    Published,
    SubscribeOutcome,
)
from .dashboard import (
    AppOverview,
    AuditActor,
    AuditEntry,
    AuditPage,
    DeviceInbox,
    Histogram,
    InboxEntry,
    InboxLogPosition,
    Overview,
    Revoked,
    ServerFigures,
)
from .devices import (
    AckResult,
    Device,
    DeviceBatchResult,
    DeviceList,
    DeviceReceipt,
    LogPosition,
    MintedToken,
    ProviderReceipt,
    PushAccepted,
    Receipt,
    RegisteredDevice,
    WebPushKeys,
)
from .probes import BusCheck, CheckError, Readiness, ReadinessChecks, StoreCheck

__all__ = [
    "App", "AppLimits", "AppStats", "CreatedApp", "CreatedKey", "DeadLetter", "DeadLetterList",
    "JobStats", "KeyInfo", "ProviderFigures", "ProviderPublic", "PublicKey", "ReplayedJob",
    "RotatedSecret", "TokenKeys", "Usage",
    "AckReply", "ChannelInfo", "ChannelList", "ConnectReply", "Disconnect", "History", "Message",
    "Published", "SubscribeOutcome", "ChannelPresence", "PresenceFrame", "PresenceMember", "AckResult", "Device", "DeviceBatchResult", "DeviceList",
    "DeviceReceipt", "LogPosition", "MintedToken", "ProviderReceipt", "PushAccepted", "Receipt",
    "RegisteredDevice", "WebPushKeys", "AppOverview", "AuditActor", "AuditEntry", "AuditPage", "DeviceInbox", "Histogram", "InboxEntry",
    "InboxLogPosition", "Overview", "Revoked", "ServerFigures",
    "BusCheck", "CheckError", "Readiness", "ReadinessChecks", "StoreCheck",
]

"""Apps and what hangs off them (docs/openapi.yaml, tags apps, providers, jobs): `App`, keys,
usage statistics, provider credentials' public parts, the provider job queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ._json import raw_field


@dataclass
class AppLimits:
    """An app's limits; None means "no limit" (or, for `ack_window_ms`, the server default)."""

    max_devices: Optional[int] = None
    max_connections: Optional[int] = None
    max_message_bytes: Optional[int] = None
    ack_window_ms: Optional[int] = None


@dataclass
class App:
    id: str
    name: str
    limits: AppLimits
    created: int
    raw: Dict[str, Any] = raw_field()


@dataclass
class CreatedApp:
    """A new app with its first publisher key and its token secret (shown once: keep them)."""

    app: App
    key: str
    key_id: str
    token_secret: str

    def __repr__(self) -> str:  # the key and the secret never appear in logs
        return f"CreatedApp(app={self.app!r}, key_id={self.key_id!r}, key=..., token_secret=...)"


@dataclass
class PublicKey:
    """A public key that verifies an app's client tokens: PEM, RSA for RS256 or P-256 for ES256,
    named by `kid` in a token's header."""

    alg: str
    pem: str
    kid: Optional[str] = None


@dataclass
class TokenKeys:
    """What verifies an app's client tokens (never a secret): whether it has an HS256 secret,
    until when the previous secret of a rotation verifies (seconds since the Unix epoch), its
    public keys and its JWKS URL."""

    app: str
    hs256: bool
    previous_valid_until: Optional[int]
    keys: List[PublicKey]
    jwks_url: Optional[str]


@dataclass
class RotatedSecret:
    """An app's new HS256 token secret (shown once) and until when the previous one verifies."""

    app: str
    token_secret: str
    previous_valid_until: Optional[int]

    def __repr__(self) -> str:  # the secret never appears in logs
        return (
            f"RotatedSecret(app={self.app!r}, token_secret=..., "
            f"previous_valid_until={self.previous_valid_until!r})"
        )


@dataclass
class KeyInfo:
    app: str
    id: str
    label: str
    created: int


@dataclass
class CreatedKey:
    """A new publisher key (shown once)."""

    key: str
    key_id: str
    label: str

    def __repr__(self) -> str:
        return f"CreatedKey(key_id={self.key_id!r}, label={self.label!r}, key=...)"


@dataclass
class Usage:
    published: int
    deliveries: int
    acks: int
    peak_connections: int


@dataclass
class ProviderFigures:
    """One provider's send statistics and queue state (fields present as the server sends them)."""

    sends: Optional[int] = None
    successes: Optional[int] = None
    failures: Optional[Dict[str, Any]] = None
    retries: Optional[int] = None
    avg_ms: Optional[float] = None
    p95_ms: Optional[float] = None
    queued: Optional[int] = None
    dead: Optional[int] = None
    oldest_age_ms: Optional[int] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class AppStats:
    app: str
    usage: Usage
    devices: int
    limits: AppLimits
    providers: Dict[str, ProviderFigures]
    raw: Dict[str, Any] = raw_field()


@dataclass
class ProviderPublic:
    """The public part of an app's credentials for one provider (never the secret parts)."""

    provider: str
    updated: int
    auth: Optional[str] = None
    topic: Optional[str] = None
    environment: Optional[str] = None
    key_id: Optional[str] = None
    team_id: Optional[str] = None
    project_id: Optional[str] = None
    client_email: Optional[str] = None
    subject: Optional[str] = None
    public_key: Optional[str] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class JobStats:
    app: str
    providers: Dict[str, ProviderFigures]


@dataclass
class DeadLetter:
    """A provider job that failed all its attempts."""

    id: int
    push: str
    kind: str
    provider: Any
    device: str
    attempts: int
    reason: str
    died: int


@dataclass
class DeadLetterList:
    """A page of dead letters; pass `next` as `after` for the next page (None when none follows)."""

    jobs: List[DeadLetter]
    next: Optional[int] = None


@dataclass
class ReplayedJob:
    id: int
    state: str

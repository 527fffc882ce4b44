"""What the readiness probe answers (docs/openapi.yaml, `GET /readyz` and its `Readiness` schema):
each check's status, the error of a failing one, and the failing checks as `HeraldError`s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from ..errors import ErrorCode, HeraldError
from ._json import raw_field


@dataclass
class CheckError:
    """A failing check's error, in the `{"code","message"}` form of every API error."""

    code: str
    message: str


@dataclass
class StoreCheck:
    """Whether the store takes writes: `status` `ok` or `failing` (then with `error`)."""

    status: str
    error: Optional[CheckError] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class BusCheck:
    """The bus to the other nodes: `link` `local` (one node), `connected` or `disconnected`
    (`status` `failing`, `error` code `bus_unavailable`)."""

    status: str
    link: str
    error: Optional[CheckError] = None
    raw: Dict[str, Any] = raw_field()


@dataclass
class ReadinessChecks:
    """Every check `/readyz` makes; `draining` is True once the server began shutting down."""

    store: StoreCheck
    bus: BusCheck
    draining: bool
    raw: Dict[str, Any] = raw_field()


@dataclass
class Readiness:
    """`GET /readyz`: `status` `ready` or `not_ready`, and what each check found."""

    status: str
    checks: ReadinessChecks
    raw: Dict[str, Any] = raw_field()

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    def failing(self) -> Dict[str, HeraldError]:
        """Each failing check by name (`store`, `bus`, `draining`) with its error (`draining`,
        which carries none, as `shutting_down`); empty when ready."""
        found: Dict[str, HeraldError] = {}
        for name, check in (("store", self.checks.store), ("bus", self.checks.bus)):
            if check.status != "ok":
                error = check.error or CheckError("unexpected_response", f"status {check.status!r}")
                found[name] = HeraldError(error.code, error.message)
        if self.checks.draining:
            found["draining"] = HeraldError(
                ErrorCode.SHUTTING_DOWN.value, "the server is shutting down"
            )
        return found

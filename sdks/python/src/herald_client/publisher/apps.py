"""Routes for apps and their keys and statistics (admin key), revoking an app's client access
(admin key or the app's publisher key), the dashboard's live figures (`overview`), provider
credentials (admin key or the app's publisher key), the VAPID public key (no key) and the
provider job queue."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ..models._json import from_json, to_json
from ..models.apps import (
    App,
    AppLimits,
    AppStats,
    CreatedApp,
    CreatedKey,
    DeadLetterList,
    JobStats,
    KeyInfo,
    ProviderPublic,
    PublicKey,
    ReplayedJob,
    RotatedSecret,
    TokenKeys,
)
from ..models.dashboard import AuditPage, Overview, Revoked
from ._http import Auth, HttpBase, body_of, segment


def _limits(limits: Optional[Any]) -> Optional[Dict[str, Any]]:
    if limits is None or isinstance(limits, Mapping):
        return limits
    return to_json(limits)  # an AppLimits


class AppRoutes(HttpBase):
    async def apps(self) -> List[App]:
        """Every app (admin key)."""
        answer = await self._call_json("GET", "/v1/apps", auth=Auth.ADMIN)
        return [from_json(App, item) for item in answer["apps"]]

    async def create_app(
        self, id: str, *, name: Optional[str] = None, limits: Optional[AppLimits] = None
    ) -> CreatedApp:
        """Creates an app; the answer holds its first key and token secret, shown only once."""
        body = body_of({"id": id, "name": name, "limits": _limits(limits)})
        return await self._call(CreatedApp, "POST", "/v1/apps", auth=Auth.ADMIN, body=body, ok=(201,))

    async def app(self, id: str) -> App:
        return await self._call(App, "GET", f"/v1/apps/{segment(id)}", auth=Auth.EITHER)

    async def update_app(self, id: str, limits: AppLimits) -> App:
        """Replaces the app's limits."""
        body = {"limits": _limits(limits)}
        return await self._call(App, "PATCH", f"/v1/apps/{segment(id)}", auth=Auth.ADMIN, body=body)

    async def delete_app(self, id: str) -> None:
        """Deletes an app with everything it holds (not `default`)."""
        await self._send("DELETE", f"/v1/apps/{segment(id)}", auth=Auth.ADMIN, ok=(204,))

    async def keys(self, app: str) -> List[KeyInfo]:
        answer = await self._call_json("GET", f"/v1/apps/{segment(app)}/keys", auth=Auth.ADMIN)
        return [from_json(KeyInfo, item) for item in answer["keys"]]

    async def add_key(self, app: str, *, label: Optional[str] = None) -> CreatedKey:
        path = f"/v1/apps/{segment(app)}/keys"
        body = body_of({"label": label})
        return await self._call(CreatedKey, "POST", path, auth=Auth.ADMIN, body=body, ok=(201,))

    async def delete_key(self, app: str, key_id: str) -> None:
        path = f"/v1/apps/{segment(app)}/keys/{segment(key_id)}"
        await self._send("DELETE", path, auth=Auth.ADMIN, ok=(204,))

    async def app_stats(self, app: str) -> AppStats:
        """Usage counters, device count, limits and provider figures of one app."""
        return await self._call(AppStats, "GET", f"/v1/apps/{segment(app)}/stats", auth=Auth.EITHER)

    async def revoke(
        self,
        app: str,
        *,
        all: bool = False,
        sub: Optional[str] = None,
        device: Optional[str] = None,
        jti: Optional[str] = None,
        expires: Optional[int] = None,
        issued_before: Optional[int] = None,
    ) -> Revoked:
        """Ends client access to `app` (admin key or the app's publisher key). Give exactly one of
        `all=True` (every connection), `sub`, `device` (the connections whose token names them;
        nothing is stored, so those clients may connect again), `jti` (that token is refused until
        `expires`, seconds since the Unix epoch, default 30 days) or `issued_before` (every token
        of the app with an earlier `iat`, or none, is refused from now on). Every closed
        connection is told `revoked`; the answer counts those this node closed. More than one,
        or none, is `bad_request` from the server."""
        body = body_of(
            {
                "all": True if all else None,
                "sub": sub,
                "device": device,
                "jti": jti,
                "expires": expires,
                "issued_before": issued_before,
            }
        )
        return await self._call(Revoked, "POST", f"/v1/apps/{segment(app)}/revoke", auth=Auth.EITHER, body=body)

    async def token_keys(self, app: str) -> TokenKeys:
        """What verifies `app`'s client tokens (admin key or the app's publisher key)."""
        return await self._call(TokenKeys, "GET", f"/v1/apps/{segment(app)}/token-keys", auth=Auth.EITHER)

    async def set_token_keys(
        self,
        app: str,
        keys: List[PublicKey],
        *,
        jwks_url: Optional[str] = None,
        hs256: Optional[bool] = None,
    ) -> TokenKeys:
        """Replaces `app`'s public keys (RS256, ES256) and JWKS URL; `hs256=False` drops its HS256
        secret, so only tokens its backend signs with its private keys verify."""
        body = body_of(
            {"keys": [to_json(key) for key in keys], "jwks_url": jwks_url, "hs256": hs256}
        )
        path = f"/v1/apps/{segment(app)}/token-keys"
        return await self._call(TokenKeys, "PUT", path, auth=Auth.EITHER, body=body)

    async def rotate_token_secret(self, app: str, *, overlap: Optional[int] = None) -> RotatedSecret:
        """A new HS256 token secret for `app` (shown once); the old one keeps verifying tokens for
        `overlap` seconds (server default 3600; 0 for none), then its connections are closed."""
        body = body_of({"overlap": overlap})
        path = f"/v1/apps/{segment(app)}/token-secret"
        return await self._call(RotatedSecret, "POST", path, auth=Auth.EITHER, body=body)

    async def audit(
        self,
        *,
        app: Optional[str] = None,
        action: Optional[str] = None,
        since: Optional[int] = None,
        until: Optional[int] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> AuditPage:
        """The audit log of admin actions, newest first, a page at a time (`next_cursor` names the
        next): every app's with the admin key, the key's own app's with a publisher key. `since`
        and `until` are ms since the Unix epoch; `limit` 1 to 1000 (default 100)."""
        params = {
            "app": app,
            "action": action,
            "since": since,
            "until": until,
            "limit": limit,
            "cursor": cursor,
        }
        return await self._call(AuditPage, "GET", "/v1/audit", auth=Auth.EITHER, params=params)

    async def overview(self) -> Overview:
        """The dashboard's live figures: with the admin key the server's (`server`) and every
        app's; with a publisher key its own app's only (`server` is None). Counters are
        cumulative: two answers make rates."""
        return await self._call(Overview, "GET", "/v1/overview", auth=Auth.EITHER)

    async def providers(self, app: str) -> List[ProviderPublic]:
        answer = await self._call_json("GET", f"/v1/apps/{segment(app)}/providers", auth=Auth.EITHER)
        return [from_json(ProviderPublic, item) for item in answer["providers"]]

    async def provider(self, app: str, provider: str) -> ProviderPublic:
        path = f"/v1/apps/{segment(app)}/providers/{segment(provider)}"
        return await self._call(ProviderPublic, "GET", path, auth=Auth.EITHER)

    async def set_provider(self, app: str, provider: str, credentials: Mapping[str, Any]) -> ProviderPublic:
        """Sets (replaces) an app's credentials for `apns`, `fcm` or `webpush`; answers only
        their public part. For Web Push, `{"subject": ..., "generate": True}` makes a key pair."""
        path = f"/v1/apps/{segment(app)}/providers/{segment(provider)}"
        return await self._call(
            ProviderPublic, "PUT", path, auth=Auth.EITHER, body=dict(credentials), ok=(200, 201)
        )

    async def delete_provider(self, app: str, provider: str) -> None:
        path = f"/v1/apps/{segment(app)}/providers/{segment(provider)}"
        await self._send("DELETE", path, auth=Auth.EITHER, ok=(204,))

    async def vapid_public_key(self, app: str) -> str:
        """The app's VAPID public key (base64url), for `pushManager.subscribe`."""
        answer = await self._call_json("GET", f"/v1/apps/{segment(app)}/vapid-public-key", auth=Auth.NONE)
        return str(answer["public_key"])

    async def job_stats(self) -> JobStats:
        """The key's app's provider queue figures."""
        return await self._call(JobStats, "GET", "/v1/jobs/stats")

    async def dead_letters(self, *, after: Optional[int] = None, limit: Optional[int] = None) -> DeadLetterList:
        return await self._call(DeadLetterList, "GET", "/v1/jobs/dead", params={"after": after, "limit": limit})

    async def replay_job(self, id: int) -> ReplayedJob:
        """Queues a dead letter again with its attempts reset."""
        return await self._call(ReplayedJob, "POST", f"/v1/jobs/{id}/replay", ok=(202,))

    async def drop_job(self, id: int) -> None:
        await self._send("DELETE", f"/v1/jobs/{id}", ok=(204,))

"""Routes for devices, pushes, receipts, minted tokens and inbox acknowledgements (docs/push.md)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ..models._json import from_json
from ..models.dashboard import DeviceInbox
from ..models.devices import (
    AckResult,
    Device,
    DeviceBatchResult,
    DeviceList,
    MintedToken,
    PushAccepted,
    Receipt,
    RegisteredDevice,
)
from ._http import UNSET, HttpBase, _Unset, body_of, segment


class DeviceRoutes(HttpBase):
    async def register_device(
        self,
        platform: str,
        *,
        id: Optional[str] = None,
        token: Optional[str] = None,
        keys: Optional[Mapping[str, str]] = None,
        user: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        locale: Optional[str] = None,
        active: Optional[bool] = None,
    ) -> RegisteredDevice:
        """Registers a device (`herald`, `apns`, `fcm` or `webpush`), or replaces the one with the
        same id; `created` says which."""
        body = body_of(
            {
                "id": id,
                "platform": platform,
                "token": token,
                "keys": dict(keys) if keys else None,
                "user": user,
                "tags": list(tags) if tags is not None else None,
                "locale": locale,
                "active": active,
            }
        )
        response = await self._send("POST", "/v1/devices", body=body, ok=(200, 201))
        return RegisteredDevice(from_json(Device, response.json()), response.status_code == 201)

    async def register_devices(self, registrations: Sequence[Mapping[str, Any]]) -> DeviceBatchResult:
        """Registers many devices at once (each a registration object as `register_device` sends)."""
        body = {"devices": [dict(r) for r in registrations]}
        return await self._call(DeviceBatchResult, "POST", "/v1/devices/batch", body=body)

    async def device(self, id: str) -> Device:
        return await self._call(Device, "GET", f"/v1/devices/{segment(id)}")

    async def device_inbox(self, id: str) -> DeviceInbox:
        """A device's acknowledged inbox positions, its logs' heads, and its 10 newest pushes with
        their receipts (what the dashboard shows of a device)."""
        return await self._call(DeviceInbox, "GET", f"/v1/devices/{segment(id)}/inbox")

    async def update_device(
        self,
        id: str,
        *,
        user: Union[str, None, _Unset] = UNSET,
        tags: Union[Sequence[str], _Unset] = UNSET,
        add_tags: Union[Sequence[str], _Unset] = UNSET,
        remove_tags: Union[Sequence[str], _Unset] = UNSET,
        locale: Union[str, None, _Unset] = UNSET,
        active: Union[bool, _Unset] = UNSET,
    ) -> Device:
        """Changes some fields of a device; `user=None` / `locale=None` remove them."""
        body: Dict[str, Any] = {}
        for name, value in (("user", user), ("locale", locale)):
            if value is not UNSET:
                body[name] = value
        for name, value in (("tags", tags), ("add_tags", add_tags), ("remove_tags", remove_tags)):
            if not isinstance(value, _Unset):
                body[name] = list(value)
        if active is not UNSET:
            body["active"] = active
        return await self._call(Device, "PATCH", f"/v1/devices/{segment(id)}", body=body)

    async def delete_device(self, id: str) -> None:
        await self._send("DELETE", f"/v1/devices/{segment(id)}", ok=(204,))

    async def activate_device(self, id: str) -> Device:
        return await self._call(Device, "POST", f"/v1/devices/{segment(id)}/activate")

    async def deactivate_device(self, id: str) -> Device:
        return await self._call(Device, "POST", f"/v1/devices/{segment(id)}/deactivate")

    async def devices(
        self,
        *,
        user: Optional[str] = None,
        tag: Optional[str] = None,
        after: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> DeviceList:
        """A page of the app's devices in id order, optionally one user's or one tag's."""
        params = {"user": user, "tag": tag, "after": after, "limit": limit}
        return await self._call(DeviceList, "GET", "/v1/devices", params=params)

    async def push(
        self,
        *,
        device: Optional[str] = None,
        user: Optional[str] = None,
        tags: Optional[str] = None,
        app: bool = False,
        data: Any = None,
        notification: Optional[Mapping[str, Any]] = None,
        ttl: Optional[int] = None,
        collapse_key: Optional[str] = None,
        priority: Optional[str] = None,
        id: Optional[str] = None,
        delivery: Optional[str] = None,
        ack_window: Optional[float] = None,
        apns: Optional[Mapping[str, Any]] = None,
        fcm: Optional[Mapping[str, Any]] = None,
        webpush: Optional[Mapping[str, Any]] = None,
    ) -> PushAccepted:
        """Pushes to exactly one target: a `device`, a `user`, a tag expression (`tags`), or the
        whole app (`app=True`). `id` is an idempotency key."""
        target = body_of({"device": device, "user": user, "tags": tags, "app": True if app else None})
        body = body_of(
            {
                "target": target,
                "data": data,
                "notification": dict(notification) if notification else None,
                "ttl": ttl,
                "collapse_key": collapse_key,
                "priority": priority,
                "id": id,
                "delivery": delivery,
                "ack_window": ack_window,
                "apns": dict(apns) if apns else None,
                "fcm": dict(fcm) if fcm else None,
                "webpush": dict(webpush) if webpush else None,
            }
        )
        return await self._call(PushAccepted, "POST", "/v1/push", body=body, ok=(202,))

    async def receipt(
        self,
        id: str,
        *,
        devices: Optional[bool] = None,
        after: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Receipt:
        """What became of a push (with `devices=True`, each device's provider job too)."""
        params = {"devices": devices, "after": after, "limit": limit}
        return await self._call(Receipt, "GET", f"/v1/push/{segment(id)}", params=params)

    async def create_token(
        self,
        *,
        sub: Optional[str] = None,
        device: Optional[str] = None,
        channels: Optional[Sequence[str]] = None,
        publish: Optional[Sequence[str]] = None,
        ttl: Optional[int] = None,
        jti: Optional[str] = None,
        user_info: Optional[Dict[str, Any]] = None,
    ) -> MintedToken:
        """A client token minted by the server for the key's app (`device` makes it a device
        token). It carries `iat` (now) and, given `jti`, that id, so it can be revoked
        (`revoke`); `user_info` (a dict of at most 1,024 bytes of JSON) is what presence
        channels show of the user. To mint without a request, see `herald_client.mint_token`."""
        body = body_of(
            {
                "sub": sub,
                "device": device,
                "channels": list(channels) if channels is not None else None,
                "publish": list(publish) if publish is not None else None,
                "ttl": ttl,
                "jti": jti,
                "user_info": user_info,
            }
        )
        return await self._call(MintedToken, "POST", "/v1/tokens", body=body)

    async def ack(
        self,
        device_token: str,
        *,
        cursor: Optional[str] = None,
        channel: Optional[str] = None,
        seq: Optional[int] = None,
        epoch: Optional[str] = None,
    ) -> AckResult:
        """Acknowledges a device's inbox over HTTP with its device token: a whole inbox cursor
        string, or one log (`channel` `$app`/`$device` and `seq`)."""
        body = body_of({"cursor": cursor, "channel": channel, "seq": seq, "epoch": epoch})
        return await self._call(AckResult, "POST", "/v1/ack", bearer=device_token, body=body)

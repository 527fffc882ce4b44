"""`Herald`, the asyncio publisher client: every route of docs/openapi.yaml."""

from __future__ import annotations

from .apps import AppRoutes
from .channels import ChannelRoutes
from .devices import DeviceRoutes


class Herald(ChannelRoutes, AppRoutes, DeviceRoutes):
    """An asyncio client for Herald's HTTP API.

    `key` is a publisher API key (scopes every call to its app); `admin_key` is used for app
    administration (`/v1/apps...`) when given. Use as `async with Herald(url, key) as herald:`
    or call `aclose()`. Every failure raises `HeraldError`.
    """

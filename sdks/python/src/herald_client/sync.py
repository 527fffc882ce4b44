"""`SyncHerald`: the publisher client for code without an event loop. Every method of `Herald`
is available with the same arguments, run to completion on a private event loop."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Optional

from .publisher import Herald


class SyncHerald:
    """`SyncHerald(url, key, admin_key=...)`; use as a context manager or call `close()`. Not for
    use from inside a running event loop (use `Herald` there)."""

    def __init__(self, url: str, key: Optional[str] = None, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = Herald(url, key, **options)

    def __repr__(self) -> str:
        return f"SyncHerald(url={self._client.url!r})"

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(method):
            return method  # type: ignore[no-any-return]

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(method(*args, **kwargs))

        return call

    def close(self) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()

    def __enter__(self) -> "SyncHerald":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

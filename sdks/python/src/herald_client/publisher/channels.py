"""Publisher routes for channels: publish, batch publish, history, channel state, presence
members and listing."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Union

from ..errors import HeraldError, NotReadyError
from ..models._json import from_json
from ..models.channels import ChannelInfo, ChannelList, ChannelPresence, History, Published
from ..models.probes import Readiness
from ._http import Auth, HttpBase, _json, body_of, channel_path

BatchResult = Union[Published, HeraldError]


class ChannelRoutes(HttpBase):
    async def publish(self, channel: str, data: Any, *, id: Optional[str] = None) -> Published:
        """Appends one message (`data`: any JSON value, or `RawJson` to send its exact bytes).
        With `id` (an idempotency key) a repeat stores nothing and answers `duplicate=True`."""
        path = f"/v1/channels/{channel_path(channel)}/messages"
        return await self._call(Published, "POST", path, body=body_of({"data": data, "id": id}))

    async def publish_batch(self, messages: Sequence[Mapping[str, Any]]) -> List[BatchResult]:
        """Publishes several messages (`{"channel", "data", "id"?}` each) in one request; each
        result is a `Published` or the `HeraldError` that message got (the rest still publish)."""
        items = [body_of({"channel": m["channel"], "data": m["data"], "id": m.get("id")}) for m in messages]
        answer = await self._call_json("POST", "/v1/batch", body={"messages": items})
        results: List[BatchResult] = []
        for item in answer.get("results", []) if isinstance(answer, dict) else []:
            if isinstance(item, dict) and "error" in item:
                results.append(HeraldError.from_body(item))
            else:
                results.append(from_json(Published, item))
        return results

    async def history(
        self,
        channel: str,
        *,
        since: Optional[int] = None,
        last: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> History:
        """Retained messages after seq `since` (or the newest `last`), oldest first, at most
        `limit` (1 to 1000, default 100). Each message keeps its `data` bytes in `raw_data`."""
        path = f"/v1/channels/{channel_path(channel)}/messages"
        params = {"since": since, "last": last, "limit": limit}
        response = await self._send("GET", path, params=params)
        return History.from_text(response.text)

    async def channel(self, name: str) -> ChannelInfo:
        """A channel's epoch, newest and oldest retained seq, and live subscriber count."""
        return await self._call(ChannelInfo, "GET", f"/v1/channels/{channel_path(name)}")

    async def presence(self, channel: str) -> ChannelPresence:
        """A presence channel's members, in the order they joined (`not_found` for a channel
        outside every presence namespace)."""
        path = f"/v1/channels/{channel_path(channel)}/presence"
        return await self._call(ChannelPresence, "GET", path)

    async def channels(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> ChannelList:
        """A page of channels in name order (pass `next` as `after` for the next one)."""
        return await self._call(ChannelList, "GET", "/v1/channels", params={"after": after, "limit": limit})

    async def health(self) -> bool:
        """Whether `GET /healthz` answers `{"status":"ok"}` (raises on any failure)."""
        answer = await self._call_json("GET", "/healthz", auth=Auth.NONE)
        return isinstance(answer, dict) and answer.get("status") == "ok"

    async def ready(self) -> Readiness:
        """Readiness (`GET /readyz`): the store takes writes, the bus is connected, the server is
        not draining. A `503` raises `NotReadyError` (code `not_ready`), whose message names each
        failing check with its error and whose `readiness` is the whole answer."""
        response = await self._send("GET", "/readyz", auth=Auth.NONE, ok=(200, 503))
        readiness = from_json(Readiness, _json(response))
        if response.status_code == 503:
            raise NotReadyError(readiness)
        return readiness

    async def metrics(self) -> str:
        """The Prometheus metrics text."""
        return (await self._send("GET", "/metrics", auth=Auth.NONE)).text

    async def openapi(self) -> str:
        """The server's OpenAPI document (YAML)."""
        return (await self._send("GET", "/v1/openapi.yaml", auth=Auth.NONE)).text


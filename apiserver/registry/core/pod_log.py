"""The pods/log subresource: find the pod's node, then stream the container's log
from that node's kubelet (its daemon endpoint, as the Node's status names it), as
kube-apiserver's LogREST does through the kubelet connection."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp

from apiserver.registry.core.pod_location import PodLocator
from kubeling import errors
from protos.kubeling.v1 import api_pb2

__all__ = ["PodLogProxy"]

log = logging.getLogger(__name__)

_CHUNK = 32 * 1024


class PodLogProxy:
    def __init__(self, locator: PodLocator, connect_timeout: float = 10.0) -> None:
        self.locator = locator
        self.connect_timeout = connect_timeout

    async def _location(self, req: api_pb2.PodLogRequest) -> str:
        pod = await self.locator.pod(req.namespace, req.name)
        query: list[tuple[str, str]] = []
        for flag in ("follow", "previous", "timestamps"):
            if getattr(req, flag):
                query.append((flag, "true"))
        for number in ("tailLines", "limitBytes"):
            if req.HasField(number):
                if getattr(req, number) < 0:
                    raise errors.BadRequest(f"{number}: must be >= 0")
                query.append((number, str(getattr(req, number))))
        if req.HasField("sinceSeconds") and req.sinceTime:  # upstream's ValidatePodLogOptions
            raise errors.BadRequest("at most one of `sinceTime` or `sinceSeconds` may be specified")
        if req.HasField("sinceSeconds"):
            if req.sinceSeconds < 1:
                raise errors.BadRequest("sinceSeconds: must be greater than 0")
            query.append(("sinceSeconds", str(req.sinceSeconds)))
        if req.sinceTime:
            query.append(("sinceTime", req.sinceTime))
        return await self.locator.container_url("containerLogs", pod, req.container, query)

    async def stream(self, req: api_pb2.PodLogRequest) -> AsyncIterator[api_pb2.PodLogChunk]:
        url = await self._location(req)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, \
                    session.get(url, ssl=self.locator.ssl or True) as reply:
                if reply.status != 200:
                    text = (await reply.text()).strip()
                    if reply.status == 404:
                        raise errors.NotFound(text)
                    if reply.status == 400:
                        raise errors.BadRequest(text)
                    raise errors.InternalError(f"kubelet answered HTTP {reply.status}: {text}")
                async for data in reply.content.iter_chunked(_CHUNK):
                    yield api_pb2.PodLogChunk(data=data)
        except aiohttp.ClientError as exc:
            raise errors.ServiceUnavailable(f"cannot reach the kubelet of pod {req.namespace}/{req.name}: "
                                            f"{exc}") from None

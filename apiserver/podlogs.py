"""The pods/log subresource: find the pod's node, then stream the container's log
from that node's kubelet (its daemon endpoint, as the Node's status names it), as
kube-apiserver's LogREST does through the kubelet connection."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from urllib.parse import quote, urlencode

import aiohttp

from apiserver.registry.store import Registry
from kubeling import errors
from protos.kubeling.v1 import api_pb2

__all__ = ["PodLogProxy"]

log = logging.getLogger(__name__)

_CHUNK = 32 * 1024


class PodLogProxy:
    def __init__(self, pods: Registry, nodes: Registry, connect_timeout: float = 10.0) -> None:
        self.pods = pods
        self.nodes = nodes
        self.connect_timeout = connect_timeout

    async def _location(self, req: api_pb2.PodLogRequest) -> str:
        if not req.name:
            raise errors.BadRequest("name: Required value")
        pod = await self.pods.get(req.namespace or "default", req.name)
        names = [c.name for c in pod.spec.containers]
        container = req.container
        if not container:
            if len(names) != 1:
                raise errors.BadRequest(f"a container name must be specified for pod {req.name}, "
                                        f"choose one of: [{' '.join(names)}]")
            container = names[0]
        elif container not in names + [c.name for c in pod.spec.initContainers]:
            raise errors.BadRequest(f"container {container} is not valid for pod {req.name}")
        if not pod.spec.nodeName:
            raise errors.BadRequest(f"pod {req.name} does not have a host assigned")
        node = await self.nodes.get("", pod.spec.nodeName)
        address = next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")
        port = node.status.daemonEndpoints.kubeletEndpoint.Port
        if not address or not port:
            raise errors.ServiceUnavailable(f"node {node.metadata.name} has no kubelet endpoint")
        query: dict[str, str] = {}
        for flag in ("follow", "previous", "timestamps"):
            if getattr(req, flag):
                query[flag] = "true"
        for number in ("tailLines", "limitBytes"):
            if req.HasField(number):
                if getattr(req, number) < 0:
                    raise errors.BadRequest(f"{number}: must be >= 0")
                query[number] = str(getattr(req, number))
        path = "/".join(quote(part, safe="") for part in (pod.metadata.namespace, pod.metadata.name, container))
        host = f"[{address}]" if ":" in address else address
        return f"http://{host}:{port}/containerLogs/{path}?{urlencode(query)}"

    async def stream(self, req: api_pb2.PodLogRequest) -> AsyncIterator[api_pb2.PodLogChunk]:
        url = await self._location(req)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as reply:
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

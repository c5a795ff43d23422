"""The kubelet's daemon endpoint: containers' logs over HTTP, as the kubelet's
`/containerLogs/{namespace}/{pod}/{container}` (follow, tailLines, timestamps,
previous, limitBytes), read from the CRI log files; plus `/healthz`. The apiserver's
`pods/log` is proxied here (the Node's daemonEndpoints say where)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from kubelet.cri.logs import FULL, parse_line
from kubelet.runtime import RUNNING, CRICallError, Runtime
from protos.kubeling.v1 import core_pb2

__all__ = ["LogServer", "format_entries"]

log = logging.getLogger(__name__)

Pod = Any
_POLL = 0.1  # seconds between looks at a followed file


def format_entries(raw: bytes, timestamps: bool) -> list[bytes]:
    """CRI log lines -> what `kubectl logs` prints: one chunk per line, partial lines
    joined, each prefixed with its time when asked."""
    out: list[bytes] = []
    pending = b""
    for line in raw.splitlines():
        if not line:
            continue
        try:
            entry = parse_line(line)
        except ValueError:
            continue  # a torn line at the end of a file being written
        if not pending and timestamps:
            pending = entry.timestamp.encode() + b" "
        pending += entry.content
        if entry.tag == FULL:
            out.append(pending + b"\n")
            pending = b""
    if pending:
        out.append(pending)
    return out


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() in ("true", "1", "yes")


def _int(request: web.Request, name: str) -> int | None:
    text = request.query.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: {text!r} is not an integer") from None
    if value < 0:
        raise web.HTTPBadRequest(text=f"{name}: must be >= 0")
    return value


class LogServer:
    def __init__(self, runtime: Runtime, find_pod: Callable[[str, str], tuple[Pod, core_pb2.PodStatus] | None],
                 address: str, port: int) -> None:
        """`find_pod`: this node's pod of that namespace and name, with its latest status."""
        self.runtime = runtime
        self.find_pod = find_pod
        self.address = address
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.address, self.port)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only here
        if self.port == 0 and server is not None:
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        log.info("kubelet daemon endpoint on http://%s:%d", self.address, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _container(self, request: web.Request) -> tuple[Pod, str, str]:
        """(pod, container id, log path) as the kubelet's validateContainerLogStatus picks
        them from the pod's status: `previous` is lastState; a container waiting to be
        restarted shows its last run."""
        namespace, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        found = self.find_pod(namespace, name)
        if found is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{name} is not on this node")
        pod, status = found
        statuses = {s.name: s for s in [*status.initContainerStatuses, *status.containerStatuses]}
        if container not in [c.name for c in [*pod.spec.initContainers, *pod.spec.containers]]:
            raise web.HTTPBadRequest(text=f"container {container} is not valid for pod {name}")
        cs = statuses.get(container)
        if cs is None:
            raise web.HTTPBadRequest(text=f"container \"{container}\" in pod \"{name}\" is waiting to start: "
                                          "ContainerCreating")
        last = cs.lastState.terminated.containerID if cs.lastState.HasField("terminated") else ""
        if _flag(request, "previous"):
            if not last:
                raise web.HTTPBadRequest(text=f"previous terminated container \"{container}\" in pod \"{name}\" "
                                              "not found")
            full_id = last
        elif cs.state.HasField("running"):
            full_id = cs.containerID
        elif cs.state.HasField("terminated"):
            full_id = cs.state.terminated.containerID or last
        else:
            full_id = last
        if not full_id:
            reason = cs.state.waiting.reason or "ContainerCreating"
            raise web.HTTPBadRequest(text=f"container \"{container}\" in pod \"{name}\" is waiting to start: "
                                          f"{reason}")
        container_id = full_id.partition("://")[2] or full_id
        try:
            info = await self.runtime.container_status(container_id)
        except CRICallError:
            raise web.HTTPNotFound(text=f"container {container_id[:13]} of pod {name} is gone from the runtime") \
                from None
        return pod, container_id, info.log_path

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        pod, container_id, log_path = await self._container(request)
        timestamps, follow = _flag(request, "timestamps"), _flag(request, "follow")
        tail, limit = _int(request, "tailLines"), _int(request, "limitBytes")
        path = Path(log_path)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        sent = 0

        async def send(chunks: list[bytes]) -> bool:
            nonlocal sent
            for chunk in chunks:
                if limit is not None and sent + len(chunk) > limit:
                    chunk = chunk[:limit - sent]
                await response.write(chunk)
                sent += len(chunk)
                if limit is not None and sent >= limit:
                    return False
            return True

        try:
            data = path.read_bytes() if path.exists() else b""
        except OSError as exc:
            raise web.HTTPInternalServerError(text=f"reading {path}: {exc}") from None
        # Only whole lines now; a torn last line is read again with the rest of it.
        offset = data.rfind(b"\n") + 1
        chunks = format_entries(data[:offset], timestamps)
        if tail is not None:
            chunks = list(deque(chunks, maxlen=tail)) if tail else []
        try:
            going = await send(chunks)
            idle = 0.0
            while follow and going:
                await asyncio.sleep(_POLL)
                if request.transport is None or request.transport.is_closing():
                    return response  # the follower left while nothing was written
                try:
                    with open(path, "rb") as handle:
                        handle.seek(offset)
                        more = handle.read()
                except OSError:
                    more = b""
                end = more.rfind(b"\n") + 1
                if end:
                    offset += end
                    going = await send(format_entries(more[:end], timestamps))
                    idle = 0.0
                    continue
                idle += _POLL
                if idle >= 1.0:
                    idle = 0.0
                    try:
                        state = (await self.runtime.container_status(container_id)).state
                    except CRICallError:
                        break
                    if state != RUNNING:
                        break  # the container ended: so does the stream
        except ConnectionResetError:
            return response  # the reader left (a follower that had enough): not an error
        await response.write_eof()
        return response

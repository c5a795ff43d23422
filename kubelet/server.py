"""The kubelet's daemon endpoint (upstream's pkg/kubelet/server), where the apiserver
sends what it cannot serve from storage (the Node's daemonEndpoints say where):

- `/containerLogs/{namespace}/{pod}/{container}` (follow, tailLines, timestamps,
  previous, limitBytes, sinceSeconds, sinceTime), read from the CRI log files;
- `/exec/{namespace}/{pod}/{container}` (command, input, output, error, tty),
  `/attach/{namespace}/{pod}/{container}` and `/portForward/{namespace}/{pod}` (port):
  the runtime is asked for a streaming URL (CRI Exec, Attach, PortForward) and the
  client's upgrade request is relayed there byte for byte, as the kubelet's proxyStream
  does, so whatever protocol the client and the runtime agree on (SPDY, WebSocket v4/v5,
  the port-forward tunnel) passes;
- `/healthz`; `/pods`, `/configz`, `/metrics`, `/logs/` (kubelet.nodeendpoints).

With TLS and a client CA (`--tls-cert-file`, `--client-ca-file`), everything but
`/healthz` is the apiserver's alone: a caller without a verified certificate gets 401, any
other certificate 403 (upstream's kubelet asks the apiserver through a
SubjectAccessReview, where only the apiserver's `kube-apiserver-kubelet-client` holds
`nodes/proxy`; this decides the same without the round trip).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from aiohttp import web

from cri.logs import format_entries, log_time
from kubelet.nodeendpoints import NodeEndpoints
from kubelet.runtime import RUNNING, SANDBOX_READY, CRICallError, Runtime
from kubelet.summary import SummaryProvider
from kubeling.servingtls import ServingTLS, peer_common_name
from kubeling.upgradeproxy import ProxyError, proxy_upgrade
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["DaemonServer"]

log = logging.getLogger(__name__)

_POLL = 0.1  # seconds between looks at a followed file
APISERVER_CLIENT = "kube-apiserver-kubelet-client"  # the one identity that may use the endpoint
_OPEN = frozenset({"/healthz"})
# Who may read the node's resource use besides the apiserver: the metrics server (upstream's
# kubelet asks the apiserver whether the caller may get nodes/stats; here the identity is
# fixed, as the apiserver's is).
STATS_READER = "system:metrics-server"
_STATS_PATHS = ("/stats/", "/metrics/resource")


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() in ("true", "1", "yes")


@dataclass
class _StreamOptions:
    """Which of a session's streams the client asked for (remotecommand's Options)."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _stream_options(request: web.Request) -> _StreamOptions:
    tty = _flag(request, "tty")
    options = _StreamOptions(_flag(request, "input"), _flag(request, "output"),
                             _flag(request, "error") and not tty, tty)  # a terminal has no separate stderr
    if not (options.stdin or options.stdout or options.stderr):
        raise web.HTTPBadRequest(text="you must specify at least 1 of stdin, stdout, stderr")
    return options


def _runtime_error(exc: CRICallError) -> web.HTTPException:
    """A failed CRI call as the kubelet's streaming.WriteError answers it."""
    if exc.code == grpc.StatusCode.NOT_FOUND:
        return web.HTTPNotFound(text=exc.details or str(exc))
    return web.HTTPInternalServerError(text=exc.details or str(exc))


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


class DaemonServer:
    def __init__(self, runtime: Runtime, find_pod: Callable[[str, str], tuple[Pod, core_pb2.PodStatus] | None],
                 address: str, port: int, tls: ServingTLS | None = None,
                 summary: SummaryProvider | None = None, node: NodeEndpoints | None = None) -> None:
        """`find_pod`: this node's pod of that namespace and name, with its latest status;
        `summary`: the node's resource use (/stats/summary, /metrics/resource)."""
        self.tls = tls
        self.summary = summary
        self.node = node  # /pods, /configz, /metrics, /logs/
        self.runtime = runtime
        self.find_pod = find_pod
        self.address = address
        self.port = port
        self._runner: web.AppRunner | None = None
        self._context: ssl.SSLContext | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[self._authorize] if self.tls and self.tls.client_ca_file else [])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        if self.summary is not None:
            app.router.add_get("/stats/summary", self._stats_summary)
            app.router.add_get("/metrics/resource", self._resource_metrics)
        if self.node is not None:
            self.node.add_routes(app)
        # GET and POST both: WebSocket clients must GET, SPDY ones POST.
        for method in ("GET", "POST"):
            app.router.add_route(method, "/exec/{namespace}/{pod}/{container}", self._exec)
            app.router.add_route(method, "/attach/{namespace}/{pod}/{container}", self._attach)
            app.router.add_route(method, "/portForward/{namespace}/{pod}", self._port_forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self._context = self.tls.ssl_context() if self.tls is not None else None
        site = web.TCPSite(self._runner, self.address, self.port, ssl_context=self._context)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only here
        if self.port == 0 and server is not None:
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        log.info("kubelet daemon endpoint on %s://%s:%d", "https" if self.tls else "http", self.address, self.port)

    @web.middleware
    async def _authorize(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path in _OPEN:
            return await handler(request)
        user = peer_common_name(request.transport.get_extra_info("peercert") if request.transport else None)
        if user is None:
            return web.Response(status=401, text="Unauthorized")
        if user == STATS_READER and request.method == "GET" and request.path.startswith(_STATS_PATHS):
            return await handler(request)
        if user != APISERVER_CLIENT:
            verb = "create" if request.method == "POST" else "get"
            log.warning("refused %s %s from %s", request.method, request.path, user)
            return web.Response(status=403, text=f"Forbidden (user={user}, verb={verb}, resource=nodes, "
                                                 "subresource=proxy)")
        return await handler(request)

    async def use_certificate(self, pem_file: Path) -> None:
        """A renewed serving certificate (certificate and key in one PEM file): new handshakes
        present it; connections open now (exec, port-forward streams) go on as they are."""
        if self._context is None:
            raise RuntimeError("the daemon endpoint serves plain HTTP: no certificate to renew")
        self._context.load_cert_chain(pem_file)
        log.info("kubelet daemon endpoint: serving certificate renewed from %s", pem_file)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _stats_summary(self, request: web.Request) -> web.Response:
        assert self.summary is not None
        return web.json_response(await self.summary.summary())

    async def _resource_metrics(self, request: web.Request) -> web.Response:
        assert self.summary is not None
        return web.Response(text=await self.summary.resource_metrics(), content_type="text/plain")

    # ---- exec, attach, port-forward ----

    def _pod(self, request: web.Request) -> Pod:
        namespace, name = request.match_info["namespace"], request.match_info["pod"]
        found = self.find_pod(namespace, name)
        if found is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{name} does not exist on this node")
        return found[0]

    async def _running_container(self, request: web.Request) -> str:
        """The id of the named container's running instance, as the kubelet's
        findContainer picks it from the runtime's running pod."""
        pod, container = self._pod(request), request.match_info["container"]
        try:
            listed = await self.runtime.list_containers(pod.metadata.uid)  # one call: no status of each
        except CRICallError as exc:
            raise _runtime_error(exc) from None
        found = next((c for c in listed if c.metadata.name == container and c.state == RUNNING), None)
        if found is None:
            raise web.HTTPInternalServerError(text=f'container not found ("{container}")')
        return found.id

    async def _relay(self, request: web.Request, what: str, url: str) -> web.StreamResponse:
        log.debug("%s %s/%s: relaying to the runtime's %s", what, request.match_info["namespace"],
                  request.match_info["pod"], url)
        try:
            return await proxy_upgrade(request, url)
        except ProxyError as exc:
            raise web.HTTPInternalServerError(text=f"the runtime's streaming server: {exc}") from None

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        options = _stream_options(request)
        command = request.query.getall("command", [])
        if not command:
            raise web.HTTPBadRequest(text='query parameter "command" is required')
        container_id = await self._running_container(request)
        try:
            url = await self.runtime.exec_url(container_id, command, options.tty, options.stdin, options.stdout,
                                              options.stderr)
        except CRICallError as exc:
            raise _runtime_error(exc) from None
        return await self._relay(request, "exec", url)

    async def _attach(self, request: web.Request) -> web.StreamResponse:
        options = _stream_options(request)
        container_id = await self._running_container(request)
        try:
            url = await self.runtime.attach_url(container_id, options.tty, options.stdin, options.stdout,
                                                options.stderr)
        except CRICallError as exc:
            raise _runtime_error(exc) from None
        return await self._relay(request, "attach", url)

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        pod = self._pod(request)
        ports: list[int] = []
        for value in request.query.getall("port", []):
            for part in value.split(","):
                if not part.isdigit() or not 0 < int(part) < 65536:
                    raise web.HTTPBadRequest(text=f"unable to parse {value!r} as a port: must be 1-65535")
                ports.append(int(part))
        try:
            ready = [s for s in await self.runtime.list_sandboxes(pod.metadata.uid) if s.state == SANDBOX_READY]
            if not ready:
                raise web.HTTPInternalServerError(text=f"failed to find sandbox for pod {pod.metadata.name}")
            newest = max(ready, key=lambda s: s.created_at)
            url = await self.runtime.port_forward_url(newest.id, ports)
        except CRICallError as exc:
            raise _runtime_error(exc) from None
        return await self._relay(request, "port-forward", url)

    # ---- logs ----

    async def _container(self, request: web.Request) -> tuple[Pod, str, str]:
        """(pod, container id, log path) as the kubelet's validateContainerLogStatus picks
        them from the pod's status: `previous` is lastState; a container waiting to be
        restarted shows its last run."""
        namespace, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        found = self.find_pod(namespace, name)
        if found is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{name} is not on this node")
        pod, status = found
        statuses = {s.name: s for s in [*status.initContainerStatuses, *status.containerStatuses,
                                        *status.ephemeralContainerStatuses]}
        if container not in [c.name for c in [*pod.spec.initContainers, *pod.spec.containers,
                                               *pod.spec.ephemeralContainers]]:
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
        since_seconds = _int(request, "sinceSeconds")
        since = time.time() - since_seconds if since_seconds is not None else None
        if "sinceTime" in request.query:
            try:
                since = log_time(request.query["sinceTime"])
            except ValueError:
                raise web.HTTPBadRequest(text=f"sinceTime: not an RFC 3339 time: {request.query['sinceTime']!r}") \
                    from None
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
        chunks = format_entries(data[:offset], timestamps, since)
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
                    going = await send(format_entries(more[:end], timestamps, since))
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

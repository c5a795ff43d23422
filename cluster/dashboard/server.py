"""The dashboard's web server (aiohttp): pages rendered by a little JavaScript from JSON,
kept live by server-sent events.

It reads the cluster as the user whose kubeconfig it is given, nothing else (no side
door: what that user may not list stays empty, with the apiserver's refusal shown). One
informer per kind (nodes, pods, Deployments, events) feeds every browser: the page gets
a snapshot (`/api/snapshot`), then each change as an event on `/api/watch` (`upsert` or
`delete` of a row); a pod's page (`/pods/<ns>/<name>`) reads `/api/pods/<ns>/<name>` (its
containers, conditions and the scheduler's recorded attempt as chart data) and the tail
of a container's log (`/api/pods/<ns>/<name>/log`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from cluster.dashboard.model import deployment_row, event_row, node_row, pod_detail, pod_row, timeline, trace_id
from kubeling import errors
from kubeling.client import Client, ResourceClient
from kubeling.informer import Informer

__all__ = ["Dashboard"]

log = logging.getLogger("kubeling.dashboard")
STATIC = Path(__file__).parent / "static"
_ROWS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "nodes": node_row, "pods": pod_row, "deployments": deployment_row, "events": event_row}
_EVENTS_KEPT = 200  # the newest events in a snapshot
_QUEUE = 1000  # changes waiting for one slow browser before it is told to reload


def _refused(err: errors.ApiError) -> web.Response:
    """The apiserver's answer, as HTTP: the page shows the message."""
    status = {"NotFound": 404, "Forbidden": 403, "Unauthorized": 401, "BadRequest": 400}.get(err.reason, 502)
    return web.json_response({"error": f"{err.reason}: {err.message}"}, status=status)


@dataclass
class Dashboard:
    client: Client
    traces_url: str = ""  # Jaeger's query API (Jaeger, or `python -m cluster.otlpreceiver`): pods' start timelines
    informers: dict[str, Informer[Any]] = field(default_factory=dict)
    _subscribers: set[asyncio.Queue[str]] = field(default_factory=set)
    _errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sources: dict[str, ResourceClient[Any]] = {
            "nodes": self.client.nodes, "pods": self.client.pods, "deployments": self.client.deployments,
            "events": self.client.events}
        for kind, resource in sources.items():
            informer: Informer[Any] = Informer(resource)
            informer.add_handler(on_add=self._upsert(kind), on_update=lambda _old, new, k=kind: self._upsert(k)(new),
                                 on_delete=self._delete(kind))
            self.informers[kind] = informer

    def _upsert(self, kind: str) -> Callable[[Any], None]:
        def handle(obj: Any) -> None:
            self._publish({"kind": kind, "op": "upsert", "row": _ROWS[kind](obj)})
        return handle

    def _delete(self, kind: str) -> Callable[[Any], None]:
        def handle(obj: Any) -> None:
            self._publish({"kind": kind, "op": "delete",
                           "row": {"namespace": obj.metadata.namespace, "name": obj.metadata.name}})
        return handle

    def _publish(self, change: dict[str, Any]) -> None:
        text = json.dumps(change)
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(text)
            except asyncio.QueueFull:  # a browser that stopped reading: it reloads its snapshot
                self._subscribers.discard(queue)
                with contextlib.suppress(asyncio.QueueFull):
                    queue.get_nowait()
                    queue.put_nowait(json.dumps({"op": "resync"}))

    async def start(self, sync_timeout: float = 30.0) -> None:
        await self._check_access()
        for informer in self.informers.values():
            await informer.start()
        for kind, informer in self.informers.items():
            if kind in self._errors:
                continue
            try:
                await informer.wait_synced(sync_timeout)
            except TimeoutError:
                self._errors[kind] = f"{kind} not listed in {sync_timeout:.0f} s"

    async def _check_access(self) -> None:
        """What the user may not list is shown as the apiserver's refusal, not retried forever."""
        for kind, informer in list(self.informers.items()):
            try:
                await informer.resource.list(limit=1)
            except errors.ApiError as err:
                self._errors[kind] = f"{err.reason}: {err.message}"
                del self.informers[kind]

    def end_streams(self) -> None:
        """Every open page's stream ends (the server is stopping): an empty item says so."""
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait("")

    async def stop(self) -> None:
        self.end_streams()
        for informer in self.informers.values():
            await informer.stop()

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"errors": self._errors}
        for kind, informer in self.informers.items():
            rows = [_ROWS[kind](obj) for obj in informer.store.list()]
            if kind == "events":
                rows = sorted(rows, key=lambda r: r["last"])[-_EVENTS_KEPT:]
            else:
                rows.sort(key=lambda r: (r.get("namespace", ""), r["name"]))
            out[kind] = rows
        for kind in _ROWS:
            out.setdefault(kind, [])
        return out

    @contextlib.asynccontextmanager
    async def subscription(self) -> AsyncIterator[asyncio.Queue[str]]:
        queue: asyncio.Queue[str] = asyncio.Queue(_QUEUE)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    # ------------------------------------------------------------ HTTP

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._page("index.html"))
        app.router.add_get("/pods/{namespace}/{name}", self._page("pod.html"))
        app.router.add_get("/api/snapshot", self._snapshot)
        app.router.add_get("/api/watch", self._watch)
        app.router.add_get("/api/pods/{namespace}/{name}", self._pod)
        app.router.add_get("/api/pods/{namespace}/{name}/log", self._log)
        app.router.add_get("/api/pods/{namespace}/{name}/trace", self._trace)
        app.router.add_static("/static/", STATIC)
        return app

    @staticmethod
    def _page(name: str) -> Callable[[web.Request], Any]:
        async def page(_: web.Request) -> web.FileResponse:
            return web.FileResponse(STATIC / name, headers={"Cache-Control": "no-store"})
        return page

    async def _snapshot(self, _: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: one `data:` line per change, a comment every 15 s to keep
        proxies from closing an idle stream."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        async with self.subscription() as queue:
            await response.write(b": subscribed\n\n")
            while True:
                try:
                    async with asyncio.timeout(15):
                        text = await queue.get()
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if not text:  # the server is stopping
                    break
                await response.write(f"data: {text}\n\n".encode())
        return response

    async def _pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            pod = await self.client.pods.get(name, namespace)
        except errors.ApiError as err:
            return _refused(err)
        return web.json_response(pod_detail(pod))

    async def _log(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        container = request.query.get("container", "")
        try:
            tail = int(request.query.get("tail", "100"))
        except ValueError:
            return web.json_response({"error": "tail: expected a number of lines"}, status=400)
        chunks = []
        try:
            async with asyncio.timeout(10):
                async for chunk in self.client.pods.logs(name, namespace, container=container,
                                                         tail_lines=max(0, min(tail, 5000))):
                    chunks.append(chunk)
        except errors.ApiError as err:
            return _refused(err)
        except TimeoutError:
            return web.json_response({"error": "the kubelet did not answer in 10 s"}, status=504)
        return web.Response(text=b"".join(chunks).decode(errors="replace"), content_type="text/plain")

    async def _trace(self, request: web.Request) -> web.Response:
        """The pod's start as a timeline, from the trace its Create began (tracing on: `up
        --otlp-endpoint`, and the dashboard given the query API with --traces-url)."""
        if not self.traces_url:
            return web.json_response({"error": "no trace store: start the dashboard with --traces-url (Jaeger's "
                                               "query API)"}, status=404)
        try:
            pod = await self.client.pods.get(request.match_info["name"], request.match_info["namespace"])
        except errors.ApiError as err:
            return _refused(err)
        ident = trace_id(pod)
        if not ident:
            return web.json_response({"error": "the pod carries no trace context (was tracing on when it was "
                                               "created?)"}, status=404)
        url = f"{self.traces_url.rstrip('/')}/api/traces/{ident}"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
                    session.get(url) as reply:
                if reply.status == 404:
                    return web.json_response({"error": f"trace {ident} is not (yet) in the trace store"}, status=404)
                reply.raise_for_status()
                body = await reply.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            return web.json_response({"error": f"the trace store at {self.traces_url}: {err}"}, status=502)
        data = body.get("data") or []
        return web.json_response({"traceID": ident, "spans": timeline(data[0]) if data else []})

"""What the kubelet's daemon endpoint tells about the node itself, as upstream's does
through `kubectl get --raw /api/v1/nodes/<node>/proxy/...`:

- `/pods`: the PodList of the pods bound to this node, as the kubelet sees them;
- `/configz`: the running configuration (`{"kubeletconfig": {...}}`, upstream's keys);
- `/metrics`: Prometheus text — the pods, containers by state, the node's name;
- `/logs/`: the node's pod log directory (upstream serves /var/log), listed as Go's file
  server lists a directory, its files served; nothing outside it.
"""

from __future__ import annotations

import dataclasses
import html
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from kubelet.config import KubeletConfig
from kubelet.runtime import Runtime
from kubeling.kjson import to_json
from protos.kubeling.v1.core_pb2 import Pod
from protos.runtime.v1 import api_pb2

__all__ = ["NodeEndpoints"]

_STATES = {api_pb2.CONTAINER_CREATED: "created", api_pb2.CONTAINER_RUNNING: "running",
           api_pb2.CONTAINER_EXITED: "exited", api_pb2.CONTAINER_UNKNOWN: "unknown"}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class NodeEndpoints:
    runtime: Runtime
    config: KubeletConfig
    pods: Callable[[], list[Pod]]  # this node's pods (the kubelet's informer)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/pods", self._pods)
        app.router.add_get("/configz", self._configz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/logs", self._logs)
        app.router.add_get("/logs/{path:.*}", self._logs)

    async def _pods(self, request: web.Request) -> web.Response:
        items = [{"kind": "Pod", "apiVersion": "v1", **to_json(p)} for p in self.pods()]
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def _configz(self, request: web.Request) -> web.Response:
        settings = {_camel(f.name): _plain(getattr(self.config, f.name)) for f in dataclasses.fields(self.config)}
        return web.json_response({"kubeletconfig": settings})

    async def _metrics(self, request: web.Request) -> web.Response:
        containers = await self.runtime.list_containers()
        sandboxes = await self.runtime.list_sandboxes()
        states = Counter(_STATES.get(c.state, "unknown") for c in containers)
        ready = sum(1 for s in sandboxes if s.state == api_pb2.SANDBOX_READY)
        lines = ["# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.",
                 "# TYPE kubelet_node_name gauge",
                 f'kubelet_node_name{{node="{self.config.node_name}"}} 1',
                 "# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox",
                 "# TYPE kubelet_running_pods gauge", f"kubelet_running_pods {ready}",
                 "# HELP kubelet_running_containers [ALPHA] Number of containers currently running",
                 "# TYPE kubelet_running_containers gauge"]
        lines += [f'kubelet_running_containers{{container_state="{state}"}} {states.get(state, 0)}'
                  for state in ("created", "exited", "running", "unknown")]
        lines += ["# HELP kubelet_desired_pods [ALPHA] The number of pods the kubelet is being instructed to run.",
                  "# TYPE kubelet_desired_pods gauge", f"kubelet_desired_pods {len(self.pods())}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        root = self.config.pod_logs_dir.resolve()
        wanted = (root / request.match_info.get("path", "")).resolve()
        if wanted != root and root not in wanted.parents:
            raise web.HTTPNotFound(text="404 page not found\n")
        if wanted.is_dir():
            if not request.path.endswith("/"):
                raise web.HTTPMovedPermanently(request.path + "/")
            entries = sorted(wanted.iterdir(), key=lambda p: p.name)
            links = [f'<a href="{quote(p.name)}{"/" if p.is_dir() else ""}">'
                     f'{html.escape(p.name)}{"/" if p.is_dir() else ""}</a>' for p in entries]
            return web.Response(text="<pre>\n" + "".join(f"{link}\n" for link in links) + "</pre>\n",
                                content_type="text/html")
        if wanted.is_file():
            return web.FileResponse(wanted, headers={"Content-Type": "text/plain; charset=utf-8"})
        raise web.HTTPNotFound(text="404 page not found\n")

"""NodeMetrics and PodMetrics (`metrics.k8s.io/v1beta1`, what `kubectl top node` and
`kubectl top pod [--containers]` and the HorizontalPodAutoscaler read) from the kubelets'
Summary API (`/stats/summary`, kubelet.summary), fetched when asked with the metrics
server's kubelet client certificate; nodes and pods read from the apiserver. A kubelet that
does not answer leaves its node and pods out, as metrics-server does."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp

from kubeling import errors
from kubeling.client import Client
from kubeling.selectors import LabelSelector, SelectorError
from protos.kubeling.v1 import core_pb2

__all__ = ["Scraper", "GROUP", "VERSION", "resource_list"]

log = logging.getLogger(__name__)

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
PREFIX = f"/apis/{GROUP}/{VERSION}"


def resource_list() -> dict[str, Any]:
    verbs = ["get", "list"]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}", "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": verbs},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": verbs}]}


def _usage(stats: dict[str, Any]) -> dict[str, str]:
    cpu = int((stats.get("cpu") or {}).get("usageNanoCores") or 0)
    memory = int((stats.get("memory") or {}).get("workingSetBytes") or 0)
    return {"cpu": f"{cpu}n", "memory": f"{memory // 1024}Ki"}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Scraper:
    client: Client
    ssl: ssl.SSLContext | None = None  # the kubelet client TLS (--kubelet-client-*)
    timeout: float = 10.0

    def _url(self, node: core_pb2.Node) -> str | None:
        address = next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")
        port = node.status.daemonEndpoints.kubeletEndpoint.Port
        if not address or not port:
            return None
        host = f"[{address}]" if ":" in address else address
        return f"{'https' if self.ssl is not None else 'http'}://{host}:{port}/stats/summary"

    async def _summaries(self, nodes: list[core_pb2.Node]) -> dict[str, dict[str, Any]]:
        async def one(session: aiohttp.ClientSession, node: core_pb2.Node) -> tuple[str, dict[str, Any] | None]:
            url = self._url(node)
            if url is None:
                return node.metadata.name, None
            try:
                async with session.get(url, ssl=self.ssl or True) as reply:
                    if reply.status != 200:
                        log.info("metrics: node %s: kubelet answered %d", node.metadata.name, reply.status)
                        return node.metadata.name, None
                    return node.metadata.name, await reply.json()
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.info("metrics: node %s: %s", node.metadata.name, exc)
                return node.metadata.name, None
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            answers = await asyncio.gather(*(one(session, n) for n in nodes))
        return {name: summary for name, summary in answers if summary is not None}

    @staticmethod
    def _selector(text: str) -> LabelSelector:
        try:
            return LabelSelector.parse(text)
        except SelectorError as err:
            raise errors.BadRequest(f"labelSelector: {err}") from None

    async def node_metrics(self, name: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        selector = self._selector(label_selector)
        if name:
            nodes = [await self.client.nodes.get(name)]
        else:
            listed = (await self.client.nodes.list(resource_version="0")).items
            nodes = [n for n in listed if selector.matches(n.metadata.labels)]
        summaries = await self._summaries(nodes)
        out = []
        for node in nodes:
            summary = summaries.get(node.metadata.name)
            if summary is None:
                continue
            stats = summary.get("node") or {}
            out.append({"metadata": {"name": node.metadata.name, "creationTimestamp": _now(),
                                     "labels": dict(node.metadata.labels)},
                        "timestamp": (stats.get("cpu") or {}).get("time", _now()), "window": "1s",
                        "usage": _usage(stats)})
        if name and not out:
            raise errors.NotFound(f'nodemetrics.metrics.k8s.io "{name}" not found')
        return out

    async def pod_metrics(self, namespace: str, name: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        selector = self._selector(label_selector)
        if name:
            pods = [await self.client.pods.get(name, namespace)]
        else:
            pods = list((await self.client.pods.list(namespace, resource_version="0")).items)
        pods = [p for p in pods if p.spec.nodeName and selector.matches(p.metadata.labels)]
        wanted = {p.spec.nodeName for p in pods}
        nodes = [n for n in (await self.client.nodes.list(resource_version="0")).items if n.metadata.name in wanted]
        summaries = await self._summaries(nodes)
        by_uid: dict[str, dict[str, Any]] = {}
        for summary in summaries.values():
            for entry in summary.get("pods") or []:
                by_uid[(entry.get("podRef") or {}).get("uid", "")] = entry
        out = []
        for pod in pods:
            entry = by_uid.get(pod.metadata.uid)
            if entry is None:
                continue
            out.append({"metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace,
                                     "creationTimestamp": _now(), "labels": dict(pod.metadata.labels)},
                        "timestamp": (entry.get("cpu") or {}).get("time", _now()), "window": "1s",
                        "containers": [{"name": c["name"], "usage": _usage(c)} for c in entry.get("containers") or []]})
        if name and not out:
            raise errors.NotFound(f'podmetrics.metrics.k8s.io "{namespace}/{name}" not found')
        return out

"""What the kubelet says of its node's and pods' resource use (upstream's
pkg/kubelet/stats and server/stats): the Summary API (`/stats/summary`, what
metrics-server reads) and the resource metrics (`/metrics/resource`), from the runtime's
CRI stats (ListPodSandboxStats: each pod's and container's cgroup CPU and memory).

CPU is a rate over the window between two samples: a request finds the last sample if
it is fresh, else takes one, and when none is recent enough to make a rate with, a
second one a second later — so `kubectl top` shows current use without the kubelet
sampling in the background. The node's figures are its pods' sum (these nodes share one
machine: the host's own use says nothing of a node)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from kubelet.runtime import Runtime
from protos.runtime.v1 import api_pb2

__all__ = ["SummaryProvider"]

_FRESH = 1.0  # a sample this young answers again
_WINDOW_MAX = 15.0  # an older previous sample is no rate: sample twice
_WINDOW = 1.0


def _rfc3339(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Sample:
    at: float  # monotonic
    stats: list[api_pb2.PodSandboxStats]


@dataclass
class SummaryProvider:
    runtime: Runtime
    node_name: str
    _last: _Sample | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def _sample(self) -> list[api_pb2.PodSandboxStats]:
        async with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last.at < _FRESH:
                return self._last.stats
            if self._last is None or now - self._last.at > _WINDOW_MAX:
                await self.runtime.list_pod_stats()  # the start of the window the rates cover
                await asyncio.sleep(_WINDOW)
            self._last = _Sample(time.monotonic(), await self.runtime.list_pod_stats())
            return self._last.stats

    async def summary(self) -> dict[str, Any]:
        """The Summary API (stats/v1alpha1): node, then each pod with its containers."""
        pods = []
        node_cpu_nano, node_cpu_total, node_ws, node_usage = 0, 0, 0, 0
        stamp = time.time_ns()
        for sandbox in await self._sample():
            attrs, linux = sandbox.attributes, sandbox.linux
            if not linux.cpu.timestamp:
                continue  # not running: no cgroup to measure
            meta = attrs.metadata
            containers = []
            for c in linux.containers:
                containers.append({
                    "name": c.attributes.metadata.name,
                    "cpu": _cpu(c.cpu), "memory": _memory(c.memory)})
            pods.append({"podRef": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
                         "cpu": _cpu(linux.cpu), "memory": _memory(linux.memory), "containers": containers})
            node_cpu_nano += linux.cpu.usage_nano_cores.value
            node_cpu_total += linux.cpu.usage_core_nano_seconds.value
            node_ws += linux.memory.working_set_bytes.value
            node_usage += linux.memory.usage_bytes.value
            stamp = max(stamp, linux.cpu.timestamp)
        when = _rfc3339(stamp)
        return {"node": {"nodeName": self.node_name,
                         "cpu": {"time": when, "usageNanoCores": node_cpu_nano, "usageCoreNanoSeconds": node_cpu_total},
                         "memory": {"time": when, "workingSetBytes": node_ws, "usageBytes": node_usage}},
                "pods": pods}

    async def resource_metrics(self) -> str:
        """The kubelet's /metrics/resource, in the Prometheus text format."""
        summary = await self.summary()
        node = summary["node"]
        lines = ["# HELP node_cpu_usage_seconds_total Cumulative cpu time consumed by the node in core-seconds",
                 "# TYPE node_cpu_usage_seconds_total counter",
                 f"node_cpu_usage_seconds_total {node['cpu']['usageCoreNanoSeconds'] / 1e9}",
                 "# HELP node_memory_working_set_bytes Current working set of the node in bytes",
                 "# TYPE node_memory_working_set_bytes gauge",
                 f"node_memory_working_set_bytes {node['memory']['workingSetBytes']}",
                 "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed by the container in "
                 "core-seconds", "# TYPE container_cpu_usage_seconds_total counter"]
        memory = ["# HELP container_memory_working_set_bytes Current working set of the container in bytes",
                  "# TYPE container_memory_working_set_bytes gauge"]
        pod_lines = ["# HELP pod_cpu_usage_seconds_total Cumulative cpu time consumed by the pod in core-seconds",
                     "# TYPE pod_cpu_usage_seconds_total counter"]
        pod_memory = ["# HELP pod_memory_working_set_bytes Current working set of the pod in bytes",
                      "# TYPE pod_memory_working_set_bytes gauge"]
        for pod in summary["pods"]:
            ref = pod["podRef"]
            pl = f'namespace="{ref["namespace"]}",pod="{ref["name"]}"'
            pod_lines.append(f"pod_cpu_usage_seconds_total{{{pl}}} {pod['cpu']['usageCoreNanoSeconds'] / 1e9}")
            pod_memory.append(f"pod_memory_working_set_bytes{{{pl}}} {pod['memory']['workingSetBytes']}")
            for c in pod["containers"]:
                cl = f'container="{c["name"]}",{pl}'
                lines.append(f"container_cpu_usage_seconds_total{{{cl}}} {c['cpu']['usageCoreNanoSeconds'] / 1e9}")
                memory.append(f"container_memory_working_set_bytes{{{cl}}} {c['memory']['workingSetBytes']}")
        return "\n".join([*lines, *memory, *pod_lines, *pod_memory]) + "\n"


def _cpu(cpu: api_pb2.CpuUsage) -> dict[str, Any]:
    return {"time": _rfc3339(cpu.timestamp or time.time_ns()), "usageNanoCores": cpu.usage_nano_cores.value,
            "usageCoreNanoSeconds": cpu.usage_core_nano_seconds.value}


def _memory(memory: api_pb2.MemoryUsage) -> dict[str, Any]:
    return {"time": _rfc3339(memory.timestamp or time.time_ns()), "workingSetBytes": memory.working_set_bytes.value,
            "usageBytes": memory.usage_bytes.value, "rssBytes": memory.rss_bytes.value}


"""What the scheduler knows about nodes and pods: NodeInfo, PodInfo, Resource, QueuedPodInfo."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

from kubeling.quantity import parse_quantity
from protos.kubeling.v1.core_pb2 import Node, Pod

__all__ = [
    "Resource", "PodInfo", "NodeInfo", "QueuedPodInfo", "ImageStateSummary",
    "pod_key", "DEFAULT_MILLI_CPU_REQUEST", "DEFAULT_MEMORY_REQUEST", "MAX_NODE_SCORE",
]


MAX_NODE_SCORE = 100
# What scoring assumes for a container that requests nothing (upstream schedutil).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def pod_key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


@functools.lru_cache(maxsize=4096)
def _amount(name: str, text: str) -> int:
    """A quantity in scheduler units; memoized: every pod repeats the same few strings."""
    q = parse_quantity(text)
    return q.milli_value() if name == "cpu" else q.int_value()


@dataclass(slots=True)
class Resource:
    """Amounts in scheduler units: milli-CPU, bytes, pod count, and any other resource."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, resources: Any) -> Resource:
        r = cls()
        for name, text in resources.items():
            r.set(name, _amount(name, text))
        return r

    def get(self, name: str) -> int:
        if name == "cpu":
            return self.milli_cpu
        if name == "memory":
            return self.memory
        if name == "ephemeral-storage":
            return self.ephemeral_storage
        if name == "pods":
            return self.allowed_pod_number
        return self.scalar.get(name, 0)

    def set(self, name: str, value: int) -> None:
        if name == "cpu":
            self.milli_cpu = value
        elif name == "memory":
            self.memory = value
        elif name == "ephemeral-storage":
            self.ephemeral_storage = value
        elif name == "pods":
            self.allowed_pod_number = value
        else:
            self.scalar[name] = value

    def add(self, other: Resource, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def names(self) -> list[str]:
        return ["cpu", "memory", "ephemeral-storage", *self.scalar]

    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number,
                        dict(self.scalar))


def pod_requests(pod: Pod, *, non_zero: bool = False) -> Resource:
    """max(sum of containers, each init container) + overhead (upstream resourcehelper.PodRequests).

    non_zero: a container that requests no cpu/memory counts as 100m / 200Mi (for scoring)."""
    total = Resource()
    for c in pod.spec.containers:
        total.add(_container_requests(c, non_zero))
    for c in pod.spec.initContainers:
        init = _container_requests(c, non_zero)
        total.milli_cpu = max(total.milli_cpu, init.milli_cpu)
        total.memory = max(total.memory, init.memory)
        total.ephemeral_storage = max(total.ephemeral_storage, init.ephemeral_storage)
        for name, value in init.scalar.items():
            total.scalar[name] = max(total.scalar.get(name, 0), value)
    if pod.spec.overhead:
        total.add(Resource.from_list(pod.spec.overhead))
    return total


def _container_requests(c: Any, non_zero: bool) -> Resource:
    r = Resource.from_list(c.resources.requests)
    if non_zero:
        if "cpu" not in c.resources.requests:
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if "memory" not in c.resources.requests:
            r.memory = DEFAULT_MEMORY_REQUEST
    return r


@dataclass(slots=True)
class PodInfo:
    """A pod plus what the scheduler derives from it once."""

    pod: Pod
    requests: Resource
    non_zero: Resource
    host_ports: list[tuple[str, str, int]]  # (hostIP, protocol, hostPort)
    has_affinity: bool = False               # any pod affinity or anti-affinity term
    has_required_anti_affinity: bool = False
    derived: dict[str, Any] = field(default_factory=dict)  # plugins' parsed forms, computed once

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        ports = [(p.hostIP or "0.0.0.0", p.protocol or "TCP", p.hostPort)
                 for c in pod.spec.containers for p in c.ports if p.hostPort]
        aff = pod.spec.affinity
        has_affinity = aff.HasField("podAffinity") or aff.HasField("podAntiAffinity")
        required_anti = has_affinity and bool(aff.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution)
        return cls(pod, pod_requests(pod), pod_requests(pod, non_zero=True), ports, has_affinity, required_anti)

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def uid(self) -> str:
        return str(self.pod.metadata.uid)


@dataclass(slots=True)
class ImageStateSummary:
    size: int
    num_nodes: int


@dataclass(slots=True)
class NodeInfo:
    """One node and the pods on it (bound or assumed), with their sums."""

    node: Node | None = None
    pods: list[PodInfo] = field(default_factory=list)
    requested: Resource = field(default_factory=Resource)
    non_zero_requested: Resource = field(default_factory=Resource)
    allocatable: Resource = field(default_factory=Resource)
    used_ports: dict[tuple[str, str, int], int] = field(default_factory=dict)
    image_states: dict[str, ImageStateSummary] = field(default_factory=dict)
    generation: int = 0
    name: str = ""  # the node's name, kept here: it is read for every node in every cycle
    pods_with_affinity: int = 0
    pods_with_required_anti_affinity: int = 0

    def set_node(self, node: Node) -> None:
        self.node = node
        self.name = str(node.metadata.name)
        self.allocatable = Resource.from_list(node.status.allocatable or node.status.capacity)

    def add_pod(self, pi: PodInfo) -> None:
        self.pods.append(pi)
        self.requested.add(pi.requests)
        self.non_zero_requested.milli_cpu += pi.non_zero.milli_cpu
        self.non_zero_requested.memory += pi.non_zero.memory
        for port in pi.host_ports:
            self.used_ports[port] = self.used_ports.get(port, 0) + 1
        self.pods_with_affinity += pi.has_affinity
        self.pods_with_required_anti_affinity += pi.has_required_anti_affinity

    def remove_pod(self, uid: str) -> PodInfo | None:
        for i, pi in enumerate(self.pods):
            if pi.uid == uid:
                del self.pods[i]
                self.requested.add(pi.requests, -1)
                self.non_zero_requested.milli_cpu -= pi.non_zero.milli_cpu
                self.non_zero_requested.memory -= pi.non_zero.memory
                for port in pi.host_ports:
                    left = self.used_ports.get(port, 0) - 1
                    if left > 0:
                        self.used_ports[port] = left
                    else:
                        self.used_ports.pop(port, None)
                self.pods_with_affinity -= pi.has_affinity
                self.pods_with_required_anti_affinity -= pi.has_required_anti_affinity
                return pi
        return None

    def port_in_use(self, ip: str, protocol: str, port: int) -> bool:
        """A wildcard address conflicts with every address on the same protocol and port."""
        if ip == "0.0.0.0":
            return any(p == port and proto == protocol for (_, proto, p) in self.used_ports)
        return ((ip, protocol, port) in self.used_ports
                or ("0.0.0.0", protocol, port) in self.used_ports)

    def clone(self) -> NodeInfo:
        return NodeInfo(self.node, list(self.pods), self.requested.clone(), self.non_zero_requested.clone(),
                        self.allocatable.clone(), dict(self.used_ports), dict(self.image_states),
                        self.generation, self.name, self.pods_with_affinity, self.pods_with_required_anti_affinity)


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue, with its history there."""

    pod_info: PodInfo
    timestamp: float = field(default_factory=time.monotonic)  # when it (re)entered the queue
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key

"""The eviction manager (pkg/kubelet/eviction): the node's signals observed, its
thresholds judged, the node's pressure conditions, and which pod goes when a threshold
is met.

Signals, as upstream names them: `memory.available` (the machine's MemAvailable: what
the kernel can hand out without swapping; upstream reads the root cgroup's working set,
which tracks it), `nodefs.available` (the filesystem of the kubelet's state: volumes,
logs), `imagefs.available` (the image store's), `pid.available` (pid_max less the
processes running). Thresholds are quantities or percentages of capacity; a hard one
acts at once, a soft one once it has held for its grace period. While a threshold is met,
and for the pressure transition period after, the node reports MemoryPressure,
DiskPressure or PIDPressure. Pods are ranked as upstream's rankMemoryPressure does —
those using more than they request first, then by priority, then by how far their
usage exceeds their request — (disk: the same with ephemeral storage; pids: priority),
and one pod is evicted per pass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import core_pb2

__all__ = ["Threshold", "Observation", "EvictionManager", "parse_thresholds", "parse_grace_periods", "observe",
           "SIGNALS", "DEFAULT_HARD", "PodUsage", "Eviction", "CRITICAL_PRIORITY"]

# signal -> (node condition, the resource it is short of)
SIGNALS = {"memory.available": ("MemoryPressure", "memory"), "nodefs.available": ("DiskPressure", "ephemeral-storage"),
           "imagefs.available": ("DiskPressure", "ephemeral-storage"), "pid.available": ("PIDPressure", "pids")}
DEFAULT_HARD = {"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%"}
CRITICAL_PRIORITY = 2000000000  # system-cluster-critical and above: never evicted, always admitted


@dataclass(frozen=True)
class Threshold:
    signal: str
    quantity: int = 0  # bytes, or pids
    percentage: float = 0.0  # of capacity, when no quantity
    grace_period: float = 0.0  # soft thresholds: how long it must hold first

    def value(self, capacity: int) -> int:
        return self.quantity if self.quantity else int(capacity * self.percentage)

    def describe(self) -> str:
        return f"{self.percentage * 100:g}%" if not self.quantity else _bytes(self.quantity, self.signal)


def _bytes(value: int, signal: str) -> str:
    if signal == "pid.available":
        return str(value)
    return f"{value // 1024}Ki"


def parse_thresholds(values: Mapping[str, str], grace: Mapping[str, float] | None = None) -> list[Threshold]:
    """{signal: "100Mi" | "10%"} (KubeletConfiguration's evictionHard/evictionSoft);
    ValueError naming the signal when it cannot be used."""
    out = []
    for signal, text in values.items():
        if signal not in SIGNALS:
            raise ValueError(f"eviction threshold: unknown signal {signal!r} (known: {', '.join(SIGNALS)})")
        text = text.strip()
        if text.endswith("%"):
            try:
                percentage = float(text[:-1]) / 100
            except ValueError:
                raise ValueError(f"eviction threshold {signal}: {text!r} is not a percentage") from None
            if not 0 <= percentage <= 1:
                raise ValueError(f"eviction threshold {signal}: {text} must be within 0% and 100%")
            threshold = Threshold(signal, percentage=percentage)
        else:
            try:
                quantity = parse_quantity(text).int_value()
            except QuantityError as exc:
                raise ValueError(f"eviction threshold {signal}: {exc}") from None
            if quantity < 0:
                raise ValueError(f"eviction threshold {signal}: {text} must not be negative")
            threshold = Threshold(signal, quantity=quantity)
        if grace is not None:
            if signal not in grace:
                raise ValueError(f"eviction soft threshold {signal}: no grace period (evictionSoftGracePeriod)")
            threshold = Threshold(signal, threshold.quantity, threshold.percentage, grace[signal])
        out.append(threshold)
    return out


def parse_grace_periods(values: Mapping[str, str]) -> dict[str, float]:
    """{signal: "1m30s"} -> seconds (Go durations: h, m, s, ms)."""
    out = {}
    for signal, text in values.items():
        seconds = _duration(text)
        if seconds is None:
            raise ValueError(f"eviction soft grace period {signal}: {text!r} is not a duration such as 1m30s")
        out[signal] = seconds
    return out


def _duration(text: str) -> float | None:
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(text):
        if text[i].isdigit() or text[i] == ".":
            number += text[i]
            i += 1
            continue
        unit = "ms" if text[i:i + 2] == "ms" else text[i]
        if unit not in units or not number:
            return None
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    return total if not number and text else None


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


def _filesystem(path: Path) -> Observation:
    fs = os.statvfs(path)
    return Observation(fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize)


def observe(state_dir: Path, image_dir: Path) -> dict[str, Observation]:
    """The node's signals now."""
    mem = _meminfo()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    pids = sum(1 for p in os.listdir("/proc") if p.isdigit())
    return {"memory.available": Observation(mem.get("MemAvailable", mem["MemFree"]), mem["MemTotal"]),
            "nodefs.available": _filesystem(state_dir),
            "imagefs.available": _filesystem(image_dir if image_dir.exists() else state_dir),
            "pid.available": Observation(pid_max - pids, pid_max)}


@dataclass
class PodUsage:
    """A pod's use of the resource short (memory: working set; disk: bytes written)."""

    total: int
    containers: dict[str, int] = field(default_factory=dict)


@dataclass
class Eviction:
    pod: core_pb2.Pod
    message: str  # the pod's status message and the event's
    grace: int  # seconds its containers get


def _request(pod: core_pb2.Pod, resource: str) -> int:
    total = 0
    for c in pod.spec.containers:
        text = c.resources.requests.get(resource)
        if text:
            try:
                total += parse_quantity(text).int_value()
            except QuantityError:
                pass
    return total


@dataclass
class EvictionManager:
    hard: list[Threshold]
    soft: list[Threshold] = field(default_factory=list)
    pressure_transition_period: float = 300.0
    max_pod_grace_period: int = 0  # soft evictions: at most this many seconds for the pod (0: the pod's own)
    clock: Callable[[], float] = time.monotonic
    _soft_since: dict[str, float] = field(default_factory=dict)  # soft threshold signal -> first met
    _pressure_at: dict[str, float] = field(default_factory=dict)  # condition -> last time a threshold was met

    def hard_memory(self, capacity: int) -> int:
        """Bytes the hard memory.available threshold holds back from allocatable."""
        return max((t.value(capacity) for t in self.hard if t.signal == "memory.available"), default=0)

    def judge(self, observed: Mapping[str, Observation]) -> list[tuple[Threshold, Observation]]:
        """The thresholds met now (soft ones that have held for their grace period)."""
        now = self.clock()
        met = []
        for threshold in self.hard:
            seen = observed.get(threshold.signal)
            if seen is not None and seen.available < threshold.value(seen.capacity):
                met.append((threshold, seen))
        for threshold in self.soft:
            seen = observed.get(threshold.signal)
            if seen is None or seen.available >= threshold.value(seen.capacity):
                self._soft_since.pop(threshold.signal, None)
                continue
            since = self._soft_since.setdefault(threshold.signal, now)
            if now - since >= threshold.grace_period:
                met.append((threshold, seen))
        for threshold, _ in met:
            self._pressure_at[SIGNALS[threshold.signal][0]] = now
        return met

    def pressure(self) -> set[str]:
        """The node conditions under pressure: a threshold met within the transition period."""
        now = self.clock()
        return {condition for condition, at in self._pressure_at.items()
                if now - at < self.pressure_transition_period}

    @staticmethod
    def resource_short(met: list[tuple[Threshold, Observation]]) -> str:
        """The resource the eviction is for: the first met threshold's (memory first, as
        upstream orders them)."""
        order = list(SIGNALS)
        return SIGNALS[min(met, key=lambda m: order.index(m[0].signal))[0].signal][1]

    def choose(self, met: list[tuple[Threshold, Observation]], pods: list[core_pb2.Pod],
               usage: Mapping[str, PodUsage]) -> Eviction | None:
        """The pod to evict for the first threshold met, with upstream's message; `usage`:
        each pod's use of that resource (resource_short). None when no pod can be."""
        pods = [p for p in pods if p.spec.priority < CRITICAL_PRIORITY]
        if not met or not pods:
            return None
        order = list(SIGNALS)
        threshold, seen = min(met, key=lambda m: order.index(m[0].signal))
        resource = SIGNALS[threshold.signal][1]

        def rank(pod: core_pb2.Pod) -> tuple[int, int, int]:
            used = usage.get(pod.metadata.uid, PodUsage(0)).total
            request = _request(pod, resource)
            exceeds = resource != "pids" and used > request
            return (0 if exceeds else 1, pod.spec.priority, -(used - request))
        victim = min(pods, key=rank)
        message = (f"The node was low on resource: {resource}. Threshold quantity: {threshold.describe()}, "
                   f"available: {_bytes(seen.available, threshold.signal)}. ")
        used = usage.get(victim.metadata.uid, PodUsage(0))
        for c in victim.spec.containers:
            amount = used.containers.get(c.name)
            if amount is None or resource == "pids":
                continue
            request = c.resources.requests.get(resource, "0")
            try:
                over = amount > parse_quantity(request).int_value()
            except QuantityError:
                over = True
            if over:
                message += (f"Container {c.name} was using {amount // 1024}Ki, request is {request}, has larger "
                            f"consumption of {resource}. ")
        grace = 0 if threshold.grace_period == 0 and threshold in self.hard else \
            _soft_grace(victim, self.max_pod_grace_period)
        return Eviction(victim, message, grace)


def _soft_grace(pod: core_pb2.Pod, maximum: int) -> int:
    own = pod.spec.terminationGracePeriodSeconds if pod.spec.HasField("terminationGracePeriodSeconds") else 30
    return min(own, maximum) if maximum > 0 else own

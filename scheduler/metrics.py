"""Prometheus metrics of one scheduler, with kube-scheduler's metric names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SchedulerMetrics"]

_LATENCY = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096)


@dataclass
class SchedulerMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.attempts = Counter("scheduler_schedule_attempts_total",
                                "Scheduling attempts by result (scheduled, unschedulable, error) and profile.",
                                ["result", "profile"], registry=r)
        self.attempt_duration = Histogram("scheduler_scheduling_attempt_duration_seconds",
                                          "Scheduling cycle latency (algorithm and binding) by result and profile.",
                                          ["result", "profile"], buckets=_LATENCY, registry=r)
        self.pod_attempts = Histogram("scheduler_pod_scheduling_attempts",
                                      "Attempts a pod needed until it was scheduled.",
                                      buckets=(1, 2, 4, 8, 16), registry=r)
        self.extension_point = Histogram("scheduler_framework_extension_point_duration_seconds",
                                         "Latency of running an extension point (all its plugins) for one pod.",
                                         ["extension_point", "status", "profile"], buckets=_LATENCY, registry=r)
        self.pending = Gauge("scheduler_pending_pods", "Pending pods by queue (active, backoff, unschedulable, gated).",
                             ["queue"], registry=r)
        self.leader = Gauge("scheduler_leader", "1 while this replica holds the leader lease.", registry=r)
        # Labelled children, looked up once: `labels()` costs more than the observation itself,
        # and the scheduling cycle records several per pod.
        self._children: dict[tuple[str, ...], Any] = {}

    def _child(self, which: str, metric: Counter | Histogram, *labels: str) -> Any:
        key = (which, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        self._child("point", self.extension_point, point, status, profile).observe(seconds)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        self._child("attempts", self.attempts, result, profile).inc()
        self._child("duration", self.attempt_duration, result, profile).observe(seconds)

    def track_pending(self, stats: Callable[[], object]) -> None:
        """Read queue sizes at scrape time."""
        def reader(queue: str) -> Callable[[], float]:
            return lambda: float(getattr(stats(), queue))

        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending.labels(queue).set_function(reader(queue))

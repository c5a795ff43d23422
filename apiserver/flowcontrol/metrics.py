"""Priority and Fairness on /metrics, by upstream's names (apiserver_flowcontrol_*), so that
the dashboards and alerts written for kube-apiserver read this one: requests dispatched,
rejected (by reason), waiting and executing per FlowSchema and priority level, their wait
and execution times, and each level's seats."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from apiserver.flowcontrol.queueset import PriorityLevel

__all__ = ["FlowMetrics"]

_LABELS = ["flow_schema", "priority_level"]
# upstream's buckets for the wait and execution histograms
_BUCKETS = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)


@dataclass(eq=False)  # registered by identity
class FlowMetrics(Collector):
    registry: CollectorRegistry
    levels: Callable[[], dict[str, PriorityLevel]] = dict
    inqueue: Tally[tuple[str, str]] = field(default_factory=Tally)
    executing: Tally[tuple[str, str]] = field(default_factory=Tally)
    executing_seats: Tally[tuple[str, str]] = field(default_factory=Tally)

    def __post_init__(self) -> None:
        self.dispatched = Counter(
            "apiserver_flowcontrol_dispatched_requests_total", "Requests released for service.", _LABELS,
            registry=self.registry)
        self.rejected = Counter(
            "apiserver_flowcontrol_rejected_requests_total",
            "Requests rejected (reason: queue-full, time-out, concurrency-limit, cancelled).",
            [*_LABELS, "reason"], registry=self.registry)
        self.wait = Histogram(
            "apiserver_flowcontrol_request_wait_duration_seconds", "How long requests waited in a queue.",
            [*_LABELS, "execute"], buckets=_BUCKETS, registry=self.registry)
        self.execution = Histogram(
            "apiserver_flowcontrol_request_execution_seconds", "How long requests executed.",
            [*_LABELS, "type"], buckets=_BUCKETS, registry=self.registry)
        self.registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield self._gauge("apiserver_flowcontrol_current_inqueue_requests",
                          "Requests waiting in a queue now.", self.inqueue)
        yield self._gauge("apiserver_flowcontrol_current_executing_requests",
                          "Requests executing now.", self.executing)
        yield self._gauge("apiserver_flowcontrol_current_executing_seats",
                          "Seats of the requests executing now.", self.executing_seats)
        levels = self.levels()
        for name, what in (("apiserver_flowcontrol_nominal_limit_seats", "Nominal seats of each level."),
                           ("apiserver_flowcontrol_current_limit_seats", "Seats each level may use now.")):
            gauge = GaugeMetricFamily(name, what, labels=["priority_level"])
            for level in levels.values():
                if not level.exempt:
                    gauge.add_metric([level.name], level.seats)
            yield gauge

    @staticmethod
    def _gauge(name: str, what: str, values: Tally[tuple[str, str]]) -> GaugeMetricFamily:
        gauge = GaugeMetricFamily(name, what, labels=_LABELS)
        for labels, value in sorted(values.items()):
            gauge.add_metric(list(labels), value)
        return gauge

"""Prometheus metrics of one apiserver (a registry per instance, no global state)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "apiserver_request_total", "Requests by verb, resource and gRPC code.",
            ["verb", "resource", "code"], registry=self.registry)
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Request latency by verb and resource (watches: until the stream ends).",
            ["verb", "resource"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.watchers = Gauge(
            "apiserver_registered_watchers", "Open watch streams by resource.", ["resource"],
            registry=self.registry)
        self.compactions = Counter(
            "apiserver_etcd_compactions_total", "Compactions of etcd history done by this apiserver.",
            registry=self.registry)
        self.defragmentations = Counter(
            "apiserver_etcd_defragmentations_total", "etcd members defragmented by this apiserver.",
            registry=self.registry)
        # upstream's name (etcd's db file per member), as seen at this apiserver's last look
        self.db_size = Gauge(
            "apiserver_storage_db_total_size_in_bytes", "Size of the etcd database file per member.",
            ["endpoint"], registry=self.registry)

    def observe(self, verb: str, resource: str, code: str, seconds: float) -> None:
        self.requests.labels(verb, resource, code).inc()
        self.latency.labels(verb, resource).observe(seconds)

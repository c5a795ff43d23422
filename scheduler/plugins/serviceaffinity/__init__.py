"""ServiceAffinity: keep a Service's pods on nodes with the same values of some labels
(a Policy's serviceAffinity predicate), or spread them over a label (serviceAntiAffinity)."""

from __future__ import annotations

from scheduler.plugins.serviceaffinity.service_affinity import ServiceAffinity

__all__ = ["ServiceAffinity"]

"""PodTopologySpread: keep matching pods evenly spread over topology domains."""

from __future__ import annotations

from scheduler.plugins.podtopologyspread.pod_topology_spread import PodTopologySpread

__all__ = ["PodTopologySpread"]

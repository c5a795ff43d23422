"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score."""

from __future__ import annotations

from scheduler.plugins.nodeaffinity.node_affinity import NodeAffinity

__all__ = ["NodeAffinity"]

"""NodePreferAvoidPods: nodes whose preferAvoidPods annotation names the pod's controller score 0."""

from __future__ import annotations

from scheduler.plugins.nodepreferavoidpods.node_prefer_avoid_pods import PREFER_AVOID_PODS, NodePreferAvoidPods

__all__ = ["NodePreferAvoidPods", "PREFER_AVOID_PODS"]

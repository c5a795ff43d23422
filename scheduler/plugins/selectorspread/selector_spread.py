"""SelectorSpread (PreScore + Score): fewer pods of the same Services and controller on a
node, and in its zone, is better. What spread a Deployment's pods before PodTopologySpread's
default constraints did (upstream 1.19-1.22: the SelectorSpreadPriority of a Policy, and
the DefaultProvider's without the DefaultPodTopologySpread gate).

Score counts the node's matching pods (same namespace, not terminating); NormalizeScore,
with the highest count M over the scored nodes, gives 100 × (M - count) / M, and when
nodes have zones blends in the zone's count, 2/3 zone and 1/3 node, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubeling.selectors import LabelSelector
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore, PreScorePlugin, ScorePlugin
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo
from scheduler.plugins.helper import default_selector, zone_key

__all__ = ["SelectorSpread", "count_matching_pods"]

_KEY = "PreScoreSelectorSpread"
ZONE_WEIGHTING = 2.0 / 3.0


def count_matching_pods(namespace: str, selector: LabelSelector, info: NodeInfo) -> int:
    """Pods of `namespace` on the node that `selector` matches, terminating ones left out;
    an empty selector matches none here."""
    if not info.pods or selector.empty():
        return 0
    return sum(1 for pi in info.pods if pi.pod.metadata.namespace == namespace
               and not pi.pod.metadata.HasField("deletionTimestamp") and selector.matches(pi.pod.metadata.labels))


class SelectorSpread(PreScorePlugin, ScorePlugin):
    name = "SelectorSpread"

    @staticmethod
    def _skip(pod: Any) -> bool:
        # A pod with its own spread constraints is PodTopologySpread's (upstream skips it here).
        return len(pod.spec.topologySpreadConstraints) > 0

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        if self._skip(pod):
            return Status(Code.SKIP)
        state.write(_KEY, default_selector(pod, self.handle))
        return SUCCESS

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        if self._skip(pod):
            return 0, SUCCESS
        selector: LabelSelector = state.read(_KEY)
        return count_matching_pods(pod.metadata.namespace, selector, node), SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """Nothing selects the pod (no Service, no controller): no node has a pod to spread
        from, at once for every node; else per node."""
        selector: LabelSelector = state.read(_KEY)
        return np.zeros(len(rows), dtype=np.int64) if selector.empty() else None

    def normalize_batch(self, state: CycleState, pod: Any, scores: np.ndarray) -> np.ndarray | None:
        """No matching pod anywhere: every node and every zone scores 100 (per node otherwise)."""
        return np.full_like(scores, MAX_NODE_SCORE) if not scores.any() else None

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        if self._skip(pod):
            return scores, SUCCESS
        zones: dict[str, str] = {}
        by_zone: dict[str, int] = {}
        max_by_node = 0
        for s in scores:
            max_by_node = max(max_by_node, s.score)
            info = self.handle.node_info(s.name) if self.handle is not None else None
            zone = zone_key(info.node) if info is not None and info.node is not None else ""
            if zone:
                zones[s.name] = zone
                by_zone[zone] = by_zone.get(zone, 0) + s.score
        max_by_zone = max(by_zone.values(), default=0)
        out = []
        for s in scores:
            f = float(MAX_NODE_SCORE)
            if max_by_node > 0:
                f = MAX_NODE_SCORE * ((max_by_node - s.score) / max_by_node)
            in_zone = zones.get(s.name)
            if in_zone:  # only nodes with a zone blend it in (haveZones and this node has one)
                zone_score = float(MAX_NODE_SCORE)
                if max_by_zone > 0:
                    zone_score = MAX_NODE_SCORE * ((max_by_zone - by_zone[in_zone]) / max_by_zone)
                f = f * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score
            out.append(NodeScore(s.name, int(f)))
        return out, SUCCESS

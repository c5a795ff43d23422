"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule ones
count against a node (fewer is better)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import default_normalize, default_normalize_array, find_untolerated, tolerates
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreScorePlugin,
    Resource,
    ScorePlugin,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo

__all__ = ["TaintToleration"]

_KEY = "PreScoreTaintToleration"


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "TaintToleration"

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        if node.node is None:
            return Status.as_error("node not found")
        taint = find_untolerated(node.node.spec.taints, pod.spec.tolerations, ("NoSchedule", "NoExecute"))
        if taint is None:
            return SUCCESS
        return Status.unresolvable(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_KEY, [t for t in pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")])
        return SUCCESS

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        tolerations = state.get(_KEY)
        if tolerations is None:
            tolerations = [t for t in pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
        if node.node is None:
            return 0, Status.as_error("node not found")
        count = 0
        for taint in node.node.spec.taints:
            if taint.effect == "PreferNoSchedule" and not any(tolerates(t, taint) for t in tolerations):
                count += 1
        return count, SUCCESS

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        return default_normalize(scores, reverse=True), SUCCESS

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        mask = ~table.hard_taints[rows]  # untainted nodes pass; tainted ones are checked one by one
        for i in np.flatnonzero(~mask):
            mask[i] = self.filter(state, pod, nodes[rows[i]]).ok
        return mask

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        out = np.zeros(len(rows), dtype=np.int64)
        for i in np.flatnonzero(table.soft_taints[rows]):
            out[i] = self.score(state, pod, nodes[rows[i]])[0]
        return out

    def normalize_batch(self, state: CycleState, pod: Any, scores: np.ndarray) -> np.ndarray | None:
        return default_normalize_array(scores, reverse=True)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT)]

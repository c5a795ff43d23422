"""The node-resources Score plugins of upstream 1.19-1.22, one per strategy, which a
Policy's priorities become: NodeResourcesLeastAllocated (LeastRequestedPriority),
NodeResourcesMostAllocated (MostRequestedPriority) and RequestedToCapacityRatio
(RequestedToCapacityRatioPriority). Later upstream folded them into NodeResourcesFit's
scoringStrategy; a Policy may name two of them with their own weights, which one Fit
cannot say, so they stay plugins here, each with its own args:

    NodeResourcesLeastAllocated / NodeResourcesMostAllocated: {resources: [{name: cpu, weight: 1}, ...]}
    RequestedToCapacityRatio: {shape: [{utilization: 0, score: 10}, ...], resources: [...]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import Handle, ScorePlugin
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo
from scheduler.plugins.noderesources.resource_allocation import (
    AllocationScorer,
    requests_of,
    resource_specs,
    utilization_shape,
)

__all__ = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]


class _AllocationScore(ScorePlugin):
    strategy: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        where = f"pluginConfig[{self.name}].args"
        shape = utilization_shape(self.args.get("shape"), f"{where}.shape") \
            if self.strategy == "RequestedToCapacityRatio" else None
        self.scorer = AllocationScorer(self.strategy, resource_specs(self.args, where), shape)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        return self.scorer.score(requests_of(state, pod, non_zero=True), node), SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        return self.scorer.score_batch(requests_of(state, pod, non_zero=True), table, rows)


class LeastAllocated(_AllocationScore):
    name = "NodeResourcesLeastAllocated"
    strategy = "LeastAllocated"


class MostAllocated(_AllocationScore):
    name = "NodeResourcesMostAllocated"
    strategy = "MostAllocated"


class RequestedToCapacityRatio(_AllocationScore):
    name = "RequestedToCapacityRatio"
    strategy = "RequestedToCapacityRatio"

"""NodeResourcesFit (Filter + Score): nodes without room for the pod's requests (and pod
count) are filtered; its Score strategies are LeastAllocated (default), MostAllocated and
RequestedToCapacityRatio."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    Resource,
    ScorePlugin,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo
from scheduler.framework.types import Resource as Amounts
from scheduler.plugins.noderesources.resource_allocation import (
    STRATEGIES,
    AllocationScorer,
    requests_of,
    resource_specs,
    utilization_shape,
)

__all__ = ["Fit", "ConfigError"]

_FIT_KEY = "PreFilterNodeResourcesFit"


class Fit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeResourcesFit"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        strategy = self.args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type", "LeastAllocated")
        where = "pluginConfig[NodeResourcesFit].args.scoringStrategy"
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"{where}.type: Unsupported value: {self.strategy!r}: supported values: "
                              "\"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"")
        shape = None
        if self.strategy == "RequestedToCapacityRatio":
            shape = utilization_shape((strategy.get("requestedToCapacityRatio") or {}).get("shape"),
                                      f"{where}.requestedToCapacityRatio.shape")
        self.scorer = AllocationScorer(self.strategy, resource_specs(strategy, where), shape)

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        state.write(_FIT_KEY, requests_of(state, pod))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        req: Amounts = state.get(_FIT_KEY) or requests_of(state, pod)
        reasons = []
        if len(node.pods) + 1 > node.allocatable.allowed_pod_number:
            reasons.append("Too many pods")
        alloc, used = node.allocatable, node.requested
        if req.milli_cpu and alloc.milli_cpu < req.milli_cpu + used.milli_cpu:
            reasons.append("Insufficient cpu")
        if req.memory and alloc.memory < req.memory + used.memory:
            reasons.append("Insufficient memory")
        if req.ephemeral_storage and alloc.ephemeral_storage < req.ephemeral_storage + used.ephemeral_storage:
            reasons.append("Insufficient ephemeral-storage")
        for name, amount in req.scalar.items():
            if amount and alloc.scalar.get(name, 0) < amount + used.scalar.get(name, 0):
                reasons.append(f"Insufficient {name}")
        return Status.unschedulable(*reasons) if reasons else SUCCESS

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        req: Amounts = state.get(_FIT_KEY) or requests_of(state, pod)
        if any(req.scalar.values()):
            return None  # extended resources: per node
        mask = table.pods[rows] + 1 <= table.alloc_pods[rows]
        if req.milli_cpu:
            mask &= table.alloc_cpu[rows] >= req.milli_cpu + table.req_cpu[rows]
        if req.memory:
            mask &= table.alloc_mem[rows] >= req.memory + table.req_mem[rows]
        if req.ephemeral_storage:
            mask &= table.alloc_eph[rows] >= req.ephemeral_storage + table.req_eph[rows]
        return mask

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_FIT_KEY + "/score", requests_of(state, pod, non_zero=True))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        req: Amounts = state.get(_FIT_KEY + "/score") or requests_of(state, pod, non_zero=True)
        return self.scorer.score_batch(req, table, rows)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        req: Amounts = state.get(_FIT_KEY + "/score") or requests_of(state, pod, non_zero=True)
        return self.scorer.score(req, node), SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.NODE, Action.ADD),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE)]

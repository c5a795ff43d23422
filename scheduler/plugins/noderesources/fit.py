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
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo
from scheduler.framework.types import Resource as Amounts
from scheduler.plugins.noderesources.resource_allocation import (
    MAX_CUSTOM_SCORE,
    MAX_UTILIZATION,
    broken_linear,
    least_allocated,
    most_allocated,
    requested_with,
    requests_of,
    resource_specs,
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
        self.resources = resource_specs(strategy, where)
        if self.strategy == "RequestedToCapacityRatio":
            points = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
            if not points:
                raise ConfigError(f"{where}.requestedToCapacityRatio.shape: Required value")
            shape: list[tuple[int, int]] = []
            for i, p in enumerate(points):
                u, s = p.get("utilization"), p.get("score")
                if not isinstance(u, int) or not 0 <= u <= MAX_UTILIZATION:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                      f"{u!r}: must be in the range [0, 100]")
                if not isinstance(s, int) or not 0 <= s <= MAX_CUSTOM_SCORE:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].score: Invalid value: "
                                      f"{s!r}: must be in the range [0, 10]")
                if shape and u <= shape[-1][0]:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                      f"{u!r}: utilization values must be sorted in increasing order")
                shape.append((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)))
            self._rtcr = broken_linear(shape)
        elif self.strategy not in ("LeastAllocated", "MostAllocated"):
            raise ConfigError(f"{where}.type: Unsupported value: {self.strategy!r}: supported values: "
                              "\"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"")

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
        if self.strategy == "RequestedToCapacityRatio" or any(s.name not in ("cpu", "memory") for s in self.resources):
            return None
        req: Amounts = state.get(_FIT_KEY + "/score") or requests_of(state, pod, non_zero=True)
        columns = []
        for spec in self.resources:
            if spec.name == "cpu":
                columns.append((spec.weight, table.alloc_cpu[rows], table.nz_cpu[rows] + req.milli_cpu))
            else:
                columns.append((spec.weight, table.alloc_mem[rows], table.nz_mem[rows] + req.memory))
        if all(cap.all() for _, cap, _ in columns):
            # Every node has every resource (the usual case): no zero-capacity masking.
            total = np.zeros(len(rows), dtype=np.int64)
            for weight, cap, used in columns:
                if self.strategy == "LeastAllocated":
                    total += np.maximum(cap - used, 0) * MAX_NODE_SCORE // cap * weight
                else:
                    total += np.minimum(used, cap) * MAX_NODE_SCORE // cap * weight
            weight_sum = sum(weight for weight, _, _ in columns)
            return total // weight_sum if weight_sum else np.zeros(len(rows), dtype=np.int64)
        total = np.zeros(len(rows), dtype=np.int64)
        weights = np.zeros(len(rows), dtype=np.int64)
        for weight, cap, used in columns:
            has = cap > 0
            safe = np.where(has, cap, 1)
            if self.strategy == "LeastAllocated":
                value = np.where(used <= cap, (cap - used) * MAX_NODE_SCORE // safe, 0)
            else:
                value = np.minimum(used, cap) * MAX_NODE_SCORE // safe
            total += np.where(has, value * weight, 0)
            weights += np.where(has, weight, 0)
        return np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        req: Amounts = state.get(_FIT_KEY + "/score") or requests_of(state, pod, non_zero=True)
        total = weights = 0
        for spec in self.resources:
            capacity, requested = requested_with(node, req, spec.name, non_zero=True)
            if capacity == 0:
                continue
            if self.strategy == "LeastAllocated":
                value = least_allocated(requested, capacity)
            elif self.strategy == "MostAllocated":
                value = most_allocated(requested, capacity)
            else:
                utilization = MAX_UTILIZATION if requested > capacity else requested * MAX_UTILIZATION // capacity
                value = self._rtcr(utilization)
                if value <= 0:
                    continue
            total += value * spec.weight
            weights += spec.weight
        if weights == 0:
            return 0, SUCCESS
        if self.strategy == "RequestedToCapacityRatio":
            return int(total / weights + 0.5), SUCCESS  # math.Round for non-negative values
        return total // weights, SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.NODE, Action.ADD),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE)]

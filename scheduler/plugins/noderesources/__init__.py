"""NodeResourcesFit (Filter + Score) and NodeResourcesBalancedAllocation (Score).

Fit filters nodes without room for the pod's requests (and pod count); its Score
strategies are LeastAllocated (default), MostAllocated and RequestedToCapacityRatio.
Formulas and integer arithmetic are upstream's, so rankings agree with kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, pod_requests
from scheduler.framework.types import Resource as Amounts

__all__ = ["Fit", "BalancedAllocation", "ConfigError"]

_FIT_KEY = "PreFilterNodeResourcesFit"
_DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
_MAX_UTILIZATION = 100
_MAX_CUSTOM_SCORE = 10


@dataclass(frozen=True, slots=True)
class _ResourceSpec:
    name: str
    weight: int


def _resource_specs(args: dict[str, Any], where: str) -> list[_ResourceSpec]:
    specs = []
    for i, r in enumerate(args.get("resources") or _DEFAULT_RESOURCES):
        name, weight = r.get("name"), r.get("weight", 1)
        if not name:
            raise ConfigError(f"{where}.resources[{i}].name: Required value")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ConfigError(f"{where}.resources[{i}].weight: Invalid value: {weight!r}: "
                              "must be in the range [1, 100]")
        specs.append(_ResourceSpec(name, weight))
    return specs


def _requests(state: CycleState, pod: Any, *, non_zero: bool = False) -> Amounts:
    """The pod's requests, for PreFilter/PreScore to keep in the cycle state: as the queue
    derived them once (the cycle's PodInfo), else anew (a plugin called alone)."""
    info = state.pod_info
    if info is not None and info.pod is pod:
        return info.non_zero if non_zero else info.requests
    return pod_requests(pod, non_zero=non_zero)


def _requested(node: NodeInfo, pod_req: Amounts, name: str, non_zero: bool) -> tuple[int, int]:
    """(allocatable, requested after adding the pod); (0, 0) skips the resource."""
    if name in ("cpu", "memory"):
        base = node.non_zero_requested if non_zero else node.requested
        return node.allocatable.get(name), base.get(name) + pod_req.get(name)
    if pod_req.get(name) == 0 and name != "ephemeral-storage":
        return 0, 0  # an extended resource the pod does not ask for is not scored
    return node.allocatable.get(name), node.requested.get(name) + pod_req.get(name)


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def _broken_linear(shape: list[tuple[int, int]]) -> Any:
    def f(x: int) -> int:
        for i, (u, s) in enumerate(shape):
            if x <= u:
                if i == 0:
                    return shape[0][1]
                pu, ps = shape[i - 1]
                return ps + (s - ps) * (x - pu) // (u - pu)
        return shape[-1][1]
    return f


class Fit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeResourcesFit"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        strategy = self.args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type", "LeastAllocated")
        where = "pluginConfig[NodeResourcesFit].args.scoringStrategy"
        self.resources = _resource_specs(strategy, where)
        if self.strategy == "RequestedToCapacityRatio":
            points = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
            if not points:
                raise ConfigError(f"{where}.requestedToCapacityRatio.shape: Required value")
            shape: list[tuple[int, int]] = []
            for i, p in enumerate(points):
                u, s = p.get("utilization"), p.get("score")
                if not isinstance(u, int) or not 0 <= u <= _MAX_UTILIZATION:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                      f"{u!r}: must be in the range [0, 100]")
                if not isinstance(s, int) or not 0 <= s <= _MAX_CUSTOM_SCORE:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].score: Invalid value: "
                                      f"{s!r}: must be in the range [0, 10]")
                if shape and u <= shape[-1][0]:
                    raise ConfigError(f"{where}.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                      f"{u!r}: utilization values must be sorted in increasing order")
                shape.append((u, s * (MAX_NODE_SCORE // _MAX_CUSTOM_SCORE)))
            self._rtcr = _broken_linear(shape)
        elif self.strategy not in ("LeastAllocated", "MostAllocated"):
            raise ConfigError(f"{where}.type: Unsupported value: {self.strategy!r}: supported values: "
                              "\"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"")

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        state.write(_FIT_KEY, _requests(state, pod))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        req: Amounts = state.get(_FIT_KEY) or _requests(state, pod)
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
        req: Amounts = state.get(_FIT_KEY) or _requests(state, pod)
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
        state.write(_FIT_KEY + "/score", _requests(state, pod, non_zero=True))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        if self.strategy == "RequestedToCapacityRatio" or any(s.name not in ("cpu", "memory") for s in self.resources):
            return None
        req: Amounts = state.get(_FIT_KEY + "/score") or _requests(state, pod, non_zero=True)
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
        req: Amounts = state.get(_FIT_KEY + "/score") or _requests(state, pod, non_zero=True)
        total = weights = 0
        for spec in self.resources:
            capacity, requested = _requested(node, req, spec.name, non_zero=True)
            if capacity == 0:
                continue
            if self.strategy == "LeastAllocated":
                value = _least(requested, capacity)
            elif self.strategy == "MostAllocated":
                value = _most(requested, capacity)
            else:
                utilization = _MAX_UTILIZATION if requested > capacity else requested * _MAX_UTILIZATION // capacity
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


class BalancedAllocation(PreScorePlugin, ScorePlugin):
    """Favours nodes whose resource fractions stay close: (1 - std) × 100."""

    name = "NodeResourcesBalancedAllocation"
    _KEY = "PreScoreNodeResourcesBalancedAllocation"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.resources = _resource_specs(self.args, "pluginConfig[NodeResourcesBalancedAllocation].args")

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        req = _requests(state, pod)
        if all(req.get(spec.name) == 0 for spec in self.resources):
            return Status(Code.SKIP)  # a best-effort pod changes no balance
        state.write(self._KEY, req)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        names = [s.name for s in self.resources]
        if len(names) != 2 or set(names) != {"cpu", "memory"}:
            return None
        req: Amounts = state.get(self._KEY) or _requests(state, pod)
        cpu_cap, mem_cap = table.alloc_cpu[rows], table.alloc_mem[rows]
        if cpu_cap.all() and mem_cap.all():  # the usual case: no zero-capacity masking
            cpu = np.minimum((table.req_cpu[rows] + req.milli_cpu) / cpu_cap, 1.0)
            mem = np.minimum((table.req_mem[rows] + req.memory) / mem_cap, 1.0)
            return ((1 - np.abs((cpu - mem) / 2)) * MAX_NODE_SCORE).astype(np.int64)
        fractions, valid = [], []
        for name in names:
            if name == "cpu":
                cap, used = table.alloc_cpu[rows], table.req_cpu[rows] + req.milli_cpu
            else:
                cap, used = table.alloc_mem[rows], table.req_mem[rows] + req.memory
            has = cap > 0
            fractions.append(np.minimum(used / np.where(has, cap, 1), 1.0))
            valid.append(has)
        both = valid[0] & valid[1]
        std = np.where(both, np.abs((fractions[0] - fractions[1]) / 2), 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        req: Amounts = state.get(self._KEY) or _requests(state, pod)
        fractions = []
        for spec in self.resources:
            capacity, requested = _requested(node, req, spec.name, non_zero=False)
            if capacity == 0:
                continue
            fractions.append(min(requested / capacity, 1.0))
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = (sum((f - mean) ** 2 for f in fractions) / len(fractions)) ** 0.5
        return int((1 - std) * MAX_NODE_SCORE), SUCCESS


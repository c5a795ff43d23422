"""What the node-resources score plugins share (upstream's resource_allocation.go): the
resources they weigh, the pod's requests, a node's requested amount with the pod on it, and
the scoring strategies' formulas, in upstream's integer arithmetic so that rankings agree
with kube-scheduler. `AllocationScorer` is one strategy over nodes, per node and as arrays:
NodeResourcesFit's score, and the score plugins a Policy's priorities become
(NodeResourcesLeastAllocated, NodeResourcesMostAllocated, RequestedToCapacityRatio)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, pod_requests
from scheduler.framework.types import Resource as Amounts

__all__ = ["ResourceSpec", "resource_specs", "requests_of", "requested_with", "least_allocated", "most_allocated",
           "broken_linear", "utilization_shape", "AllocationScorer", "STRATEGIES", "MAX_UTILIZATION",
           "MAX_CUSTOM_SCORE", "DEFAULT_RESOURCES"]

DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
MAX_UTILIZATION = 100
MAX_CUSTOM_SCORE = 10
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


def resource_specs(args: dict[str, Any], where: str) -> list[ResourceSpec]:
    specs = []
    for i, r in enumerate(args.get("resources") or DEFAULT_RESOURCES):
        name, weight = r.get("name"), r.get("weight", 1)
        if not name:
            raise ConfigError(f"{where}.resources[{i}].name: Required value")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ConfigError(f"{where}.resources[{i}].weight: Invalid value: {weight!r}: "
                              "must be in the range [1, 100]")
        specs.append(ResourceSpec(name, weight))
    return specs


def requests_of(state: CycleState, pod: Any, *, non_zero: bool = False) -> Amounts:
    """The pod's requests, for PreFilter/PreScore to keep in the cycle state: as the queue
    derived them once (the cycle's PodInfo), else anew (a plugin called alone)."""
    info = state.pod_info
    if info is not None and info.pod is pod:
        return info.non_zero if non_zero else info.requests
    return pod_requests(pod, non_zero=non_zero)


def requested_with(node: NodeInfo, pod_req: Amounts, name: str, non_zero: bool) -> tuple[int, int]:
    """(allocatable, requested after adding the pod); (0, 0) skips the resource."""
    if name in ("cpu", "memory"):
        base = node.non_zero_requested if non_zero else node.requested
        return node.allocatable.get(name), base.get(name) + pod_req.get(name)
    if pod_req.get(name) == 0 and name != "ephemeral-storage":
        return 0, 0  # an extended resource the pod does not ask for is not scored
    return node.allocatable.get(name), node.requested.get(name) + pod_req.get(name)


def least_allocated(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_allocated(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: list[tuple[int, int]]) -> Callable[[int], int]:
    def f(x: int) -> int:
        for i, (u, s) in enumerate(shape):
            if x <= u:
                if i == 0:
                    return shape[0][1]
                pu, ps = shape[i - 1]
                return ps + (s - ps) * (x - pu) // (u - pu)
        return shape[-1][1]
    return f




def utilization_shape(points: Any, where: str) -> list[tuple[int, int]]:
    """RequestedToCapacityRatio's shape, validated as upstream's (utilization 0..100 rising,
    score 0..10), as (utilization, score on the 0..100 scale) points."""
    if not points:
        raise ConfigError(f"{where}: Required value")
    if not isinstance(points, list):
        raise ConfigError(f"{where}: Invalid value: must be a list")
    shape: list[tuple[int, int]] = []
    for i, p in enumerate(points):
        u, s = (p.get("utilization"), p.get("score")) if isinstance(p, dict) else (None, None)
        if isinstance(u, bool) or not isinstance(u, int) or not 0 <= u <= MAX_UTILIZATION:
            raise ConfigError(f"{where}[{i}].utilization: Invalid value: {u!r}: must be in the range [0, 100]")
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_CUSTOM_SCORE:
            raise ConfigError(f"{where}[{i}].score: Invalid value: {s!r}: must be in the range [0, 10]")
        if shape and u <= shape[-1][0]:
            raise ConfigError(f"{where}[{i}].utilization: Invalid value: {u!r}: "
                              "utilization values must be sorted in increasing order")
        shape.append((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)))
    return shape


class AllocationScorer:
    """One scoring strategy (LeastAllocated, MostAllocated, RequestedToCapacityRatio) over
    `resources`, with the pod's non-zero requests: per node, and for cpu/memory as arrays
    over the snapshot's columns (the two agree exactly)."""

    def __init__(self, strategy: str, resources: list[ResourceSpec],
                 shape: list[tuple[int, int]] | None = None) -> None:
        self.strategy = strategy
        self.resources = resources
        self._rtcr = broken_linear(shape) if shape is not None else None

    def score(self, req: Amounts, node: NodeInfo) -> int:
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
                assert self._rtcr is not None
                utilization = MAX_UTILIZATION if requested > capacity else requested * MAX_UTILIZATION // capacity
                value = self._rtcr(utilization)
                if value <= 0:
                    continue
            total += value * spec.weight
            weights += spec.weight
        if weights == 0:
            return 0
        if self.strategy == "RequestedToCapacityRatio":
            return int(total / weights + 0.5)  # math.Round for non-negative values
        return total // weights

    def score_batch(self, req: Amounts, table: NodeTable, rows: np.ndarray) -> np.ndarray | None:
        """The scores of the nodes at `rows`; None when only the per-node path can say
        (RequestedToCapacityRatio, resources other than cpu and memory)."""
        if self.strategy == "RequestedToCapacityRatio" or any(s.name not in ("cpu", "memory") for s in self.resources):
            return None
        columns = []
        for spec in self.resources:
            if spec.name == "cpu":
                columns.append((spec.weight, table.alloc_cpu[rows], table.nz_cpu[rows] + req.milli_cpu))
            else:
                columns.append((spec.weight, table.alloc_mem[rows], table.nz_mem[rows] + req.memory))
        least = self.strategy == "LeastAllocated"
        if all(cap.all() for _, cap, _ in columns):
            # Every node has every resource (the usual case): no zero-capacity masking.
            total = np.zeros(len(rows), dtype=np.int64)
            for weight, cap, used in columns:
                if least:
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
            if least:
                value = np.where(used <= cap, (cap - used) * MAX_NODE_SCORE // safe, 0)
            else:
                value = np.minimum(used, cap) * MAX_NODE_SCORE // safe
            total += np.where(has, value * weight, 0)
            weights += np.where(has, weight, 0)
        return np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)

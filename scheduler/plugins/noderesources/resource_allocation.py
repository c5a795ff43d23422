"""What NodeResourcesFit's scoring and NodeResourcesBalancedAllocation share (upstream's
resource_allocation.go): the resources they weigh, the pod's requests, a node's requested
amount with the pod on it, and the scoring strategies' formulas, in upstream's integer
arithmetic so that rankings agree with kube-scheduler."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, pod_requests
from scheduler.framework.types import Resource as Amounts

__all__ = ["ResourceSpec", "resource_specs", "requests_of", "requested_with", "least_allocated", "most_allocated",
           "broken_linear", "MAX_UTILIZATION", "MAX_CUSTOM_SCORE", "DEFAULT_RESOURCES"]

DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
MAX_UTILIZATION = 100
MAX_CUSTOM_SCORE = 10


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


def broken_linear(shape: list[tuple[int, int]]) -> Any:
    def f(x: int) -> int:
        for i, (u, s) in enumerate(shape):
            if x <= u:
                if i == 0:
                    return shape[0][1]
                pu, ps = shape[i - 1]
                return ps + (s - ps) * (x - pu) // (u - pu)
        return shape[-1][1]
    return f



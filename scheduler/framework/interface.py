"""Extension points: one small base class per point; a plugin subclasses the ones it implements.

As upstream's framework/interface.go: Filter and Score judge one node at a time and are
synchronous (CPU work); Permit waits, PreBind/Bind talk to the apiserver (async).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

__all__ = [
    "Plugin", "PreEnqueuePlugin", "QueueSortPlugin", "PreFilterPlugin", "FilterPlugin",
    "PostFilterPlugin", "PreScorePlugin", "ScorePlugin", "ReservePlugin", "PermitPlugin",
    "PreBindPlugin", "BindPlugin", "PostBindPlugin", "EnqueueExtensions", "PreFilterResult",
    "PostFilterResult", "ClusterEvent", "Resource", "Action", "Handle", "NodeScore",
]

Pod = Any


class Resource(str, Enum):
    POD = "Pod"
    NODE = "Node"
    WILDCARD = "*"


class Action(str, Enum):
    ADD = "Add"
    DELETE = "Delete"
    UPDATE = "Update"  # any update; finer kinds are below
    UPDATE_NODE_ALLOCATABLE = "UpdateNodeAllocatable"
    UPDATE_NODE_LABEL = "UpdateNodeLabel"
    UPDATE_NODE_TAINT = "UpdateNodeTaint"
    UPDATE_POD_LABEL = "UpdatePodLabel"
    UPDATE_POD_SCHEDULING_GATES = "UpdatePodSchedulingGatesEliminated"
    ALL = "All"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster that may make an unschedulable pod schedulable."""

    resource: Resource
    action: Action
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """Whether this registered interest covers the event `other`."""
        if self.resource not in (Resource.WILDCARD, other.resource):
            return False
        if self.action in (Action.ALL, other.action):
            return True
        # Update covers every finer update kind.
        return self.action is Action.UPDATE and other.action.value.startswith("Update")


@dataclass(frozen=True, slots=True)
class NodeScore:
    name: str
    score: int


@dataclass(slots=True)
class PreFilterResult:
    """PreFilter may narrow the nodes to consider (None: all nodes)."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


class Handle(Protocol):
    """What plugins may use of the scheduler (upstream framework.Handle)."""

    def node_infos(self) -> Sequence[NodeInfo]: ...
    def node_info(self, name: str) -> NodeInfo | None: ...
    @property
    def client(self) -> Any: ...


class Plugin:
    name: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = args or {}
        self.handle = handle


class EnqueueExtensions:
    def events_to_register(self) -> list[ClusterEvent]:
        """Events after which a pod this plugin rejected may fit (queueing hints)."""
        return [ClusterEvent(Resource.WILDCARD, Action.ALL)]


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: Pod) -> Status:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        raise NotImplementedError

    # PreFilterExtensions: keep precomputed state right when Filter runs with nominated
    # pods added (or victims removed, for preemption).
    def add_pod(self, state: CycleState, pod: Pod, added: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: Pod, removed: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS


class FilterPlugin(Plugin):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        raise NotImplementedError

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """Optional: pass/fail for the nodes at `rows` at once (must agree with `filter`);
        None: this pod needs the per-node path."""
        return None


class PostFilterPlugin(Plugin):
    async def post_filter(self, state: CycleState, pod: Pod,
                          statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status]:
        raise NotImplementedError

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """Optional: raw scores for the nodes at `rows` at once (must agree with `score`)."""
        return None

    def normalize_batch(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray | None:
        """Optional: `normalize_score` on an array."""
        return None

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        """ScoreExtensions: map raw scores to 0..100 (default: leave them)."""
        return scores, SUCCESS


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """(status, timeout seconds): Wait parks the pod until allowed, rejected or timed out."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind, or Skip to let the next bind plugin do it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError

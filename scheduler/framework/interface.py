"""Extension points: one small base class per point; a plugin subclasses the ones it implements.

As upstream's framework/interface.go: Filter and Score judge one node at a time and are
synchronous (CPU work); Permit waits, PreBind/Bind talk to the apiserver (async).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from protos.kubeling.v1.apps_pb2 import ReplicaSet
from protos.kubeling.v1.core_pb2 import Pod, Service
from protos.kubeling.v1.policy_pb2 import PodDisruptionBudget
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.storage import StorageListers
from scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from kubeling.client import Client

__all__ = [
    "Plugin", "PreEnqueuePlugin", "QueueSortPlugin", "PreFilterPlugin", "FilterPlugin",
    "PostFilterPlugin", "PreScorePlugin", "ScorePlugin", "ReservePlugin", "PermitPlugin",
    "PreBindPlugin", "BindPlugin", "PostBindPlugin", "EnqueueExtensions", "PreFilterResult",
    "PostFilterResult", "ClusterEvent", "Resource", "Action", "Handle", "FilterRunner", "NodeScore", "Recorder",
    "WaitingPod",
]


class Resource(str, Enum):
    POD = "Pod"
    NODE = "Node"
    SERVICE = "Service"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    PERSISTENT_VOLUME = "PersistentVolume"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
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


class Recorder(Protocol):
    """Where the scheduler reports to the API: Events and the pod's PodScheduled condition."""

    def scheduled(self, pod: Pod, node: str) -> None:
        """The pod was bound to `node` (a Scheduled Event)."""

    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None,
               annotations: dict[str, str] | None = None) -> None:
        """The pod did not fit (a FailedScheduling Event, PodScheduled=False with `reason`, and
        status.nominatedNodeName when preemption nominated a node; `annotations`, the recorded
        attempt's, go with that status write)."""

    def preempted(self, pod: Pod, message: str) -> None:
        """The pod was evicted to make room for another (a Preempted Event)."""


class WaitingPod(Protocol):
    """A pod that Permit parked (upstream framework.WaitingPod): it goes on to binding once
    every plugin that returned Wait allowed it; one rejection, or a timeout, sends it back
    to the queue as unschedulable."""

    @property
    def pod(self) -> Pod: ...

    def pending_plugins(self) -> list[str]:
        """The plugins that have not allowed the pod yet."""
        ...

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go (a plugin that did not make it wait allows nothing)."""

    def reject(self, plugin: str, message: str) -> None:
        """The pod goes back to the queue, unschedulable for `plugin`."""


class FilterRunner(Protocol):
    """A profile's filters as preemption runs them (what upstream's framework.Framework
    offers a PostFilter plugin): its PreFilter plugins, to add and remove pods from a
    cycle's state, and the filters with the nominated pods."""

    @property
    def pre_filter(self) -> Sequence[PreFilterPlugin]: ...

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo,
                                       nominated: Sequence[PodInfo]) -> Status: ...


class Handle(Protocol):
    """What plugins may use of the scheduler (upstream framework.Handle): its contract with
    plugin authors. A plugin gets it as its factory's second argument (None when a test
    builds the plugin alone)."""

    def node_infos(self) -> Sequence[NodeInfo]:
        """Every node of this cycle's snapshot, with the pods on it (assumed ones included)."""
        ...

    def node_info(self, name: str) -> NodeInfo | None:
        """One node of the snapshot; None when it is not (or no longer) in the cluster."""
        ...

    def node_table(self) -> NodeTable:
        """The snapshot as columns (allocatable, requested, counts per node row), for the
        `filter_batch` / `score_batch` paths."""
        ...

    def framework_for(self, pod: Pod) -> FilterRunner:
        """The framework of the pod's profile (spec.schedulerName): to run its filters as
        preemption does."""
        ...

    def nominated_for_node(self, node: str) -> list[PodInfo]:
        """Pods nominated to `node` by preemption, not bound yet."""
        ...

    def clear_lower_nominations(self, pod: Pod, node: str) -> None:
        """Pods of lower priority than `pod` lose their nomination to `node`."""

    async def evict(self, pod: Pod, message: str) -> None:
        """Remove a preemption victim: a graceful delete through the API, and a Preempted Event."""

    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]:
        """The cluster's PodDisruptionBudgets (preemption prefers victims they allow to go)."""
        ...

    def services(self, namespace: str) -> Sequence[Service]:
        """The Services of `namespace` (the scheduler's informer): what selects a pod, for
        SelectorSpread, ServiceAffinity and PodTopologySpread's default constraints."""
        ...

    def replica_set(self, namespace: str, name: str) -> ReplicaSet | None:
        """A ReplicaSet by name (the scheduler's informer), a pod's controller; None when unknown."""
        ...

    def storage(self) -> StorageListers:
        """Claims, volumes, StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities (the
        scheduler's informers), for the volume plugins."""
        ...

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]:
        """Every pod parked by Permit, in every profile."""
        ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        """The pod with `uid` if Permit parked it."""
        ...

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject the parked pod with `uid` (True when there was one)."""
        ...

    @property
    def client(self) -> Client | None:
        """The apiserver client (None when the scheduler runs without one, in tests)."""
        ...

    @property
    def recorder(self) -> Recorder:
        """Where Events and pod status go."""
        ...


class Plugin:
    """The base of every plugin: `name` (as in the profile's configuration), the plugin's
    `args` (pluginConfig), and the scheduler's `handle`."""

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
        """Before a pod enters the active queue: not Success keeps it out (e.g. scheduling
        gates) until an update lets it in."""
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether `a` is scheduled before `b` (exactly one plugin per profile)."""
        raise NotImplementedError

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[float, ...]:
        """Optional: a key in `less`'s order (a before b exactly when key(a) < key(b)), fixed
        while the pod waits. A plugin that defines it lets the queue compare keys instead of
        calling `less` about log2(queue length) times per pod."""
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        """Once per cycle, before Filter: precompute into `state`, narrow the nodes (a
        PreFilterResult), Skip this plugin's Filter for this pod, or reject the pod."""
        raise NotImplementedError

    # PreFilterExtensions: keep precomputed state right when Filter runs with nominated
    # pods added (or victims removed, for preemption).
    def add_pod(self, state: CycleState, pod: Pod, added: PodInfo, node: NodeInfo) -> Status:
        """`added` is considered on `node`: update this plugin's state in `state`."""
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: Pod, removed: PodInfo, node: NodeInfo) -> Status:
        """`removed` is considered gone from `node`: update this plugin's state in `state`."""
        return SUCCESS


class FilterPlugin(Plugin):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        """Whether `pod` can run on `node`: Success, Unschedulable (preemption may help),
        UnschedulableAndUnresolvable (it cannot), or Error."""
        raise NotImplementedError

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """Optional: pass/fail for the nodes at `rows` at once (must agree with `filter`);
        None: this pod needs the per-node path."""
        return None


class PostFilterPlugin(Plugin):
    async def post_filter(self, state: CycleState, pod: Pod,
                          statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        """No node fitted (`statuses`: each node's reason): make one fit, e.g. by preemption,
        and name it in the result (the pod is nominated to it)."""
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        """Once per cycle, before Score, with the feasible nodes: precompute, or Skip this
        plugin's Score for this pod."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status]:
        """A raw score for `node` (0..100 after `normalize_score`; weighted by the profile)."""
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
        """The pod is assumed on `node_name`: claim what this plugin tracks; not Success
        undoes the cycle (Unreserve runs)."""
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Release what `reserve` claimed: a later point rejected the pod, or binding failed."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """(status, timeout seconds): Success lets the pod go to binding, Wait parks it until
        a plugin allows it through the handle's waiting pods, one rejects it, or the timeout."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Before Bind, in the binding cycle (e.g. provision a volume); not Success fails the binding."""
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind, or Skip to let the next bind plugin do it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """The pod is bound (informational: clean up what the cycle kept)."""
        raise NotImplementedError

"""The Scheduler (upstream scheduler.go): profiles, cache, queue, and the Handle plugins use.

The Scheduler is independent of the apiserver: informer events come in through the
`on_*` methods (eventhandlers.py), and what must reach the API (binding is a plugin;
events and pod status updates are `Recorder` calls) goes out through the handle and the
recorder, so tests and benchmarks can run it in process. The cycles themselves are in
schedule_one.py.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1.apps_pb2 import ReplicaSet
from protos.kubeling.v1.core_pb2 import Pod, Service
from protos.kubeling.v1.policy_pb2 import PodDisruptionBudget
from scheduler.cache import Cache, Snapshot
from scheduler.config import SchedulerConfig
from scheduler.eventhandlers import EventHandlers
from scheduler.extender import HTTPExtender
from scheduler.framework.interface import Action, ClusterEvent, EnqueueExtensions, Recorder, Resource, WaitingPod
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.results import RecordOptions
from scheduler.framework.runtime import Framework, PluginFactory
from scheduler.framework.status import Status
from scheduler.framework.storage import StorageListers
from scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.queue import SchedulingQueue
from scheduler.schedule_one import NO_NODES, ScheduleOne

__all__ = ["Scheduler", "NullRecorder"]

log = logging.getLogger(__name__)


class NullRecorder:
    """Reports nowhere (a scheduler run in process, without an API)."""

    def scheduled(self, pod: Pod, node: str) -> None:
        pass

    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None,
               annotations: dict[str, str] | None = None) -> None:
        pass

    def preempted(self, pod: Pod, message: str) -> None:
        pass


class Scheduler(EventHandlers, ScheduleOne):
    """One scheduler: a framework per profile, and the framework.Handle its plugins get."""

    def __init__(self, config: SchedulerConfig, registry: dict[str, PluginFactory], *,
                 client: Client | None = None, recorder: Recorder | None = None, assumed_ttl: float = 30.0,
                 rng: random.Random | None = None, metrics: SchedulerMetrics | None = None,
                 evictor: Callable[[Pod, str], Awaitable[None]] | None = None) -> None:
        self.config = config
        self.evictor = evictor  # how preemption removes victims (default: delete through the API)
        # The PodDisruptionBudgets preemption weighs (the service's informer; none without one).
        self.pdb_lister: Callable[[], Sequence[PodDisruptionBudget]] = tuple
        # What selects pods, for the spreading plugins (the service's informers; none without them).
        self.service_lister: Callable[[str], Sequence[Service]] = lambda namespace: ()
        self.replica_set_getter: Callable[[str, str], ReplicaSet | None] = lambda namespace, name: None
        self.storage_listers = StorageListers()  # the volume plugins' (the service's informers)
        self.metrics = metrics or SchedulerMetrics()
        self._client = client
        self._recorder: Recorder = recorder or NullRecorder()
        self.cache = Cache(ttl=assumed_ttl)
        self.snapshot = Snapshot()
        self.rng = rng or random.Random()
        self.registry = registry
        self.frameworks: dict[str, Framework] = {}
        self.record_options: dict[str, RecordOptions] = {}
        self.percentages: dict[str, int] = {}
        self.queue = SchedulingQueue(
            _fifo, pre_enqueue=self._pre_enqueue,
            initial_backoff=config.pod_initial_backoff_seconds, max_backoff=config.pod_max_backoff_seconds,
            max_unschedulable=config.pod_max_in_unschedulable_pods_duration)
        self._use_profiles(config, self._frameworks_of(config))
        self.next_start_node_index = 0
        self._binding_tasks: set[asyncio.Task[None]] = set()
        self.bound = 0  # pods bound by this scheduler (for tests and benchmarks)
        self.metrics.track_pending(self.queue.stats)

    # ------------------------------------------------------------ profiles

    def _frameworks_of(self, config: SchedulerConfig) -> dict[str, Framework]:
        return {p.scheduler_name: Framework(p.scheduler_name, p.points, self.registry, self,
                                            run_all_filters=p.run_all_filters) for p in config.profiles}

    def _use_profiles(self, config: SchedulerConfig, frameworks: dict[str, Framework]) -> None:
        """The frameworks of `config`'s profiles, the queue ordered and its pods woken as their
        plugins say, the extenders. A scheduler without profiles schedules nothing (it waits
        for a Policy that is read at start)."""
        self.config = config
        self.frameworks = frameworks
        self.record_options = {p.scheduler_name: p.record for p in config.profiles}
        self.percentages = {p.scheduler_name: (p.percentage_of_nodes_to_score
                                               if p.percentage_of_nodes_to_score is not None
                                               else config.percentage_of_nodes_to_score)
                            for p in config.profiles}
        events: dict[str, list[ClusterEvent]] = {NO_NODES: [ClusterEvent(Resource.NODE, Action.ADD)]}
        for fwk in frameworks.values():
            for name, plugin in fwk.plugins.items():
                if isinstance(plugin, EnqueueExtensions):
                    events[name] = plugin.events_to_register()
        first = next(iter(frameworks.values()), None)
        self.queue.reconfigure(first.less if first else _fifo, sort_key=first.sort_key if first else None,
                               plugin_events=events)
        self.extenders = [HTTPExtender(c) for c in config.extenders]

    async def reconfigure(self, config: SchedulerConfig) -> None:
        """Schedule by `config`'s profiles from the next cycle on (a Policy that changed):
        their plugins are built anew, pods waiting for a cluster change are tried again, and a
        pod parked at Permit by the old profiles is sent back to the queue. The profiles' names
        stay (a pod's spec.schedulerName keeps its meaning), unless there were none yet.
        A configuration whose plugins cannot be built raises, and nothing changes."""
        names = [p.scheduler_name for p in config.profiles]
        if self.frameworks and set(names) != set(self.frameworks):
            raise ValueError(f"the profiles are {sorted(self.frameworks)}; a new configuration cannot "
                             f"change them (it names {sorted(names)})")
        frameworks = self._frameworks_of(config)  # every plugin built before anything changes
        for waiting in list(self.iterate_over_waiting_pods()):
            waiting.reject("", "the scheduler's profile was replaced")
        old = self.extenders
        self._use_profiles(config, frameworks)
        self.queue.move_all_to_active_or_backoff()
        for ext in old:
            await ext.close()

    # ------------------------------------------------------------ framework.Handle

    @property
    def client(self) -> Client | None:
        return self._client

    @property
    def recorder(self) -> Recorder:
        return self._recorder

    def node_infos(self) -> Sequence[NodeInfo]:
        return self.snapshot.node_infos()

    def node_info(self, name: str) -> NodeInfo | None:
        return self.snapshot.get(name)

    def node_table(self) -> NodeTable:
        return self.snapshot.table

    def framework_for(self, pod: Pod) -> Framework:
        return self.frameworks[pod.spec.schedulerName]

    def nominated_for_node(self, node: str) -> list[PodInfo]:
        return self.queue.nominated_for_node(node)

    def clear_lower_nominations(self, pod: Pod, node: str) -> None:
        """Pods of lower priority nominated to `node` lose the nomination (upstream too)."""
        for pi in self.queue.nominated_for_node(node):
            if pi.pod.spec.priority < pod.spec.priority:
                self.queue.delete_nominated(pi.pod)

    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]:
        return self.pdb_lister()

    def services(self, namespace: str) -> Sequence[Service]:
        return self.service_lister(namespace)

    def replica_set(self, namespace: str, name: str) -> ReplicaSet | None:
        return self.replica_set_getter(namespace, name)

    def storage(self) -> StorageListers:
        return self.storage_listers

    async def evict(self, pod: Pod, message: str) -> None:
        """Remove a preemption victim: graceful delete through the API (its kubelet stops it)."""
        log.info("preempting pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, message)
        if self.evictor is not None:
            await self.evictor(pod, message)
            return
        if self._client is None:
            raise RuntimeError("no apiserver client to evict preemption victims with")
        try:
            await self._client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except errors.NotFound:
            return
        self._recorder.preempted(pod, message)

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]:
        for fwk in self.frameworks.values():
            yield from list(fwk.waiting.values())

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        for fwk in self.frameworks.values():
            waiting = fwk.waiting_pod(uid)
            if waiting is not None:
                return waiting
        return None

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self.get_waiting_pod(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True

    def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.frameworks.get(pod.spec.schedulerName)
        return fwk.run_pre_enqueue(pod) if fwk is not None else Status()

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        while await self.schedule_one():
            # pop() does not suspend while activeQ has pods: yield, so that binding cycles,
            # informer events and timers run between scheduling cycles.
            await asyncio.sleep(0)

    async def wait_for_bindings(self) -> None:
        while self._binding_tasks:
            await asyncio.gather(*list(self._binding_tasks), return_exceptions=True)

    async def housekeeping(self, interval: float = 1.0) -> None:
        """Periodic work: expire assumed pods, flush backoffQ and long-unschedulable pods."""
        last_leftover = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            self.cache.cleanup_expired()
            self.queue.flush_backoff_completed()
            if time.monotonic() - last_leftover >= 30:
                self.queue.flush_unschedulable_leftover()
                last_leftover = time.monotonic()

    async def close(self) -> None:
        for ext in self.extenders:
            await ext.close()


def _fifo(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """The queue's order while the scheduler has no profile (it holds no pod then)."""
    return a.timestamp < b.timestamp

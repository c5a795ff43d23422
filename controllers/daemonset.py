"""The DaemonSet controller, as upstream's pkg/controller/daemon: one pod of the set on
every node that should run it, placed by the default scheduler through a node-affinity
term naming the node (upstream since 1.12), and none elsewhere.

A node should run the pod when the template's nodeSelector and required node affinity
match it and its NoSchedule/NoExecute taints are tolerated by the template's tolerations
plus those upstream adds to every daemon pod (not-ready and unreachable NoExecute; disk,
memory and pid pressure and unschedulable NoSchedule; network-unavailable for host
network pods): a cordoned or pressured node keeps its log shipper. A pod may go on
running where a NoSchedule taint appeared later; an untolerated NoExecute taint removes it.

Updates: the template's revisions are ControllerRevisions (controllers/history.py), and
each pod carries its revision's hash. RollingUpdate replaces old pods keeping at most
maxUnavailable nodes without an available pod (maxSurge 0: delete, then create), or
starting up to maxSurge new pods beside old available ones and deleting the old one
once the new is available; OnDelete leaves old pods until someone deletes them. A
failed daemon pod is deleted and replaced after a per-node backoff."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field

from controllers.controllerref import claim, controller_of, controller_ref, is_available, is_ready
from controllers.expectations import Expectations
from controllers.history import CONTROLLER_REVISION_HASH, History, revision_hash, template_patch
from controllers.replicaset import pod_from_template, slow_start
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.intstr import scaled_value
from kubeling.nodeaffinity import pod_matches_node
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.taints import find_untolerated
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2

__all__ = ["DaemonSetController", "daemon_tolerations", "should_run", "target_node", "with_node_affinity"]

log = logging.getLogger(__name__)

API_VERSION, KIND = "apps/v1", "DaemonSet"
TEMPLATE_GENERATION = "pod-template-generation"  # upstream's deprecated label, still set
_BACKOFF_BASE, _BACKOFF_MAX = 1.0, 900.0  # upstream's failedPodsBackoff: 1 s doubling to 15 min

# (key, effect) of the tolerations every daemon pod gets (upstream's AddOrUpdateDaemonPodTolerations)
_ALWAYS = (("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
           ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
           ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"))
_HOST_NETWORK = (("node.kubernetes.io/network-unavailable", "NoSchedule"),)


def daemon_tolerations(spec: core_pb2.PodSpec) -> None:
    """Add upstream's daemon pod tolerations that the spec lacks."""
    wanted = _ALWAYS + (_HOST_NETWORK if spec.hostNetwork else ())
    for key, effect in wanted:
        if not any(t.key == key and t.effect == effect and t.operator == "Exists" for t in spec.tolerations):
            spec.tolerations.add(key=key, operator="Exists", effect=effect)


def with_node_affinity(spec: core_pb2.PodSpec, node_name: str) -> None:
    """Require the node by name (upstream's ReplaceDaemonSetPodNodeNameNodeAffinity): the
    required terms become one matchFields metadata.name In [node]; preferred ones stay."""
    required = spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    del required.nodeSelectorTerms[:]
    required.nodeSelectorTerms.add().matchFields.add(key="metadata.name", operator="In", values=[node_name])


def target_node(pod: core_pb2.Pod) -> str:
    """The node a daemon pod is for: its nodeName, else the node its affinity names."""
    if pod.spec.nodeName:
        return pod.spec.nodeName
    terms = pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
    for term in terms:
        for f in term.matchFields:
            if f.key == "metadata.name" and f.operator == "In" and len(f.values) == 1:
                return f.values[0]
    return ""


def should_run(template: core_pb2.PodTemplateSpec, node: core_pb2.Node) -> tuple[bool, bool]:
    """(should run, should continue running) a daemon pod of this template on the node
    (upstream's NodeShouldRunDaemonPod)."""
    spec = core_pb2.PodSpec()
    spec.CopyFrom(template.spec)
    daemon_tolerations(spec)
    if not pod_matches_node(spec, node):
        return False, False
    taints = node.spec.taints
    if find_untolerated(taints, spec.tolerations, ("NoExecute",)) is not None:
        return False, False
    if find_untolerated(taints, spec.tolerations, ("NoSchedule",)) is not None:
        return False, True
    return True, True


def _oldest_first(pods: list[core_pb2.Pod]) -> list[core_pb2.Pod]:
    return sorted(pods, key=lambda p: (p.metadata.creationTimestamp.seconds, p.metadata.creationTimestamp.nanos,
                                       p.metadata.name))


@dataclass
class _Plan:
    """What one sync creates and deletes."""

    create_on: list[str] = field(default_factory=list)
    delete: list[core_pb2.Pod] = field(default_factory=list)


class DaemonSetController:
    def __init__(self, client: Client, daemonsets: Informer[apps_pb2.DaemonSet], pods: Informer[core_pb2.Pod],
                 nodes: Informer[core_pb2.Node], revisions: Informer[apps_pb2.ControllerRevision],
                 recorder: EventRecorder, workers: int = 2, *, backoff_base: float = _BACKOFF_BASE) -> None:
        self.client = client
        self.daemonsets = daemonsets
        self.pods = pods
        self.nodes = nodes
        self.history = History(client, revisions)
        self.recorder = recorder
        self.backoff_base = backoff_base
        self.expectations = Expectations()
        self._failures: dict[tuple[str, str], tuple[int, float]] = {}  # (ds, node) -> (count, last failure)
        self.queue = WorkQueue("daemonset")
        self.workers = Workers(self.queue, self.sync, workers)
        daemonsets.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                               on_delete=self._enqueue)
        pods.add_handler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        nodes.add_handler(on_add=lambda n: self._enqueue_all(), on_update=self._node_updated,
                          on_delete=lambda n: self._enqueue_all())

    # ---------------------------------------------------------------- events

    def _enqueue(self, ds: apps_pb2.DaemonSet) -> None:
        self.queue.add(object_key(ds))

    def _enqueue_all(self) -> None:
        for ds in self.daemonsets.store.list():
            self._enqueue(ds)

    def _node_updated(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        # What decides where daemon pods run (upstream's shouldIgnoreNodeUpdate compares the rest away)
        if old.metadata.labels != new.metadata.labels or list(old.spec.taints) != list(new.spec.taints) \
                or old.spec.unschedulable != new.spec.unschedulable:
            self._enqueue_all()

    def _owner_key(self, pod: core_pb2.Pod) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.kind != KIND:
            return None
        ds = self.daemonsets.store.get(f"{pod.metadata.namespace}/{ref.name}")
        return object_key(ds) if ds is not None and ds.metadata.uid == ref.uid else None

    def _pod_added(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif controller_of(pod) is None:
            self._enqueue_all()  # an orphan some DaemonSet may adopt

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        key = self._owner_key(new)
        if key is None:
            return
        if new.metadata.HasField("deletionTimestamp") and not old.metadata.HasField("deletionTimestamp"):
            self.expectations.deletion_observed(key, object_key(new))
        self.queue.add(key)
        if not is_ready(old) and is_ready(new):
            ds = self.daemonsets.store.get(key)
            if ds is not None and ds.spec.minReadySeconds > 0:
                self.queue.add_after(key, ds.spec.minReadySeconds + 1)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.queue.add(key)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        ds = self.daemonsets.store.get(key)
        if ds is None:
            self.expectations.forget(key)
            self._failures = {k: v for k, v in self._failures.items() if k[0] != key}
            return
        try:
            selector = from_label_selector_proto(ds.spec.selector)
        except SelectorError:
            return
        if selector is None or selector.empty():
            return  # validation forbids it; never select every pod
        candidates = self.pods.store.by_index(INDEX_NAMESPACE, ds.metadata.namespace)
        deleting = ds.metadata.HasField("deletionTimestamp")
        pods = await claim(self.client.pods, ds, API_VERSION, KIND, selector, candidates, can_adopt=not deleting)
        # A pod that finished and is being deleted is gone already (upstream's includeDeletedTerminal=false)
        pods = [p for p in pods if not (p.metadata.HasField("deletionTimestamp")
                                        and p.status.phase in ("Succeeded", "Failed"))]
        by_node: dict[str, list[core_pb2.Pod]] = defaultdict(list)
        for pod in pods:
            by_node[target_node(pod)].append(pod)
        nodes = self.nodes.store.list()
        # where the pods should run, judged once per sync (the template's spec, copied per node, is the cost)
        placement = {n.metadata.name: should_run(ds.spec.template, n) for n in nodes}
        if deleting:
            await self._update_status(ds, nodes, by_node, "", placement)
            return
        collisions = ds.status.collisionCount if ds.status.HasField("collisionCount") else 0
        current, collisions = await self.history.current(ds, API_VERSION, KIND, template_patch(ds.spec.template),
                                                         collisions)
        digest = revision_hash(current)
        if self.expectations.satisfied(key):
            plan = self._manage(ds, key, nodes, by_node, placement)
            if ds.spec.updateStrategy.type == "RollingUpdate":
                self._roll(ds, nodes, by_node, digest, plan, placement)
            await self._apply(ds, key, plan, digest)
            live = {p.metadata.labels.get(CONTROLLER_REVISION_HASH, "") for p in pods} | {digest}
            await self.history.truncate(ds, live, ds.spec.revisionHistoryLimit)
        await self._update_status(ds, nodes, by_node, digest, placement, collisions)

    def _manage(self, ds: apps_pb2.DaemonSet, key: str, nodes: list[core_pb2.Node],
                by_node: dict[str, list[core_pb2.Pod]], placement: dict[str, tuple[bool, bool]]) -> _Plan:
        """Pods where they should be and nowhere else (upstream's podsShouldBeOnNode)."""
        plan = _Plan()
        now = time.time()
        surge = ds.spec.updateStrategy.type == "RollingUpdate" and self._fenceposts(ds, 1)[0] > 0
        for node in nodes:
            name = node.metadata.name
            run, keep = placement[name]
            pods = by_node.get(name, [])
            if run and not pods:
                count, last = self._failures.get((key, name), (0, 0.0))
                wait = last + min(_BACKOFF_MAX, self.backoff_base * 2 ** (count - 1)) - now if count else 0
                if wait > 0:
                    self.queue.add_after(key, wait)
                else:
                    plan.create_on.append(name)
            elif keep:
                running = []
                for pod in pods:
                    if pod.metadata.HasField("deletionTimestamp"):
                        continue
                    if pod.status.phase == "Failed":
                        count, _ = self._failures.get((key, name), (0, 0.0))
                        self._failures[(key, name)] = (count + 1, now)
                        self.recorder.object_event(ds, API_VERSION, KIND, WARNING, "FailedDaemonPod",
                                                   f"Found failed daemon pod {pod.metadata.namespace}/"
                                                   f"{pod.metadata.name} on node {name}, will try to kill it")
                        plan.delete.append(pod)
                        continue
                    running.append(pod)
                    if is_ready(pod):
                        self._failures.pop((key, name), None)  # it runs again: the backoff starts over
                if len(running) > 1 and not surge:
                    plan.delete.extend(_oldest_first(running)[1:])  # one daemon pod per node: the oldest
                elif len(running) > 2:
                    plan.delete.extend(_oldest_first(running)[2:])  # with surge, an old and a new one at most
            else:
                plan.delete.extend(p for p in pods if not p.metadata.HasField("deletionTimestamp"))
        names = {n.metadata.name for n in nodes}
        for node_name, pods in by_node.items():  # pods for nodes that are gone
            if node_name not in names:
                plan.delete.extend(p for p in pods if not p.metadata.HasField("deletionTimestamp"))
        return plan

    def _fenceposts(self, ds: apps_pb2.DaemonSet, desired: int) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) as counts of the desired pods (upstream: both round up)."""
        ru = ds.spec.updateStrategy.rollingUpdate
        surge = scaled_value(ru.maxSurge, desired, round_up=True) if ru.HasField("maxSurge") else 0
        unavailable = scaled_value(ru.maxUnavailable, desired, round_up=True) if ru.HasField("maxUnavailable") \
            else 1
        if surge == 0 and unavailable == 0:
            unavailable = 1  # upstream: never stall a rollout
        return surge, unavailable

    def _roll(self, ds: apps_pb2.DaemonSet, nodes: list[core_pb2.Node], by_node: dict[str, list[core_pb2.Pod]],
              digest: str, plan: _Plan, placement: dict[str, tuple[bool, bool]]) -> None:
        """Replace old pods within the budget (upstream's rollingUpdate)."""
        now = time.time()
        min_ready = ds.spec.minReadySeconds
        eligible = [n.metadata.name for n in nodes if placement[n.metadata.name][1]]
        surge, max_unavailable = self._fenceposts(ds, len(eligible))
        deleting = {p.metadata.uid for p in plan.delete}

        def live(name: str) -> list[core_pb2.Pod]:
            return [p for p in by_node.get(name, []) if not p.metadata.HasField("deletionTimestamp")
                    and p.metadata.uid not in deleting]

        def is_new(p: core_pb2.Pod) -> bool:
            return p.metadata.labels.get(CONTROLLER_REVISION_HASH) == digest

        if surge == 0:
            unavailable = 0
            old_available, old_unavailable = [], []
            for name in eligible:
                pods = live(name)
                new = [p for p in pods if is_new(p)]
                old = [p for p in pods if not is_new(p)]
                if not new and not old:
                    unavailable += 1
                    continue
                if new:
                    if not any(is_available(p, min_ready, now) for p in new):
                        unavailable += 1
                    continue
                if any(is_available(p, min_ready, now) for p in old):
                    old_available.extend(old)
                else:
                    unavailable += 1
                    old_unavailable.extend(old)
            plan.delete.extend(old_unavailable)  # they count as unavailable already
            budget = max(0, max_unavailable - unavailable)
            plan.delete.extend(_oldest_first(old_available)[:budget])
            return
        # maxSurge: start a new pod beside an old available one; delete the old once the new is available
        surging = 0
        candidates = []
        for name in eligible:
            pods = live(name)
            new = [p for p in pods if is_new(p)]
            old = [p for p in pods if not is_new(p)]
            if not old:
                continue
            if new:
                if any(is_available(p, min_ready, now) for p in new):
                    plan.delete.extend(old)
                else:
                    surging += 1
                continue
            if not any(is_available(p, min_ready, now) for p in old):
                plan.delete.extend(old)  # nothing to keep available: replace at once
                continue
            candidates.append(name)
        for name in candidates[:max(0, surge - surging)]:
            plan.create_on.append(name)

    async def _apply(self, ds: apps_pb2.DaemonSet, key: str, plan: _Plan, digest: str) -> None:
        unique = {p.metadata.uid: p for p in plan.delete}
        victims = list(unique.values())
        if plan.create_on:
            self.expectations.expect_creations(key, len(plan.create_on))
        if victims:
            self.expectations.expect_deletions(key, [object_key(p) for p in victims])
        errors_seen: list[BaseException] = []
        if plan.create_on:
            ref = controller_ref(ds, API_VERSION, KIND)
            queue = list(plan.create_on)

            async def create() -> None:
                node = queue.pop(0)
                pod = pod_from_template(ds.spec.template, ref, ds.metadata.namespace, f"{ds.metadata.name}-")
                pod.metadata.labels[CONTROLLER_REVISION_HASH] = digest
                pod.metadata.labels[TEMPLATE_GENERATION] = str(ds.metadata.generation)
                daemon_tolerations(pod.spec)
                with_node_affinity(pod.spec, node)
                try:
                    made = await self.client.pods.create(pod)
                except errors.ApiError as err:
                    self.recorder.object_event(ds, API_VERSION, KIND, WARNING, "FailedCreate",
                                               f"Error creating: {err.message}")
                    raise
                self.recorder.object_event(ds, API_VERSION, KIND, NORMAL, "SuccessfulCreate",
                                           f"Created pod: {made.metadata.name}")
            created, error = await slow_start(len(plan.create_on), create)
            for _ in range(len(plan.create_on) - created):
                self.expectations.creation_observed(key)
            if error is not None:
                errors_seen.append(error)
        results = await asyncio.gather(*(self._delete(ds, key, p) for p in victims), return_exceptions=True)
        errors_seen.extend(r for r in results if isinstance(r, BaseException))
        if errors_seen:
            raise errors_seen[0]

    async def _delete(self, ds: apps_pb2.DaemonSet, key: str, pod: core_pb2.Pod) -> None:
        try:
            await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except errors.NotFound:
            self.expectations.deletion_observed(key, object_key(pod))
            return
        except errors.ApiError:
            self.expectations.deletion_observed(key, object_key(pod))
            raise
        self.recorder.object_event(ds, API_VERSION, KIND, NORMAL, "SuccessfulDelete",
                                   f"Deleted pod: {pod.metadata.name}")

    async def _update_status(self, ds: apps_pb2.DaemonSet, nodes: list[core_pb2.Node],
                             by_node: dict[str, list[core_pb2.Pod]], digest: str,
                             placement: dict[str, tuple[bool, bool]], collisions: int = 0) -> None:
        now = time.time()
        status = apps_pb2.DaemonSetStatus()
        status.CopyFrom(ds.status)
        counts = dict.fromkeys(("desired", "current", "misscheduled", "ready", "updated", "available"), 0)
        for node in nodes:
            run, _ = placement[node.metadata.name]
            pods = [p for p in by_node.get(node.metadata.name, []) if not p.metadata.HasField("deletionTimestamp")]
            if run:
                counts["desired"] += 1
                if pods:
                    counts["current"] += 1
                    pod = _oldest_first(pods)[0]
                    counts["ready"] += is_ready(pod)
                    counts["available"] += is_available(pod, ds.spec.minReadySeconds, now)
                    if digest and any(p.metadata.labels.get(CONTROLLER_REVISION_HASH) == digest for p in pods):
                        counts["updated"] += 1
            elif pods:
                counts["misscheduled"] += 1
        status.desiredNumberScheduled = counts["desired"]
        status.currentNumberScheduled = counts["current"]
        status.numberMisscheduled = counts["misscheduled"]
        status.numberReady = counts["ready"]
        status.numberAvailable = counts["available"]
        status.numberUnavailable = counts["desired"] - counts["available"]
        if digest:
            status.updatedNumberScheduled = counts["updated"]
            status.observedGeneration = ds.metadata.generation
        if collisions:
            status.collisionCount = collisions
        if status == ds.status:
            return
        updated = apps_pb2.DaemonSet()
        updated.CopyFrom(ds)
        updated.status.CopyFrom(status)
        try:
            await self.client.daemonsets.update_status(updated)
        except errors.NotFound:
            pass
        except errors.Conflict:
            self.queue.add(object_key(ds))

"""The ReplicaSet controller, as upstream's pkg/controller/replicaset: keep `replicas`
active pods that match the selector, adopting orphans and releasing pods that stop
matching; create in slow-start batches; delete the least valuable pods first when
scaling down; report replicas, ready and available counts in status. Expectations keep
a slow watch from making it create or delete twice.

The same controller keeps ReplicationControllers (upstream's replication controller is
the ReplicaSet controller over a conversion): their selector is a plain label map."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from controllers.controllerref import (
    claim,
    controller_of,
    controller_ref,
    is_active,
    is_available,
    is_ready,
    ready_since,
)
from controllers.expectations import Expectations
from kubeling import errors, scheme
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.scheme import ResourceType
from kubeling.selectors import LabelSelector, SelectorError, from_label_selector_proto
from kubeling.timestamps import now as _now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2

__all__ = ["ReplicaSetController", "pod_from_template", "deletion_order", "slow_start", "BURST_REPLICAS",
           "REPLICASET", "REPLICATION_CONTROLLER", "Kind"]

log = logging.getLogger(__name__)

BURST_REPLICAS = 500  # upstream's: at most this many creations or deletions per sync
_SLOW_START = 1  # the first creation batch; each successful batch doubles it
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


Replicated = apps_pb2.ReplicaSet | core_pb2.ReplicationController


@dataclass(frozen=True)
class Kind:
    """What the controller keeps: ReplicaSets or ReplicationControllers."""

    resource: ResourceType[Any]
    api_version: str
    name: str
    status: type[Any]
    selector: Callable[[Any], LabelSelector | None]


REPLICASET = Kind(scheme.REPLICASETS, "apps/v1", "ReplicaSet", apps_pb2.ReplicaSetStatus,
                  lambda rs: from_label_selector_proto(rs.spec.selector))
REPLICATION_CONTROLLER = Kind(scheme.REPLICATIONCONTROLLERS, "v1", "ReplicationController",
                              core_pb2.ReplicationControllerStatus,
                              lambda rc: from_label_selector_proto(
                                  meta_pb2.LabelSelector(matchLabels=rc.spec.selector)))


def pod_from_template(template: core_pb2.PodTemplateSpec, owner_ref: meta_pb2.OwnerReference,
                      namespace: str, generate_name: str) -> core_pb2.Pod:
    """upstream's GetPodFromTemplate."""
    pod = core_pb2.Pod(spec=template.spec)
    meta = pod.metadata
    meta.namespace = namespace
    meta.generateName = generate_name
    meta.labels.update(template.metadata.labels)
    meta.annotations.update(template.metadata.annotations)
    meta.finalizers.extend(template.metadata.finalizers)
    meta.ownerReferences.append(owner_ref)
    return pod


def deletion_order(pods: list[core_pb2.Pod]) -> list[core_pb2.Pod]:
    """Pods in the order a scale-down deletes them (upstream's ActivePodsWithRanks): not
    yet on a node, pending before running, not ready before ready, more pods of the set on
    the same node, ready for less time, more restarts, newer."""
    per_node = Counter(p.spec.nodeName for p in pods if p.spec.nodeName)

    def key(p: core_pb2.Pod) -> tuple[Any, ...]:
        restarts = sum(c.restartCount for c in p.status.containerStatuses)
        created = p.metadata.creationTimestamp.seconds
        return (bool(p.spec.nodeName), _PHASE_RANK.get(p.status.phase, 2), is_ready(p),
                -per_node.get(p.spec.nodeName, 0), -ready_since(p) if is_ready(p) else 0, -restarts, -created)
    return sorted(pods, key=key)


class ReplicaSetController:
    def __init__(self, client: Client, replicasets: Informer[Any], pods: Informer[core_pb2.Pod],
                 recorder: EventRecorder, workers: int = 2, kind: Kind = REPLICASET) -> None:
        self.client = client
        self.replicasets = replicasets
        self.pods = pods
        self.recorder = recorder
        self.kind = kind
        self.resource = client.resource(kind.resource)
        self.expectations = Expectations()
        self.queue = WorkQueue(kind.name.lower())
        self.workers = Workers(self.queue, self.sync, workers)
        replicasets.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                                on_delete=self._enqueue)
        pods.add_handler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)

    # ---------------------------------------------------------------- events

    def _enqueue(self, rs: Replicated) -> None:
        self.queue.add(object_key(rs))

    def _owner_key(self, pod: core_pb2.Pod) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.kind != self.kind.name:
            return None
        rs = self.replicasets.store.get(f"{pod.metadata.namespace}/{ref.name}")
        if rs is None or rs.metadata.uid != ref.uid:
            return None
        return object_key(rs)

    def _orphan_owners(self, pod: core_pb2.Pod) -> list[str]:
        """The ReplicaSets that could adopt this orphan."""
        out = []
        for rs in self.replicasets.store.by_index(INDEX_NAMESPACE, pod.metadata.namespace):
            try:
                selector = self.kind.selector(rs)
            except SelectorError:
                continue
            if selector is not None and not selector.empty() and selector.matches(pod.metadata.labels):
                out.append(object_key(rs))
        return out

    def _pod_added(self, pod: core_pb2.Pod) -> None:
        if pod.metadata.HasField("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif controller_of(pod) is None:
            for k in self._orphan_owners(pod):
                self.queue.add(k)

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        if new.metadata.HasField("deletionTimestamp"):
            self._pod_deleted(new)  # upstream: a pod being deleted counts as deleted at once
            return
        keys = {self._owner_key(new), self._owner_key(old)} - {None}
        if controller_of(new) is None:
            keys.update(self._orphan_owners(new))
        for key in keys:
            assert key is not None
            self.queue.add(key)
        # Available after minReadySeconds: look again then.
        if not is_ready(old) and is_ready(new):
            key = self._owner_key(new)
            rs = self.replicasets.store.get(key) if key else None
            if rs is not None and rs.spec.minReadySeconds > 0:
                self.queue.add_after(object_key(rs), rs.spec.minReadySeconds + 1)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.queue.add(key)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        rs = self.replicasets.store.get(key)
        if rs is None:
            self.expectations.forget(key)
            return
        needs_sync = self.expectations.satisfied(key)
        selector = self.kind.selector(rs)
        if selector is None or selector.empty():
            return  # validation forbids it; never select every pod
        candidates = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, rs.metadata.namespace) if is_active(p)]
        owned = await claim(self.client.pods, rs, self.kind.api_version, self.kind.name, selector, candidates,
                            can_adopt=True)
        manage_error: Exception | None = None
        if needs_sync and not rs.metadata.HasField("deletionTimestamp"):
            try:
                await self._manage(rs, key, owned)
            except errors.ApiError as err:
                manage_error = err
        await self._update_status(rs, owned, manage_error)
        if manage_error is not None:
            raise manage_error

    async def _manage(self, rs: Replicated, key: str, pods: list[core_pb2.Pod]) -> None:
        diff = len(pods) - rs.spec.replicas
        name = f"{rs.metadata.namespace}/{rs.metadata.name}"
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            self.expectations.expect_creations(key, count)
            ref = controller_ref(rs, self.kind.api_version, self.kind.name)
            created, error = await slow_start(count, lambda: self._create_pod(rs, ref))
            if created < count:
                # What was not created will not be observed: stop waiting for it.
                for _ in range(count - created):
                    self.expectations.creation_observed(key)
                log.info("replicaset %s: created %d of %d pods", name, created, count)
            if error is not None:
                raise error
        elif diff > 0:
            victims = deletion_order(pods)[:min(diff, BURST_REPLICAS)]
            self.expectations.expect_deletions(key, [object_key(p) for p in victims])
            results = await asyncio.gather(*(self._delete_pod(rs, key, p) for p in victims),
                                           return_exceptions=True)
            failed = [r for r in results if isinstance(r, Exception)]
            if failed:
                raise failed[0]

    async def _create_pod(self, rs: Replicated, ref: meta_pb2.OwnerReference) -> None:
        pod = pod_from_template(rs.spec.template, ref, rs.metadata.namespace, f"{rs.metadata.name}-")
        try:
            made = await self.client.pods.create(pod)
        except errors.ApiError as err:
            self.recorder.object_event(rs, self.kind.api_version, self.kind.name, WARNING, "FailedCreate",
                                       f"Error creating: {err.message}")
            raise
        self.recorder.object_event(rs, self.kind.api_version, self.kind.name, NORMAL, "SuccessfulCreate",
                                   f"Created pod: {made.metadata.name}")

    async def _delete_pod(self, rs: Replicated, key: str, pod: core_pb2.Pod) -> None:
        try:
            await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except errors.NotFound:
            self.expectations.deletion_observed(key, object_key(pod))
            return
        except errors.ApiError:
            self.expectations.deletion_observed(key, object_key(pod))
            raise
        self.recorder.object_event(rs, self.kind.api_version, self.kind.name, NORMAL, "SuccessfulDelete",
                                   f"Deleted pod: {pod.metadata.name}")

    async def _update_status(self, rs: Replicated, pods: list[core_pb2.Pod],
                             manage_error: Exception | None) -> None:
        now = time.time()
        template_labels = rs.spec.template.metadata.labels
        status = self.kind.status(
            replicas=len(pods),
            fullyLabeledReplicas=sum(1 for p in pods if all(p.metadata.labels.get(k) == v
                                                            for k, v in template_labels.items())),
            readyReplicas=sum(1 for p in pods if is_ready(p)),
            availableReplicas=sum(1 for p in pods if is_available(p, rs.spec.minReadySeconds, now)),
            observedGeneration=rs.metadata.generation)
        failure = next((c for c in rs.status.conditions if c.type == "ReplicaFailure"), None)
        if manage_error is not None and len(pods) < rs.spec.replicas:
            cond = status.conditions.add(type="ReplicaFailure", status="True", reason="FailedCreate",
                                         message=str(getattr(manage_error, "message", manage_error)))
            cond.lastTransitionTime.CopyFrom(failure.lastTransitionTime if failure is not None else _now())
        if status == rs.status:
            return
        updated = type(rs)()
        updated.CopyFrom(rs)
        updated.status.CopyFrom(status)
        try:
            await self.resource.update_status(updated)
        except errors.NotFound:
            pass



async def slow_start(count: int, create: Callable[[], Awaitable[None]]) -> tuple[int, BaseException | None]:
    """Create in batches of 1, 2, 4, ... (upstream's slowStartBatch): a failing batch stops
    the rest, so that a quota or a broken template costs one error, not hundreds.
    Returns how many were created and the first error."""
    done, batch = 0, _SLOW_START
    while done < count:
        size = min(batch, count - done)
        results = await asyncio.gather(*(create() for _ in range(size)), return_exceptions=True)
        done += sum(1 for r in results if not isinstance(r, BaseException))
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            return done, failed[0]
        batch *= 2
    return done, None

"""The StatefulSet controller, as upstream's pkg/controller/statefulset: pods with stable
identities `<set>-<ordinal>` for ordinals [ordinals.start, start + replicas), each with
its hostname and the set's serviceName as subdomain (so the headless Service names it
`web-0.web.<ns>.svc.cluster.local`) and its own claims `<template>-<set>-<ordinal>` made
from volumeClaimTemplates, kept across restarts, rescheduling and scale-down as the
persistentVolumeClaimRetentionPolicy says.

OrderedReady creates in ordinal order, each pod only once the ones before it are Running
and Ready (and available for minReadySeconds), and removes in reverse order one at a
time; Parallel does either all at once. A failed pod is deleted and made again at the
same ordinal. RollingUpdate replaces pods from the highest ordinal down to the partition,
one at a time (maxUnavailable at a time when it is set), each once the ones above it are
healthy again; OnDelete makes the update's pods only for pods someone deleted. Revisions
are ControllerRevisions (controllers/history.py): status.currentRevision is what pods
below the partition keep, updateRevision the template's."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from controllers.controllerref import (
    claim,
    controller_of,
    controller_ref,
    is_available,
    is_ready,
    update_with_retry,
)
from controllers.history import CONTROLLER_REVISION_HASH, History, revision_hash, template_of, template_patch
from controllers.replicaset import pod_from_template
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.intstr import scaled_value
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2

__all__ = ["StatefulSetController", "POD_NAME", "POD_INDEX", "ordinal_of", "claim_name"]

log = logging.getLogger(__name__)

API_VERSION, KIND = "apps/v1", "StatefulSet"
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
_ORDINAL = re.compile(r"^(.*)-(\d+)$")


def ordinal_of(pod: core_pb2.Pod, set_name: str) -> int | None:
    """The ordinal of a pod named `<set>-<n>`, else None (not one of the set's identities)."""
    m = _ORDINAL.match(pod.metadata.name)
    if m is None or m.group(1) != set_name:
        return None
    return int(m.group(2))


def claim_name(template: core_pb2.PersistentVolumeClaim, set_name: str, ordinal: int) -> str:
    return f"{template.metadata.name}-{set_name}-{ordinal}"


def _terminating(pod: core_pb2.Pod) -> bool:
    return pod.metadata.HasField("deletionTimestamp")


def _finished(pod: core_pb2.Pod) -> bool:
    return pod.status.phase in ("Failed", "Succeeded")


@dataclass
class _Counts:
    replicas: int = 0
    ready: int = 0
    available: int = 0
    current: int = 0
    updated: int = 0


@dataclass
class _State:
    """One sync's view of a set: its pods by ordinal (wanted and condemned) and revisions."""

    sts: apps_pb2.StatefulSet
    current: apps_pb2.ControllerRevision
    update: apps_pb2.ControllerRevision
    replicas: dict[int, core_pb2.Pod] = field(default_factory=dict)  # ordinal -> pod, wanted ordinals
    condemned: list[core_pb2.Pod] = field(default_factory=list)  # beyond the range, highest first

    @property
    def start(self) -> int:
        return self.sts.spec.ordinals.start

    @property
    def wanted(self) -> range:
        return range(self.start, self.start + self.sts.spec.replicas)


class StatefulSetController:
    def __init__(self, client: Client, statefulsets: Informer[apps_pb2.StatefulSet], pods: Informer[core_pb2.Pod],
                 claims: Informer[core_pb2.PersistentVolumeClaim], revisions: Informer[apps_pb2.ControllerRevision],
                 recorder: EventRecorder, workers: int = 2) -> None:
        self.client = client
        self.statefulsets = statefulsets
        self.pods = pods
        self.claims = claims
        self.history = History(client, revisions)
        self.recorder = recorder
        self.queue = WorkQueue("statefulset")
        self.workers = Workers(self.queue, self.sync, workers)
        statefulsets.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                                 on_delete=self._enqueue)
        pods.add_handler(on_add=self._pod_changed, on_update=self._pod_updated, on_delete=self._pod_changed)

    # ---------------------------------------------------------------- events

    def _enqueue(self, sts: apps_pb2.StatefulSet) -> None:
        self.queue.add(object_key(sts))

    def _owner_key(self, pod: core_pb2.Pod) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.kind != KIND:
            return None
        sts = self.statefulsets.store.get(f"{pod.metadata.namespace}/{ref.name}")
        return object_key(sts) if sts is not None and sts.metadata.uid == ref.uid else None

    def _pod_changed(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.queue.add(key)
        elif controller_of(pod) is None:
            for sts in self.statefulsets.store.by_index(INDEX_NAMESPACE, pod.metadata.namespace):
                self._enqueue(sts)  # an orphan one of them may adopt

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        self._pod_changed(new)
        if not is_ready(old) and is_ready(new):
            key = self._owner_key(new)
            sts = self.statefulsets.store.get(key) if key else None
            if sts is not None and sts.spec.minReadySeconds > 0:
                self.queue.add_after(object_key(sts), sts.spec.minReadySeconds + 1)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        sts = self.statefulsets.store.get(key)
        if sts is None:
            return
        try:
            selector = from_label_selector_proto(sts.spec.selector)
        except SelectorError:
            return
        if selector is None or selector.empty():
            return
        name = sts.metadata.name
        candidates = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, sts.metadata.namespace)
                      if ordinal_of(p, name) is not None]
        deleting = sts.metadata.HasField("deletionTimestamp")
        pods = await claim(self.client.pods, sts, API_VERSION, KIND, selector, candidates, can_adopt=not deleting)
        if deleting:
            return
        collisions = sts.status.collisionCount if sts.status.HasField("collisionCount") else 0
        update, collisions = await self.history.current(sts, API_VERSION, KIND, template_patch(sts.spec.template),
                                                        collisions)
        current = next((r for r in self.history.owned(sts) if r.metadata.name == sts.status.currentRevision),
                       update)
        state = _State(sts, current, update)
        for pod in pods:
            ordinal = ordinal_of(pod, name)
            assert ordinal is not None
            if ordinal in state.wanted:
                state.replicas[ordinal] = pod
            else:
                state.condemned.append(pod)
        state.condemned.sort(key=lambda p: -(ordinal_of(p, name) or 0))
        error: Exception | None = None
        try:
            await self._update(state)
        except errors.ApiError as err:
            error = err
        await self._update_status(state, collisions)
        live = {revision_hash(current), revision_hash(update)}
        live |= {p.metadata.labels.get(CONTROLLER_REVISION_HASH, "") for p in pods}
        await self.history.truncate(sts, live, sts.spec.revisionHistoryLimit)
        if error is not None:
            raise error

    def _healthy(self, sts: apps_pb2.StatefulSet, pod: core_pb2.Pod) -> bool:
        return pod.status.phase == "Running" and not _terminating(pod) and \
            is_available(pod, sts.spec.minReadySeconds, time.time())

    async def _update(self, state: _State) -> None:
        """Upstream's updateStatefulSet: replicas in order, then the condemned, then the update."""
        sts = state.sts
        monotonic = sts.spec.podManagementPolicy != "Parallel"
        name = sts.metadata.name
        # Pods that ran to an end are deleted, to be made again at their ordinal
        for ordinal, pod in sorted(state.replicas.items()):
            if _finished(pod) and not _terminating(pod):
                self.recorder.object_event(sts, API_VERSION, KIND, WARNING, "RecreatingFailedPod" if
                                           pod.status.phase == "Failed" else "RecreatingTerminatedPod",
                                           f"StatefulSet {sts.metadata.namespace}/{name} is recreating "
                                           f"{'failed' if pod.status.phase == 'Failed' else 'terminated'} "
                                           f"Pod {pod.metadata.name}")
                await self._delete_pod(sts, pod)
                del state.replicas[ordinal]
                if monotonic:
                    return
        creates: list[int] = []
        for ordinal in state.wanted:
            member = state.replicas.get(ordinal)
            if member is None:
                if monotonic:
                    await self._create_pod(state, ordinal)
                    return
                creates.append(ordinal)
                continue
            await self._ensure_claims(sts, member, ordinal)
            if monotonic and not self._healthy(sts, member):
                if self._healthy_enough_to_wait(member):
                    self.queue.add_after(object_key(sts), sts.spec.minReadySeconds + 1)
                return  # OrderedReady: wait for this one before the next
        if creates:
            results = await asyncio.gather(*(self._create_pod(state, o) for o in creates), return_exceptions=True)
            failed = [r for r in results if isinstance(r, Exception)]
            if failed:
                raise failed[0]
        # Scale down: the highest ordinal first, and (OrderedReady) only while every pod of
        # a lower ordinal is healthy (upstream's firstUnhealthyPod)
        members = sorted([*((o, state.replicas.get(o)) for o in state.wanted),
                          *((ordinal_of(p, name) or 0, p) for p in state.condemned)], key=lambda m: m[0])
        first_unhealthy = next((o for o, p in members if p is None or not self._healthy(sts, p)), None)
        for pod in state.condemned:
            if _terminating(pod):
                if monotonic:
                    return  # one at a time: wait until it is gone
                continue
            if monotonic and first_unhealthy is not None and first_unhealthy != ordinal_of(pod, name):
                return  # upstream: no scale-down while another pod is unhealthy
            await self._release_claims(sts, pod)
            await self._delete_pod(sts, pod)
            if monotonic:
                return
        if sts.spec.updateStrategy.type != "RollingUpdate":
            return
        await self._roll(state)

    @staticmethod
    def _healthy_enough_to_wait(pod: core_pb2.Pod) -> bool:
        """Ready but not yet for minReadySeconds: worth looking again then."""
        return is_ready(pod) and not _terminating(pod)

    async def _roll(self, state: _State) -> None:
        """Replace pods of old revisions from the highest ordinal down to the partition."""
        sts = state.sts
        ru = sts.spec.updateStrategy.rollingUpdate
        partition = state.start + ru.partition
        target = revision_hash(state.update)
        # Every wanted ordinal, a pod not made yet (or not yet seen) counting as unhealthy
        ordinals = sorted(state.wanted, reverse=True)
        if not ru.HasField("maxUnavailable"):
            for ordinal in ordinals:
                if ordinal < partition:
                    break
                pod = state.replicas.get(ordinal)
                if pod is None:
                    return
                if pod.metadata.labels.get(CONTROLLER_REVISION_HASH) != target and not _terminating(pod):
                    await self._delete_pod(sts, pod)
                    return
                if not self._healthy(sts, pod):
                    return  # wait for it before the next one
            return
        # maxUnavailable: up to that many pods of the set unavailable at once
        budget = max(1, scaled_value(ru.maxUnavailable, sts.spec.replicas, round_up=True))
        unavailable = sum(1 for o in state.wanted if (p := state.replicas.get(o)) is None or not self._healthy(sts, p))
        for ordinal in ordinals:
            pod = state.replicas.get(ordinal)
            if ordinal < partition or unavailable >= budget:
                return
            if pod is not None and pod.metadata.labels.get(CONTROLLER_REVISION_HASH) != target \
                    and not _terminating(pod):
                healthy = self._healthy(sts, pod)
                await self._delete_pod(sts, pod)
                unavailable += 1 if healthy else 0

    # ---------------------------------------------------------------- pods and claims

    def _template_for(self, state: _State, ordinal: int) -> tuple[core_pb2.PodTemplateSpec, str]:
        """The revision a new pod at this ordinal gets (upstream's newVersionedStatefulSetPod):
        below the partition the current one, else the update."""
        sts = state.sts
        strategy = sts.spec.updateStrategy
        if strategy.type == "RollingUpdate" and ordinal < state.start + strategy.rollingUpdate.partition \
                and state.current.metadata.name != state.update.metadata.name:
            return template_of(state.current), revision_hash(state.current)
        return sts.spec.template, revision_hash(state.update)

    async def _create_pod(self, state: _State, ordinal: int) -> None:
        sts = state.sts
        template, digest = self._template_for(state, ordinal)
        name = f"{sts.metadata.name}-{ordinal}"
        pod = pod_from_template(template, controller_ref(sts, API_VERSION, KIND), sts.metadata.namespace, "")
        pod.metadata.name = name
        labels = pod.metadata.labels
        labels[POD_NAME] = name
        labels[POD_INDEX] = str(ordinal)
        labels[CONTROLLER_REVISION_HASH] = digest
        pod.spec.hostname = name
        if sts.spec.serviceName:
            pod.spec.subdomain = sts.spec.serviceName
        for claim_template in sts.spec.volumeClaimTemplates:
            volume_name = claim_template.metadata.name
            kept = [v for v in pod.spec.volumes if v.name != volume_name]
            del pod.spec.volumes[:]
            pod.spec.volumes.extend(kept)
            pod.spec.volumes.add(name=volume_name).persistentVolumeClaim.claimName = claim_name(
                claim_template, sts.metadata.name, ordinal)
        await self._ensure_claims(sts, pod, ordinal)
        try:
            await self.client.pods.create(pod)
        except errors.AlreadyExists:
            return  # made already: the informer has not shown it yet
        except errors.ApiError as err:
            self.recorder.object_event(sts, API_VERSION, KIND, WARNING, "FailedCreate",
                                       f"create Pod {name} in StatefulSet {sts.metadata.name} failed error: "
                                       f"{err.message}")
            raise
        self.recorder.object_event(sts, API_VERSION, KIND, NORMAL, "SuccessfulCreate",
                                   f"create Pod {name} in StatefulSet {sts.metadata.name} successful")

    async def _ensure_claims(self, sts: apps_pb2.StatefulSet, pod: core_pb2.Pod, ordinal: int) -> None:
        """Each claim template's claim for this ordinal, made if missing, owned as the
        retention policy says (whenDeleted: Delete makes the set an owner)."""
        ns = sts.metadata.namespace
        for template in sts.spec.volumeClaimTemplates:
            name = claim_name(template, sts.metadata.name, ordinal)
            existing = self.claims.store.get(f"{ns}/{name}")
            if existing is not None:
                await self._set_claim_owner(sts, existing)
                continue
            claim_obj = core_pb2.PersistentVolumeClaim()
            claim_obj.CopyFrom(template)
            claim_obj.ClearField("status")
            claim_obj.metadata.CopyFrom(meta_pb2.ObjectMeta(
                name=name, namespace=ns, labels=dict(template.metadata.labels),
                annotations=dict(template.metadata.annotations)))
            claim_obj.metadata.labels.update(sts.spec.selector.matchLabels)
            if sts.spec.persistentVolumeClaimRetentionPolicy.whenDeleted == "Delete":
                claim_obj.metadata.ownerReferences.append(_owner(sts, API_VERSION, KIND))
            try:
                await self.client.persistentvolumeclaims.create(claim_obj)
            except errors.AlreadyExists:
                continue
            except errors.ApiError as err:
                self.recorder.object_event(sts, API_VERSION, KIND, WARNING, "FailedCreate",
                                           f"create Claim {name} for Pod {pod.metadata.name} in StatefulSet "
                                           f"{sts.metadata.name} failed error: {err.message}")
                raise
            self.recorder.object_event(sts, API_VERSION, KIND, NORMAL, "SuccessfulCreate",
                                       f"create Claim {name} Pod {pod.metadata.name} in StatefulSet "
                                       f"{sts.metadata.name} success")

    async def _release_claims(self, sts: apps_pb2.StatefulSet, pod: core_pb2.Pod) -> None:
        """whenScaled: Delete: a condemned pod's claims become the pod's (and no longer the
        set's), so that the garbage collector deletes them with it."""
        if sts.spec.persistentVolumeClaimRetentionPolicy.whenScaled != "Delete":
            return
        ordinal = ordinal_of(pod, sts.metadata.name)
        assert ordinal is not None
        for template in sts.spec.volumeClaimTemplates:
            key = f"{sts.metadata.namespace}/{claim_name(template, sts.metadata.name, ordinal)}"
            existing = self.claims.store.get(key)
            if existing is None:
                continue
            def own(c: core_pb2.PersistentVolumeClaim) -> bool:
                others = (sts.metadata.uid, pod.metadata.uid)
                refs = [r for r in c.metadata.ownerReferences if r.uid not in others] + [_owner(pod, "v1", "Pod")]
                if list(c.metadata.ownerReferences) == refs:
                    return False
                del c.metadata.ownerReferences[:]
                c.metadata.ownerReferences.extend(refs)  # the pod's alone, not the set's any more
                return True
            # Before the pod goes: once it is gone, nothing would tie the claim to it
            await update_with_retry(self.client.persistentvolumeclaims, existing, own)

    async def _set_claim_owner(self, sts: apps_pb2.StatefulSet, claim_obj: core_pb2.PersistentVolumeClaim) -> None:
        """Keep the set's ownership of a claim in line with whenDeleted (a policy changed
        after the claim was made)."""
        want = sts.spec.persistentVolumeClaimRetentionPolicy.whenDeleted == "Delete"

        def align(c: core_pb2.PersistentVolumeClaim) -> bool:
            has = any(r.uid == sts.metadata.uid for r in c.metadata.ownerReferences)
            if want == has:
                return False
            refs = [r for r in c.metadata.ownerReferences if r.uid != sts.metadata.uid]
            del c.metadata.ownerReferences[:]
            c.metadata.ownerReferences.extend(refs)
            if want:
                c.metadata.ownerReferences.append(_owner(sts, API_VERSION, KIND))
            return True
        if want != any(r.uid == sts.metadata.uid for r in claim_obj.metadata.ownerReferences):
            await update_with_retry(self.client.persistentvolumeclaims, claim_obj, align)

    async def _delete_pod(self, sts: apps_pb2.StatefulSet, pod: core_pb2.Pod) -> None:
        try:
            await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except errors.NotFound:
            return
        except errors.ApiError as err:
            self.recorder.object_event(sts, API_VERSION, KIND, WARNING, "FailedDelete",
                                       f"delete Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} failed "
                                       f"error: {err.message}")
            raise
        self.recorder.object_event(sts, API_VERSION, KIND, NORMAL, "SuccessfulDelete",
                                   f"delete Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} successful")

    # ---------------------------------------------------------------- status

    async def _update_status(self, state: _State, collisions: int) -> None:
        sts = state.sts
        now = time.time()
        counts = _Counts()
        current, update = revision_hash(state.current), revision_hash(state.update)
        for pod in [*state.replicas.values(), *state.condemned]:
            counts.replicas += 1
            if is_ready(pod) and not _terminating(pod):
                counts.ready += 1
                counts.available += is_available(pod, sts.spec.minReadySeconds, now)
            digest = pod.metadata.labels.get(CONTROLLER_REVISION_HASH)
            if digest == current and not _terminating(pod):
                counts.current += 1
            if digest == update and not _terminating(pod):
                counts.updated += 1
        status = apps_pb2.StatefulSetStatus()
        status.CopyFrom(sts.status)
        status.observedGeneration = sts.metadata.generation
        status.replicas, status.readyReplicas, status.availableReplicas = counts.replicas, counts.ready, \
            counts.available
        status.currentReplicas, status.updatedReplicas = counts.current, counts.updated
        status.currentRevision, status.updateRevision = state.current.metadata.name, state.update.metadata.name
        if collisions:
            status.collisionCount = collisions
        # upstream's completeRollingUpdate: every pod updated and ready, the update is current
        if sts.spec.updateStrategy.type == "RollingUpdate" and counts.updated == counts.replicas \
                and counts.ready == counts.replicas:
            status.currentReplicas, status.currentRevision = counts.updated, status.updateRevision
        if status == sts.status:
            return
        updated = apps_pb2.StatefulSet()
        updated.CopyFrom(sts)
        updated.status.CopyFrom(status)
        try:
            await self.client.statefulsets.update_status(updated)
        except errors.NotFound:
            pass
        except errors.Conflict:
            self.queue.add(object_key(sts))


def _owner(obj: Any, api_version: str, kind: str) -> meta_pb2.OwnerReference:
    """A plain owner reference (upstream's claims name their set or pod as an owner, not
    as their controller)."""
    meta = obj.metadata
    return meta_pb2.OwnerReference(apiVersion=api_version, kind=kind, name=meta.name, uid=meta.uid)

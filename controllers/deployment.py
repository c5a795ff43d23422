"""The Deployment controller, as upstream's pkg/controller/deployment: a ReplicaSet per
pod template (named by its hash, numbered by revision annotations), rolled out by
RollingUpdate (never more than replicas+maxSurge pods, never fewer than
replicas-maxUnavailable available) or Recreate (the old pods gone before new ones
start); scaling, pause, the Progressing and Available conditions with
progressDeadlineSeconds, and revisionHistoryLimit. `kubectl rollout undo` rolls back
client-side: the template of an old revision comes back, and its ReplicaSet is reused
under a new revision."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from controllers import deploymentutil as du
from controllers.controllerref import claim, controller_of, controller_ref, update_with_retry
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.selectors import LabelSelector, SelectorError, from_label_selector_proto
from kubeling.timestamps import now as _now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2

__all__ = ["DeploymentController"]

log = logging.getLogger(__name__)

Sets = list[apps_pb2.ReplicaSet]



def _condition(status: apps_pb2.DeploymentStatus, kind: str) -> apps_pb2.DeploymentCondition | None:
    return next((c for c in status.conditions if c.type == kind), None)


def _set_condition(status: apps_pb2.DeploymentStatus, kind: str, value: str, reason: str, message: str) -> None:
    """upstream's SetDeploymentCondition: the transition time moves only when the status does."""
    current = _condition(status, kind)
    now = _now()
    if current is not None and current.status == value and current.reason == reason:
        if current.message != message:
            current.message = message
            current.lastUpdateTime.CopyFrom(now)
        return
    fresh = apps_pb2.DeploymentCondition(type=kind, status=value, reason=reason, message=message,
                                         lastUpdateTime=now, lastTransitionTime=now)
    if current is not None and current.status == value:
        fresh.lastTransitionTime.CopyFrom(current.lastTransitionTime)
    kept = [c for c in status.conditions if c.type != kind]
    del status.conditions[:]
    status.conditions.extend([*kept, fresh])


class DeploymentController:
    def __init__(self, client: Client, deployments: Informer[apps_pb2.Deployment],
                 replicasets: Informer[apps_pb2.ReplicaSet], pods: Informer[core_pb2.Pod], recorder: EventRecorder,
                 workers: int = 2) -> None:
        self.client = client
        self.deployments = deployments
        self.replicasets = replicasets
        self.pods = pods
        self.recorder = recorder
        self.queue = WorkQueue("deployment")
        self.workers = Workers(self.queue, self.sync, workers)
        deployments.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                                on_delete=self._enqueue)
        replicasets.add_handler(on_add=self._rs_changed, on_update=lambda old, new: self._rs_changed(new),
                                on_delete=self._rs_changed)
        pods.add_handler(on_delete=self._pod_deleted)

    def _enqueue(self, d: apps_pb2.Deployment) -> None:
        self.queue.add(object_key(d))

    def _owner(self, rs: apps_pb2.ReplicaSet) -> apps_pb2.Deployment | None:
        ref = controller_of(rs)
        if ref is None or ref.kind != "Deployment":
            return None
        d = self.deployments.store.get(f"{rs.metadata.namespace}/{ref.name}")
        return d if d is not None and d.metadata.uid == ref.uid else None

    def _rs_changed(self, rs: apps_pb2.ReplicaSet) -> None:
        d = self._owner(rs)
        if d is not None:
            self._enqueue(d)
        elif controller_of(rs) is None:  # an orphan: who may adopt it
            for d in self.deployments.store.by_index(INDEX_NAMESPACE, rs.metadata.namespace):
                selector = self._selector(d)
                if selector is not None and selector.matches(rs.metadata.labels):
                    self._enqueue(d)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        """Recreate waits for the old pods to be gone: look again when one is."""
        ref = controller_of(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.replicasets.store.get(f"{pod.metadata.namespace}/{ref.name}")
        d = self._owner(rs) if rs is not None else None
        if d is not None and d.spec.strategy.type == "Recreate":
            self._enqueue(d)

    @staticmethod
    def _selector(d: apps_pb2.Deployment) -> LabelSelector | None:
        try:
            selector = from_label_selector_proto(d.spec.selector)
        except SelectorError:
            return None
        return None if selector is None or selector.empty() else selector

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        d = self.deployments.store.get(key)
        if d is None:
            return
        selector = self._selector(d)
        if selector is None:
            return  # validation forbids it; never select everything
        candidates = self.replicasets.store.by_index(INDEX_NAMESPACE, d.metadata.namespace)
        sets: Sets = await claim(self.client.replicasets, d, "apps/v1", "Deployment", selector, candidates,
                                 can_adopt=True)
        if d.metadata.HasField("deletionTimestamp"):
            await self._sync_status(d, sets, self._newest_match(d, sets))
            return
        if d.spec.paused or self._scaling_event(d, sets):
            await self._scale_sync(d, sets)
            return
        if d.spec.strategy.type == "Recreate":
            await self._rollout_recreate(d, sets)
        else:
            await self._rollout_rolling(d, sets)

    @staticmethod
    def _newest_match(d: apps_pb2.Deployment, sets: Sets) -> apps_pb2.ReplicaSet | None:
        matching = [rs for rs in sets if du.equal_ignore_hash(rs.spec.template, d.spec.template)]
        return min(matching, key=lambda rs: rs.metadata.creationTimestamp.seconds) if matching else None

    @staticmethod
    def _scaling_event(d: apps_pb2.Deployment, sets: Sets) -> bool:
        """An active ReplicaSet sized for another replicas count: the user scaled."""
        for rs in sets:
            if rs.spec.replicas == 0:
                continue
            desired = rs.metadata.annotations.get(du.DESIRED_REPLICAS, "")
            if desired.isdigit() and int(desired) != d.spec.replicas:
                return True
        return False

    async def _new_rs(self, d: apps_pb2.Deployment, sets: Sets, *, create: bool) -> tuple[apps_pb2.ReplicaSet | None,
                                                                                       Sets]:
        """The ReplicaSet of the current template (made if asked, and missing), with its
        revision above every old one's; and the old ReplicaSets."""
        existing = self._newest_match(d, sets)
        old = [rs for rs in sets if existing is None or rs.metadata.uid != existing.metadata.uid]
        revision = du.max_revision(old) + 1
        surge = du.max_surge(d)
        if existing is not None:
            updated = await self._stamp(existing, d, revision, surge)
            await self._set_deployment_revision(d, du.revision_of(updated))
            return updated, old
        if not create:
            return None, old
        collisions = d.status.collisionCount if d.status.HasField("collisionCount") else None
        template_hash = du.template_hash(d.spec.template, collisions)
        rs = apps_pb2.ReplicaSet()
        rs.metadata.name = f"{d.metadata.name}-{template_hash}"
        rs.metadata.namespace = d.metadata.namespace
        rs.metadata.labels.update(d.spec.template.metadata.labels)
        rs.metadata.labels[du.POD_TEMPLATE_HASH] = template_hash
        rs.metadata.annotations.update(du.copyable_annotations(d))
        rs.metadata.annotations[du.REVISION] = str(revision)
        rs.metadata.annotations[du.DESIRED_REPLICAS] = str(d.spec.replicas)
        rs.metadata.annotations[du.MAX_REPLICAS] = str(d.spec.replicas + surge)
        rs.metadata.ownerReferences.append(controller_ref(d, "apps/v1", "Deployment"))
        rs.spec.template.CopyFrom(d.spec.template)
        rs.spec.template.metadata.labels[du.POD_TEMPLATE_HASH] = template_hash
        rs.spec.selector.CopyFrom(d.spec.selector)
        rs.spec.selector.matchLabels[du.POD_TEMPLATE_HASH] = template_hash
        rs.spec.minReadySeconds = d.spec.minReadySeconds
        rs.spec.replicas = du.new_rs_replicas(d, sets, None)
        try:
            made = await self.client.replicasets.create(rs)
        except errors.AlreadyExists:
            # A hash collision with another template: count it, so the next name differs.
            current = await self.client.replicasets.get(rs.metadata.name, rs.metadata.namespace)
            if du.equal_ignore_hash(current.spec.template, d.spec.template):
                raise errors.Conflict(f"replica set {rs.metadata.name} exists: retrying to claim it") from None
            status = apps_pb2.Deployment()
            status.CopyFrom(d)
            status.status.collisionCount = (collisions or 0) + 1
            await self.client.deployments.update_status(status)
            raise errors.Conflict(f"hash collision for {rs.metadata.name}: retrying with another name") from None
        log.info("deployment %s/%s: created ReplicaSet %s (revision %d, %d replicas)", d.metadata.namespace,
                 d.metadata.name, made.metadata.name, revision, made.spec.replicas)
        self.recorder.object_event(d, "apps/v1", "Deployment", NORMAL, "ScalingReplicaSet",
                                   f"Scaled up replica set {made.metadata.name} from 0 to {made.spec.replicas}")
        await self._set_deployment_revision(d, revision)
        await self._progress(d, "NewReplicaSetCreated", f'Created new replica set "{made.metadata.name}"')
        return made, old

    async def _stamp(self, rs: apps_pb2.ReplicaSet, d: apps_pb2.Deployment, revision: int,
                     surge: int) -> apps_pb2.ReplicaSet:
        """The new ReplicaSet's annotations: the newest revision (an old one reused by a
        rollback keeps its former numbers in revision-history), replicas and max-replicas."""
        def change(o: apps_pb2.ReplicaSet) -> bool:
            ann = o.metadata.annotations
            before = dict(ann)
            current = du.revision_of(o)
            if current < revision:
                if current:
                    history = [h for h in ann.get(du.REVISION_HISTORY, "").split(",") if h]
                    ann[du.REVISION_HISTORY] = ",".join([*history, str(current)])
                ann[du.REVISION] = str(revision)
            ann.update(du.copyable_annotations(d))
            ann[du.DESIRED_REPLICAS] = str(d.spec.replicas)
            ann[du.MAX_REPLICAS] = str(d.spec.replicas + surge)
            if o.spec.minReadySeconds != d.spec.minReadySeconds:
                o.spec.minReadySeconds = d.spec.minReadySeconds
                return True
            return dict(ann) != before
        updated = await update_with_retry(self.client.replicasets, rs, change)
        if updated is None:
            raise errors.NotFound(f"replica set {rs.metadata.name} is gone")
        return updated

    async def _set_deployment_revision(self, d: apps_pb2.Deployment, revision: int) -> None:
        if d.metadata.annotations.get(du.REVISION) == str(revision):
            return

        def change(o: apps_pb2.Deployment) -> bool:
            if o.metadata.annotations.get(du.REVISION) == str(revision):
                return False
            o.metadata.annotations[du.REVISION] = str(revision)
            return True
        await update_with_retry(self.client.deployments, d, change)

    async def _scale(self, rs: apps_pb2.ReplicaSet, replicas: int, d: apps_pb2.Deployment) -> apps_pb2.ReplicaSet:
        surge = du.max_surge(d)
        if rs.spec.replicas == replicas and rs.metadata.annotations.get(du.DESIRED_REPLICAS) == str(d.spec.replicas):
            return rs
        before = rs.spec.replicas

        def change(o: apps_pb2.ReplicaSet) -> bool:
            o.spec.replicas = replicas
            o.metadata.annotations[du.DESIRED_REPLICAS] = str(d.spec.replicas)
            o.metadata.annotations[du.MAX_REPLICAS] = str(d.spec.replicas + surge)
            return True
        updated = await update_with_retry(self.client.replicasets, rs, change)
        if updated is None:
            raise errors.NotFound(f"replica set {rs.metadata.name} is gone")
        if before != replicas:
            direction = "up" if replicas > before else "down"
            self.recorder.object_event(d, "apps/v1", "Deployment", NORMAL, "ScalingReplicaSet",
                                       f"Scaled {direction} replica set {rs.metadata.name} from {before} to {replicas}")
        return updated

    # ---------------------------------------------------------------- strategies

    async def _rollout_rolling(self, d: apps_pb2.Deployment, sets: Sets) -> None:
        new_rs, old = await self._new_rs(d, sets, create=True)
        assert new_rs is not None
        everything = [*old, new_rs]
        # Scale the new ReplicaSet up as far as maxSurge allows...
        wanted = du.new_rs_replicas(d, everything, new_rs) if new_rs.spec.replicas < d.spec.replicas \
            else d.spec.replicas
        if wanted != new_rs.spec.replicas:
            new_rs = await self._scale(new_rs, wanted, d)
            await self._sync_status(d, [*old, new_rs], new_rs)
            return
        # ... and the old ones down as far as maxUnavailable allows.
        old, scaled = await self._reconcile_old(d, old, new_rs)
        if scaled:
            await self._sync_status(d, [*old, new_rs], new_rs)
            return
        status = self._status(d, [*old, new_rs], new_rs)
        if du.complete(d, status):
            await self._cleanup(d, old)
        await self._sync_status(d, [*old, new_rs], new_rs)

    async def _reconcile_old(self, d: apps_pb2.Deployment, old: Sets,
                             new_rs: apps_pb2.ReplicaSet) -> tuple[Sets, bool]:
        """upstream's reconcileOldReplicaSets: first the old pods that are not available
        anyway, then available ones while at least replicas-maxUnavailable stay available."""
        if du.total_replicas(old) == 0:
            return old, False
        everything = [*old, new_rs]
        _, max_unavailable = du.resolve_fenceposts(d)
        min_available = d.spec.replicas - max_unavailable
        new_unavailable = new_rs.spec.replicas - new_rs.status.availableReplicas
        max_scaled_down = du.total_replicas(everything) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return old, False
        scaled = False
        ordered = sorted(old, key=lambda rs: rs.metadata.creationTimestamp.seconds)
        result: Sets = []
        budget = max_scaled_down
        for rs in ordered:  # the unhealthy first
            unhealthy = rs.spec.replicas - rs.status.availableReplicas
            cut = min(budget, unhealthy)
            if cut > 0:
                rs = await self._scale(rs, rs.spec.replicas - cut, d)
                budget -= cut
                scaled = True
            result.append(rs)
        available = du.available_replicas([*result, new_rs])
        budget = min(available - min_available, du.total_replicas(everything) - min_available - new_unavailable)
        final: Sets = []
        for rs in result:
            cut = min(max(budget, 0), rs.spec.replicas)
            if cut > 0:
                rs = await self._scale(rs, rs.spec.replicas - cut, d)
                budget -= cut
                scaled = True
            final.append(rs)
        return final, scaled

    async def _rollout_recreate(self, d: apps_pb2.Deployment, sets: Sets) -> None:
        new_rs, old = await self._new_rs(d, sets, create=False)
        scaled = False
        kept: Sets = []
        for rs in old:
            if rs.spec.replicas > 0:
                rs = await self._scale(rs, 0, d)
                scaled = True
            kept.append(rs)
        if scaled:
            await self._sync_status(d, [*kept, *([new_rs] if new_rs else [])], new_rs)
            return
        old_uids = {rs.metadata.uid for rs in kept}
        running = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, d.metadata.namespace)
                   if (ref := controller_of(p)) is not None and ref.uid in old_uids
                   and p.status.phase not in ("Succeeded", "Failed")]
        if running:
            await self._sync_status(d, [*kept, *([new_rs] if new_rs else [])], new_rs)
            return  # a pod is deleted: enqueued again
        if new_rs is None:
            new_rs, kept = await self._new_rs(d, sets, create=True)
            assert new_rs is not None
        if new_rs.spec.replicas != d.spec.replicas:
            new_rs = await self._scale(new_rs, d.spec.replicas, d)
        status = self._status(d, [*kept, new_rs], new_rs)
        if du.complete(d, status):
            await self._cleanup(d, kept)
        await self._sync_status(d, [*kept, new_rs], new_rs)

    async def _scale_sync(self, d: apps_pb2.Deployment, sets: Sets) -> None:
        """A paused Deployment or a replicas change: resize without rolling anything out
        (upstream's sync/scale, proportionally over the active ReplicaSets)."""
        new_rs, old = await self._new_rs(d, sets, create=False)
        everything = [*old, *([new_rs] if new_rs else [])]
        active = [rs for rs in everything if rs.spec.replicas > 0]
        if new_rs is not None and (not active or active == [new_rs]):
            new_rs = await self._scale(new_rs, d.spec.replicas, d)
        elif len(active) == 1:
            target = active[0]
            scaled = await self._scale(target, d.spec.replicas, d)
            everything = [scaled if rs.metadata.uid == scaled.metadata.uid else rs for rs in everything]
        elif active:
            allowed = d.spec.replicas + (du.max_surge(d) if d.spec.strategy.type == "RollingUpdate" else 0)
            delta = allowed - du.total_replicas(active)
            if delta:
                ordered = sorted(active, key=lambda rs: rs.metadata.creationTimestamp.seconds)
                for rs, share in zip(ordered, du.proportions(ordered, delta), strict=True):
                    await self._scale(rs, max(0, rs.spec.replicas + share), d)
            else:
                for rs in active:  # the sizes stand: record the new replicas count
                    await self._scale(rs, rs.spec.replicas, d)
        if d.spec.paused:
            await self._cleanup(d, old)
        refreshed = [self.replicasets.store.get(object_key(rs)) or rs for rs in everything]
        new_now = next((rs for rs in refreshed if new_rs is not None and rs.metadata.uid == new_rs.metadata.uid),
                       None)
        await self._sync_status(d, refreshed, new_now)

    async def _cleanup(self, d: apps_pb2.Deployment, old: Sets) -> None:
        """Keep revisionHistoryLimit old, empty ReplicaSets (the oldest revisions go)."""
        limit = d.spec.revisionHistoryLimit if d.spec.HasField("revisionHistoryLimit") else 10
        empty = sorted((rs for rs in old if rs.spec.replicas == 0 and rs.status.replicas == 0
                        and not rs.metadata.HasField("deletionTimestamp")), key=du.revision_of)
        for rs in empty[:max(0, len(empty) - limit)]:
            try:
                await self.client.replicasets.delete(rs.metadata.name, rs.metadata.namespace, uid=rs.metadata.uid)
                log.info("deployment %s/%s: deleted old ReplicaSet %s (revision %d)", d.metadata.namespace,
                         d.metadata.name, rs.metadata.name, du.revision_of(rs))
            except errors.NotFound:
                pass

    # ---------------------------------------------------------------- status

    def _status(self, d: apps_pb2.Deployment, sets: Sequence[apps_pb2.ReplicaSet],
                new_rs: apps_pb2.ReplicaSet | None) -> apps_pb2.DeploymentStatus:
        status = apps_pb2.DeploymentStatus()
        status.CopyFrom(d.status)
        status.observedGeneration = d.metadata.generation
        status.replicas = sum(rs.status.replicas for rs in sets)
        status.updatedReplicas = new_rs.status.replicas if new_rs is not None else 0
        status.readyReplicas = sum(rs.status.readyReplicas for rs in sets)
        status.availableReplicas = du.available_replicas(sets)
        status.unavailableReplicas = max(0, d.spec.replicas - status.availableReplicas)
        return status

    async def _progress(self, d: apps_pb2.Deployment, reason: str, message: str) -> None:
        current = self.deployments.store.get(object_key(d)) or d
        updated = apps_pb2.Deployment()
        updated.CopyFrom(current)
        _set_condition(updated.status, "Progressing", "True", reason, message)
        try:
            await self.client.deployments.update_status(updated)
        except errors.Conflict:
            pass  # the next sync sets it

    async def _sync_status(self, d: apps_pb2.Deployment, sets: Sequence[apps_pb2.ReplicaSet],
                           new_rs: apps_pb2.ReplicaSet | None) -> None:
        current = self.deployments.store.get(object_key(d)) or d
        status = self._status(current, sets, new_rs)
        _, max_unavailable = du.resolve_fenceposts(current)
        if status.availableReplicas >= current.spec.replicas - max_unavailable:
            _set_condition(status, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum "
                                                                                   "availability.")
        else:
            _set_condition(status, "Available", "False", "MinimumReplicasUnavailable", "Deployment does not have "
                                                                                      "minimum availability.")
        requeue = self._progressing(current, status, new_rs)
        if status != current.status:
            updated = apps_pb2.Deployment()
            updated.CopyFrom(current)
            updated.status.CopyFrom(status)
            try:
                await self.client.deployments.update_status(updated)
            except errors.NotFound:
                return
        if requeue is not None:
            self.queue.add_after(object_key(d), requeue)

    def _progressing(self, d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus,
                     new_rs: apps_pb2.ReplicaSet | None) -> float | None:
        """The Progressing condition (upstream's syncRolloutStatus); when to look again for
        the progress deadline."""
        cond = _condition(status, "Progressing")
        if d.spec.paused:
            if cond is None or cond.reason != "DeploymentPaused":
                _set_condition(status, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused")
            return None
        if cond is not None and cond.reason == "DeploymentPaused":
            _set_condition(status, "Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed")
            cond = _condition(status, "Progressing")
        name = new_rs.metadata.name if new_rs is not None else ""
        old = d.status
        if du.complete(d, status):
            _set_condition(status, "Progressing", "True", "NewReplicaSetAvailable",
                           f'ReplicaSet "{name}" has successfully progressed.')
            return None
        progressed = (status.updatedReplicas > old.updatedReplicas or status.readyReplicas > old.readyReplicas
                      or status.availableReplicas > old.availableReplicas
                      or old.replicas - old.updatedReplicas > status.replicas - status.updatedReplicas)
        deadline = d.spec.progressDeadlineSeconds if d.spec.HasField("progressDeadlineSeconds") else 600
        if progressed or cond is None or cond.reason in ("NewReplicaSetAvailable", "DeploymentResumed"):
            message = f'ReplicaSet "{name}" is progressing.'
            current = _condition(status, "Progressing")
            if current is not None and current.status == "True" and current.reason == "ReplicaSetUpdated" \
                    and current.message == message:
                current.lastUpdateTime.CopyFrom(_now())
            else:
                _set_condition(status, "Progressing", "True", "ReplicaSetUpdated", message)
            return float(deadline) + 1
        assert cond is not None
        if cond.reason == "ProgressDeadlineExceeded":
            return None
        waited = time.time() - cond.lastUpdateTime.seconds
        if waited > deadline:
            _set_condition(status, "Progressing", "False", "ProgressDeadlineExceeded",
                           f'ReplicaSet "{name}" has timed out progressing.')
            log.info("deployment %s/%s: progress deadline of %ds exceeded", d.metadata.namespace, d.metadata.name,
                     deadline)
            return None
        return deadline - waited + 1

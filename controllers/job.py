"""The Job controller, as upstream's pkg/controller/job (NonIndexed completion mode):
run up to `parallelism` pods until `completions` succeed; count failures (pods that
failed, and restarts under restartPolicy OnFailure) against `backoffLimit`, recreating
failed pods after an exponential backoff; fail a Job that runs past
`activeDeadlineSeconds`; the Complete and Failed conditions; delete a finished Job
`ttlSecondsAfterFinished` later (upstream's TTL-after-finished controller)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from controllers.controllerref import claim, controller_of, controller_ref, is_ready
from controllers.expectations import Expectations
from controllers.replicaset import pod_from_template, slow_start
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.timestamps import now as _now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import batch_pb2, core_pb2

__all__ = ["JobController", "finished"]

log = logging.getLogger(__name__)

MAX_BACKOFF = 360.0  # upstream's MaxJobPodFailureBackOff: 6 minutes



def finished(job: batch_pb2.Job) -> batch_pb2.JobCondition | None:
    return next((c for c in job.status.conditions if c.type in ("Complete", "Failed") and c.status == "True"), None)


class JobController:
    def __init__(self, client: Client, jobs: Informer[batch_pb2.Job], pods: Informer[core_pb2.Pod],
                 recorder: EventRecorder, *, backoff_base: float = 10.0, workers: int = 2) -> None:
        self.client = client
        self.jobs = jobs
        self.pods = pods
        self.recorder = recorder
        self.backoff_base = backoff_base  # upstream's DefaultJobPodFailureBackOff: 10 s
        self.expectations = Expectations()
        self.queue = WorkQueue("job")
        self.workers = Workers(self.queue, self.sync, workers)
        jobs.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new), on_delete=self._enqueue)
        pods.add_handler(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)

    def _enqueue(self, job: batch_pb2.Job) -> None:
        self.queue.add(object_key(job))

    def _owner_key(self, pod: core_pb2.Pod) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.kind != "Job":
            return None
        job = self.jobs.store.get(f"{pod.metadata.namespace}/{ref.name}")
        return object_key(job) if job is not None and job.metadata.uid == ref.uid else None

    def _pod_added(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        key = self._owner_key(new)
        if key is not None:
            if new.metadata.HasField("deletionTimestamp"):
                self.expectations.deletion_observed(key, object_key(new))
            self.queue.add(key)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.queue.add(key)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        job = self.jobs.store.get(key)
        if job is None:
            self.expectations.forget(key)
            return
        done = finished(job)
        if done is not None:
            await self._expire(job, done)
            return
        try:
            selector = from_label_selector_proto(job.spec.selector)
        except SelectorError:
            return
        if selector is None or selector.empty():
            return
        candidates = self.pods.store.by_index(INDEX_NAMESPACE, job.metadata.namespace)
        pods = await claim(self.client.pods, job, "batch/v1", "Job", selector, candidates,
                           can_adopt=not job.metadata.HasField("deletionTimestamp"))
        active = [p for p in pods if p.status.phase not in ("Succeeded", "Failed")
                  and not p.metadata.HasField("deletionTimestamp")]
        succeeded = max(job.status.succeeded, sum(1 for p in pods if p.status.phase == "Succeeded"))
        failed_pods = sum(1 for p in pods if p.status.phase == "Failed")
        failed = max(job.status.failed, failed_pods)
        status = batch_pb2.JobStatus()
        status.CopyFrom(job.status)
        if not status.HasField("startTime") and not job.spec.suspend:
            status.startTime.CopyFrom(_now())
        restarts = sum(c.restartCount for p in active for c in p.status.containerStatuses) \
            if job.spec.template.spec.restartPolicy == "OnFailure" else 0
        failure: tuple[str, str] | None = None
        if failed + restarts > job.spec.backoffLimit:
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif job.spec.HasField("activeDeadlineSeconds") and status.HasField("startTime") \
                and time.time() - status.startTime.seconds >= job.spec.activeDeadlineSeconds:
            failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
        completions = job.spec.completions if job.spec.HasField("completions") else None
        complete = (succeeded >= completions) if completions is not None else (succeeded > 0 and not active)
        if failure is not None:
            await self._delete_all(job, key, active)
            active = []
            self._finish(status, "Failed", *failure)
            self.recorder.object_event(job, "batch/v1", "Job", WARNING, failure[0], failure[1])
        elif complete and not active:
            self._finish(status, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            status.completionTime.CopyFrom(_now())
            self.recorder.object_event(job, "batch/v1", "Job", NORMAL, "Completed", "Job completed")
        elif self.expectations.satisfied(key) and not job.metadata.HasField("deletionTimestamp"):
            active = await self._manage(job, key, active, succeeded,
                                        [p for p in pods if p.status.phase == "Failed"], completions)
        status.active = len(active)
        status.succeeded = succeeded
        status.failed = failed
        status.ready = sum(1 for p in active if is_ready(p))
        if status != job.status:
            updated = batch_pb2.Job()
            updated.CopyFrom(job)
            updated.status.CopyFrom(status)
            await self.client.jobs.update_status(updated)
        if job.spec.HasField("activeDeadlineSeconds") and status.HasField("startTime") and failure is None:
            left = status.startTime.seconds + job.spec.activeDeadlineSeconds - time.time()
            self.queue.add_after(key, max(left, 0) + 0.5)
        done = finished(updated) if status != job.status else None
        if done is not None:
            await self._expire(updated, done)

    @staticmethod
    def _finish(status: batch_pb2.JobStatus, kind: str, reason: str, message: str) -> None:
        now = _now()
        status.conditions.add(type=kind, status="True", reason=reason, message=message, lastProbeTime=now,
                              lastTransitionTime=now)

    async def _manage(self, job: batch_pb2.Job, key: str, active: list[core_pb2.Pod], succeeded: int,
                      failed: list[core_pb2.Pod], completions: int | None) -> list[core_pb2.Pod]:
        parallelism = job.spec.parallelism
        if job.spec.suspend:
            wanted = 0
        elif completions is None:
            wanted = parallelism if succeeded == 0 else len(active)
        else:
            wanted = max(0, min(parallelism, completions - succeeded))
        if len(active) > wanted:
            extra = sorted(active, key=lambda p: (bool(p.spec.nodeName), is_ready(p)))[:len(active) - wanted]
            await self._delete_all(job, key, extra)
            gone = {p.metadata.uid for p in extra}
            return [p for p in active if p.metadata.uid not in gone]
        missing = wanted - len(active)
        if missing <= 0:
            return active
        if failed:
            # Upstream's backoff: 10 s doubling per failure, up to 6 minutes, from the last failure.
            delay = min(MAX_BACKOFF, self.backoff_base * 2 ** (len(failed) - 1))
            last = max((c.state.terminated.finishedAt.seconds for p in failed for c in p.status.containerStatuses),
                       default=0)
            wait = last + delay - time.time()
            if wait > 0:
                self.queue.add_after(key, wait)
                return active
        self.expectations.expect_creations(key, missing)
        ref = controller_ref(job, "batch/v1", "Job")

        async def create() -> None:
            pod = pod_from_template(job.spec.template, ref, job.metadata.namespace, f"{job.metadata.name}-")
            made = await self.client.pods.create(pod)
            self.recorder.object_event(job, "batch/v1", "Job", NORMAL, "SuccessfulCreate",
                                       f"Created pod: {made.metadata.name}")
        created, error = await slow_start(missing, create)
        for _ in range(missing - created):
            self.expectations.creation_observed(key)
        if error is not None:
            self.recorder.object_event(job, "batch/v1", "Job", WARNING, "FailedCreate", f"Error creating: {error}")
            raise error
        return active  # the new pods count once the informer has them

    async def _delete_all(self, job: batch_pb2.Job, key: str, pods: Sequence[core_pb2.Pod]) -> None:
        if not pods:
            return
        self.expectations.expect_deletions(key, [object_key(p) for p in pods])
        for pod in pods:
            try:
                await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
                self.recorder.object_event(job, "batch/v1", "Job", NORMAL, "SuccessfulDelete",
                                           f"Deleted pod: {pod.metadata.name}")
            except errors.NotFound:
                self.expectations.deletion_observed(key, object_key(pod))

    async def _expire(self, job: batch_pb2.Job, done: batch_pb2.JobCondition) -> None:
        """ttlSecondsAfterFinished: the finished Job (and, by the garbage collector, its
        pods) is deleted that long after it finished."""
        if not job.spec.HasField("ttlSecondsAfterFinished") or job.metadata.HasField("deletionTimestamp"):
            return
        at = done.lastTransitionTime.seconds + job.spec.ttlSecondsAfterFinished
        left = at - time.time()
        if left > 0:
            self.queue.add_after(object_key(job), left + 0.5)
            return
        try:
            await self.client.jobs.delete(job.metadata.name, job.metadata.namespace, uid=job.metadata.uid,
                                          propagation_policy="Foreground")
            log.info("job %s/%s: deleted %ds after it finished", job.metadata.namespace, job.metadata.name,
                     job.spec.ttlSecondsAfterFinished)
        except errors.NotFound:
            pass

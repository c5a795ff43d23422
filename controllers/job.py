"""The Job controller, as upstream's pkg/controller/job.

Run up to `parallelism` pods until `completions` succeed: any pods (NonIndexed), or one
per completion index (Indexed: the index in the pod's annotation and label, its hostname
`<job>-<index>`, and JOB_COMPLETION_INDEX in its containers' environment; status lists
completedIndexes). Pods carry the `batch.kubernetes.io/job-tracking` finalizer, and a
finished pod is counted in two steps (its uid into status.uncountedTerminatedPods, then
the finalizer removed, then the counters), so that no pod is counted twice and none is
lost when it is deleted or the controller restarts.

Failures: counted against backoffLimit (restarts too, under restartPolicy OnFailure) or,
with backoffLimitPerIndex, per index (failedIndexes; maxFailedIndexes fails the Job);
failed pods are replaced after an exponential backoff (10 s doubling to 6 min, per index
when the limit is); a podFailurePolicy's first matching rule decides what a failed pod
means (FailJob at once, FailIndex, Ignore, Count). podReplacementPolicy Failed waits for
a deleted pod to be terminal before replacing it. activeDeadlineSeconds fails a Job that
runs too long.

Ends: Complete (CompletionsReached, or a successPolicy rule with SuccessCriteriaMet first),
Failed with FailureTarget first (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy,
MaxFailedIndexesExceeded, FailedIndexes); the pods still running are deleted. suspend
deletes the active pods (Suspended), resume starts them again with startTime reset.
A finished Job is deleted ttlSecondsAfterFinished later (upstream's TTL-after-finished
controller)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from controllers.controllerref import claim, controller_of, controller_ref, is_ready, update_with_retry
from controllers.expectations import Expectations
from controllers.jobutil import (
    COMPLETION_INDEX,
    INDEX_FAILURE_COUNT,
    INDEX_IGNORED_FAILURE_COUNT,
    TRACKING_FINALIZER,
    index_of,
    match_failure_policy,
    match_success_policy,
)
from controllers.replicaset import pod_from_template, slow_start
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.indexset import format_indexes, parse_indexes
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.selectors import SelectorError, from_label_selector_proto
from kubeling.timestamps import now as _now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import batch_pb2, core_pb2

__all__ = ["JobController", "finished"]

log = logging.getLogger(__name__)

API_VERSION, KIND = "batch/v1", "Job"
MAX_BACKOFF = 360.0  # upstream's MaxJobPodFailureBackOff: 6 minutes
_ORPHAN = "orphan:"  # queue keys of pods whose Job is gone but which keep its finalizer


def finished(job: batch_pb2.Job) -> batch_pb2.JobCondition | None:
    return next((c for c in job.status.conditions if c.type in ("Complete", "Failed") and c.status == "True"), None)


def _terminal(pod: core_pb2.Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def _deleting(pod: core_pb2.Pod) -> bool:
    return pod.metadata.HasField("deletionTimestamp")


def _stopped(pod: core_pb2.Pod) -> bool:
    """A pod being deleted that runs nothing any more (never started, or all containers
    terminated): as good as failed."""
    statuses = pod.status.containerStatuses
    return not pod.spec.nodeName or (bool(statuses) and all(c.state.HasField("terminated") for c in statuses))


@dataclass
class _Sync:
    """One sync's view of a Job: its pods sorted out, and what was decided."""

    job: batch_pb2.Job
    status: batch_pb2.JobStatus
    pods: list[core_pb2.Pod]
    active: list[core_pb2.Pod] = field(default_factory=list)
    terminating: list[core_pb2.Pod] = field(default_factory=list)
    counted_failed: set[str] = field(default_factory=set)  # uids of failed pods counted in this sync
    failure: tuple[str, str] | None = None  # (reason, message) that fails the Job
    success: tuple[str, str] | None = None  # (reason, message) that completes it

    @property
    def indexed(self) -> bool:
        return self.job.spec.completionMode == "Indexed"

    @property
    def only_failed_replaced(self) -> bool:
        return self.job.spec.podReplacementPolicy == "Failed"

    @property
    def blocking(self) -> list[core_pb2.Pod]:
        """Pods being deleted whose replacements must wait (podReplacementPolicy Failed:
        until they stopped)."""
        return [p for p in self.terminating if not _stopped(p)] if self.only_failed_replaced else []


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
        if ref is None or ref.kind != KIND:
            return None
        job = self.jobs.store.get(f"{pod.metadata.namespace}/{ref.name}")
        if job is None or job.metadata.uid != ref.uid:
            if TRACKING_FINALIZER in pod.metadata.finalizers:
                self.queue.add(_ORPHAN + object_key(pod))
            return None
        return object_key(job)

    def _orphan_owners(self, pod: core_pb2.Pod) -> None:
        """An orphan: the Jobs whose selector picks it may adopt it."""
        if controller_of(pod) is not None or _deleting(pod):
            return
        for job in self.jobs.store.by_index(INDEX_NAMESPACE, pod.metadata.namespace):
            try:
                selector = from_label_selector_proto(job.spec.selector)
            except SelectorError:
                continue
            if selector is not None and not selector.empty() and selector.matches(pod.metadata.labels):
                self._enqueue(job)

    def _pod_added(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        self._orphan_owners(pod)

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        key = self._owner_key(new)
        if key is not None:
            if _deleting(new):
                self.expectations.deletion_observed(key, object_key(new))
            self.queue.add(key)
        old_key = self._owner_key(old)
        if old_key is not None and old_key != key:
            self.queue.add(old_key)  # released (or given away): the Job counts again
        self._orphan_owners(new)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.queue.add(key)

    def _event(self, job: batch_pb2.Job, kind: str, reason: str, message: str) -> None:
        self.recorder.object_event(job, API_VERSION, KIND, kind, reason, message)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        if key.startswith(_ORPHAN):
            await self._release_orphan(key[len(_ORPHAN):])
            return
        job = self.jobs.store.get(key)
        if job is None:
            self.expectations.forget(key)
            return
        try:
            selector = from_label_selector_proto(job.spec.selector)
        except SelectorError:
            return
        if selector is None or selector.empty():
            return
        candidates = self.pods.store.by_index(INDEX_NAMESPACE, job.metadata.namespace)
        deleting = job.metadata.HasField("deletionTimestamp")
        pods = await claim(self.client.pods, job, API_VERSION, KIND, selector, candidates, can_adopt=not deleting)
        done = finished(job)
        if done is not None or deleting:
            # Nothing more to count: let every pod go (the garbage collector, a deleted Job)
            await self._untrack(p for p in pods if TRACKING_FINALIZER in p.metadata.finalizers)
            if done is not None:
                await self._expire(job, done)
            return
        status = batch_pb2.JobStatus()
        status.CopyFrom(job.status)
        state = _Sync(job, status, pods)
        job = await self._track(state)
        if job is None:
            return
        state.job = job
        self._sort(state)
        self._judge(state)
        if state.failure is not None or state.success is not None:
            await self._finish(state)
        elif self.expectations.satisfied(key):
            await self._suspend_or_resume(state)
            await self._manage(state, key)
        await self._write_status(state)

    async def _release_orphan(self, pod_key: str) -> None:
        """A pod with the tracking finalizer whose Job is gone: nothing will count it."""
        pod = self.pods.store.get(pod_key)
        if pod is not None and self._owner_key(pod) is None:
            await self._untrack([pod])

    @staticmethod
    def _sort(state: _Sync) -> None:
        for pod in state.pods:
            if not _terminal(pod):
                (state.terminating if _deleting(pod) else state.active).append(pod)

    # ---------------------------------------------------------------- counting

    def _failed(self, state: _Sync, pod: core_pb2.Pod) -> bool:
        """upstream's isPodFailed: Failed, or (unless only failed pods are replaced) deleted
        before it succeeded; a deleted pod that stopped counts in either case."""
        if pod.status.phase == "Failed":
            return True
        if not _deleting(pod) or pod.status.phase == "Succeeded":
            return False
        return not state.only_failed_replaced or _stopped(pod)

    async def _track(self, state: _Sync) -> batch_pb2.Job | None:
        """Count finished pods once each: their uids into uncountedTerminatedPods (written),
        their finalizers removed, then into the counters (written with the rest of the
        status). Returns the Job as written (None when it is gone)."""
        job, status = state.job, state.status
        uncounted = status.uncountedTerminatedPods
        seen = set(uncounted.succeeded) | set(uncounted.failed)
        completed = parse_indexes(status.completedIndexes) if state.indexed else set()
        failed_indexes = parse_indexes(status.failedIndexes) if status.HasField("failedIndexes") else set()
        newly: list[core_pb2.Pod] = []
        ignored: list[core_pb2.Pod] = []
        for pod in state.pods:
            if TRACKING_FINALIZER not in pod.metadata.finalizers or pod.metadata.uid in seen:
                continue
            index = index_of(pod)
            if pod.status.phase == "Succeeded":
                if state.indexed and (index is None or index >= job.spec.completions or index in completed):
                    ignored.append(pod)  # an index done already (or none): counted nowhere
                    continue
                uncounted.succeeded.append(pod.metadata.uid)
                if index is not None:
                    completed.add(index)
            elif self._failed(state, pod):
                match = match_failure_policy(job.spec.podFailurePolicy, pod) \
                    if job.spec.HasField("podFailurePolicy") and pod.status.phase == "Failed" else None
                if match is not None and match.action == "Ignore":
                    ignored.append(pod)
                    continue
                uncounted.failed.append(pod.metadata.uid)
                if match is not None and match.action == "FailJob" and state.failure is None:
                    state.failure = ("PodFailurePolicy", match.message)
                if match is not None and match.action == "FailIndex" and index is not None:
                    failed_indexes.add(index)
            else:
                continue
            newly.append(pod)
        if state.indexed:
            status.completedIndexes = format_indexes(completed)
            failed_indexes |= self._over_limit(state)
            if job.spec.HasField("backoffLimitPerIndex"):
                status.failedIndexes = format_indexes(failed_indexes - completed)
        if newly:  # step 1: written before any finalizer goes
            written = await self._write(job, status)
            if written is None:
                return None
            job = written
        # step 2: the finalizers, of these and of any counted before a restart
        pending = set(uncounted.succeeded) | set(uncounted.failed)
        holding = [p for p in state.pods if p.metadata.uid in pending and TRACKING_FINALIZER in p.metadata.finalizers]
        released = await self._untrack([*holding, *ignored])
        # step 3: what lost its finalizer (or is gone) moves into the counters
        still = {p.metadata.uid for p in holding if p.metadata.uid not in released}
        for name in ("succeeded", "failed"):
            uids = getattr(uncounted, name)
            moved = [u for u in uids if u not in still]
            setattr(status, name, getattr(status, name) + len(moved))
            if name == "failed":
                state.counted_failed.update(moved)
            kept = [u for u in uids if u in still]
            del uids[:]
            uids.extend(kept)
        if not uncounted.succeeded and not uncounted.failed:
            status.ClearField("uncountedTerminatedPods")
        return job

    def _failures_by_index(self, state: _Sync) -> dict[int, tuple[int, int]]:
        """Per index: (failures counted, ignored failures), from the failure counts its pods
        carry and the failed pods still there."""
        counts: dict[int, tuple[int, int]] = defaultdict(lambda: (0, 0))
        # counted already: the uid is (or was in this sync) in uncountedTerminatedPods, or
        # the finalizer is gone
        counted_failed = set(state.status.uncountedTerminatedPods.failed) | state.counted_failed
        for pod in state.pods:
            index = index_of(pod)
            if index is None:
                continue
            carried = int(pod.metadata.annotations.get(INDEX_FAILURE_COUNT, "0") or 0)
            ignored = int(pod.metadata.annotations.get(INDEX_IGNORED_FAILURE_COUNT, "0") or 0)
            if pod.status.phase == "Failed" or pod.metadata.uid in counted_failed:
                counted = pod.metadata.uid in counted_failed or TRACKING_FINALIZER not in pod.metadata.finalizers
                is_ignored = counted and pod.metadata.uid not in counted_failed and \
                    pod.status.phase == "Failed" and self._ignored(state, pod)
                if is_ignored:
                    ignored += 1
                elif counted:
                    carried += 1
            old = counts[index]
            counts[index] = (max(old[0], carried), max(old[1], ignored))
        return dict(counts)

    @staticmethod
    def _ignored(state: _Sync, pod: core_pb2.Pod) -> bool:
        if not state.job.spec.HasField("podFailurePolicy"):
            return False
        match = match_failure_policy(state.job.spec.podFailurePolicy, pod)
        return match is not None and match.action == "Ignore"

    def _over_limit(self, state: _Sync) -> set[int]:
        """Indexes whose failures passed backoffLimitPerIndex."""
        spec = state.job.spec
        if not spec.HasField("backoffLimitPerIndex"):
            return set()
        return {i for i, (failures, _) in self._failures_by_index(state).items()
                if failures > spec.backoffLimitPerIndex}

    async def _untrack(self, pods: Iterable[core_pb2.Pod]) -> set[str]:
        """Remove the tracking finalizer; the uids it was removed from (or that are gone)."""
        done: set[str] = set()
        for pod in list(pods):
            def release(p: core_pb2.Pod) -> bool:
                if TRACKING_FINALIZER not in p.metadata.finalizers:
                    return False
                kept = [f for f in p.metadata.finalizers if f != TRACKING_FINALIZER]
                del p.metadata.finalizers[:]
                p.metadata.finalizers.extend(kept)
                return True
            try:
                await update_with_retry(self.client.pods, pod, release)
            except errors.ApiError as err:
                log.info("job pod %s/%s: finalizer not removed yet: %s", pod.metadata.namespace, pod.metadata.name,
                         err)
                continue
            done.add(pod.metadata.uid)
        return done

    # ---------------------------------------------------------------- deciding

    def _judge(self, state: _Sync) -> None:
        """Whether the Job has failed or succeeded (upstream's order: the pod failure
        policy, the limits, the deadline, then success)."""
        status, spec = state.status, state.job.spec
        if state.failure is not None:
            return
        if spec.HasField("backoffLimitPerIndex"):
            failed_indexes = parse_indexes(status.failedIndexes) if status.failedIndexes else set()
            if spec.HasField("maxFailedIndexes") and len(failed_indexes) > spec.maxFailedIndexes:
                state.failure = ("MaxFailedIndexesExceeded",
                                 "Job has exceeded the specified maximal number of failed indexes")
                return
        else:
            restarts = sum(c.restartCount for p in state.active for c in p.status.containerStatuses) \
                if spec.template.spec.restartPolicy == "OnFailure" else 0
            if status.failed + len(status.uncountedTerminatedPods.failed) + restarts > spec.backoffLimit:
                state.failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
                return
        if spec.HasField("activeDeadlineSeconds") and status.HasField("startTime") and not spec.suspend \
                and time.time() - status.startTime.seconds >= spec.activeDeadlineSeconds:
            state.failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            return
        if state.indexed:
            completed = parse_indexes(status.completedIndexes)
            if spec.HasField("successPolicy"):
                rule = match_success_policy(spec.successPolicy, completed, spec.completions)
                if rule is not None:
                    state.success = ("SuccessPolicy", f"Matched rules at index {rule}")
                    return
            failed_indexes = parse_indexes(status.failedIndexes) if status.failedIndexes else set()
            if len(completed | failed_indexes) >= spec.completions and not state.active:
                if failed_indexes:
                    state.failure = ("FailedIndexes", "Job has failed indexes")
                else:
                    state.success = ("CompletionsReached", "Reached expected number of succeeded pods")
            return
        succeeded = status.succeeded + len(status.uncountedTerminatedPods.succeeded)
        complete = succeeded >= spec.completions if spec.HasField("completions") \
            else succeeded > 0 and not state.active
        if complete and not state.active:
            state.success = ("CompletionsReached", "Reached expected number of succeeded pods")

    async def _finish(self, state: _Sync) -> None:
        job, status = state.job, state.status
        await self._delete_pods(state, state.active)
        state.active = []
        now = _now()
        if state.failure is not None:
            reason, message = state.failure
            for kind in ("FailureTarget", "Failed"):
                status.conditions.add(type=kind, status="True", reason=reason, message=message, lastProbeTime=now,
                                      lastTransitionTime=now)
            self._event(job, WARNING, reason, message)
            return
        assert state.success is not None
        reason, message = state.success
        if reason == "SuccessPolicy":
            status.conditions.add(type="SuccessCriteriaMet", status="True", reason=reason, message=message,
                                  lastProbeTime=now, lastTransitionTime=now)
        status.conditions.add(type="Complete", status="True", reason=reason, message=message, lastProbeTime=now,
                              lastTransitionTime=now)
        status.completionTime.CopyFrom(now)
        self._event(job, NORMAL, "Completed", "Job completed")

    async def _suspend_or_resume(self, state: _Sync) -> None:
        job, status = state.job, state.status
        suspended = next((c for c in status.conditions if c.type == "Suspended"), None)
        now = _now()
        if job.spec.suspend:
            if state.active:
                await self._delete_pods(state, state.active)
                state.active = []
            if suspended is None or suspended.status != "True":
                if suspended is None:
                    suspended = status.conditions.add(type="Suspended")
                suspended.status, suspended.reason, suspended.message = "True", "JobSuspended", "Job suspended"
                suspended.lastProbeTime.CopyFrom(now)
                suspended.lastTransitionTime.CopyFrom(now)
                self._event(job, NORMAL, "Suspended", "Job suspended")
            return
        if suspended is not None and suspended.status == "True":
            suspended.status, suspended.reason, suspended.message = "False", "JobResumed", "Job resumed"
            suspended.lastProbeTime.CopyFrom(now)
            suspended.lastTransitionTime.CopyFrom(now)
            status.startTime.CopyFrom(now)  # the deadline counts from the resume
            self._event(job, NORMAL, "Resumed", "Job resumed")
        if not status.HasField("startTime"):
            status.startTime.CopyFrom(now)

    # ---------------------------------------------------------------- pods

    async def _manage(self, state: _Sync, key: str) -> None:
        spec = state.job.spec
        if spec.suspend:
            return
        busy = len(state.active) + len(state.blocking)
        if state.indexed:
            await self._manage_indexed(state, key, busy)
            return
        succeeded = state.status.succeeded + len(state.status.uncountedTerminatedPods.succeeded)
        if not spec.HasField("completions"):
            wanted = spec.parallelism if succeeded == 0 else len(state.active)
        else:
            wanted = max(0, min(spec.parallelism, spec.completions - succeeded))
        if len(state.active) > wanted:
            extra = sorted(state.active, key=lambda p: (bool(p.spec.nodeName), is_ready(p)))
            extra = extra[:len(state.active) - wanted]
            await self._delete_pods(state, extra, key)
            return
        missing = wanted - busy
        if missing <= 0:
            return
        failed = [p for p in state.pods if p.status.phase == "Failed" or (_deleting(p) and not _terminal(p))]
        wait = self._backoff_left(failed, state.status.failed + len(state.status.uncountedTerminatedPods.failed))
        if wait > 0:
            self.queue.add_after(key, wait)
            return
        await self._create(state, key, [None] * missing)

    async def _manage_indexed(self, state: _Sync, key: str, busy: int) -> None:
        spec = state.job.spec
        completed = parse_indexes(state.status.completedIndexes)
        failed_indexes = parse_indexes(state.status.failedIndexes) if state.status.failedIndexes else set()
        by_index: dict[int, list[core_pb2.Pod]] = defaultdict(list)
        extra: list[core_pb2.Pod] = []
        for pod in state.active:
            index = index_of(pod)
            if index is None or index >= spec.completions or index in completed or index in failed_indexes:
                extra.append(pod)
            else:
                by_index[index].append(pod)
        for pods in by_index.values():  # one pod per index: the oldest stays
            pods.sort(key=lambda p: (p.metadata.creationTimestamp.seconds, p.metadata.name))
            extra.extend(pods[1:])
        if extra:
            await self._delete_pods(state, extra, key)
            return
        stopping = {index_of(p) for p in state.blocking}
        failures = self._failures_by_index(state)
        pending = [i for i in range(spec.completions)
                   if i not in completed and i not in failed_indexes and i not in by_index and i not in stopping]
        room = spec.parallelism - busy
        ready: list[int | None] = []
        soonest = 0.0
        for index in pending:
            if len(ready) >= room:
                break
            count = failures.get(index, (0, 0))[0]
            if count:
                pods = [p for p in state.pods if index_of(p) == index and p.status.phase == "Failed"]
                wait = self._backoff_left(pods, count)
                if wait > 0:
                    soonest = wait if not soonest else min(soonest, wait)
                    continue
            ready.append(index)
        if soonest:
            self.queue.add_after(key, soonest)
        if ready:
            await self._create(state, key, ready, failures)

    def _backoff_left(self, failed: Sequence[core_pb2.Pod], count: int) -> float:
        """Seconds until a failed pod's replacement may start (upstream's backoff: 10 s
        doubling per failure, up to 6 minutes, from the last failure)."""
        if not failed or count <= 0:
            return 0.0
        delay = min(MAX_BACKOFF, self.backoff_base * 2 ** (count - 1))
        last = max((max((c.state.terminated.finishedAt.seconds for c in p.status.containerStatuses
                         if c.state.HasField("terminated")), default=p.metadata.deletionTimestamp.seconds)
                    for p in failed), default=0)
        return last + delay - time.time()

    async def _create(self, state: _Sync, key: str, indexes: list[int | None],
                      failures: dict[int, tuple[int, int]] | None = None) -> None:
        job = state.job
        self.expectations.expect_creations(key, len(indexes))
        ref = controller_ref(job, API_VERSION, KIND)
        queue = list(indexes)

        async def create() -> None:
            index = queue.pop(0)
            prefix = f"{job.metadata.name}-" if index is None else f"{job.metadata.name}-{index}-"
            pod = pod_from_template(job.spec.template, ref, job.metadata.namespace, prefix)
            pod.metadata.finalizers.append(TRACKING_FINALIZER)
            if index is not None:
                self._indexed_pod(job, pod, index, (failures or {}).get(index, (0, 0)))
            made = await self.client.pods.create(pod)
            self._event(job, NORMAL, "SuccessfulCreate", f"Created pod: {made.metadata.name}")
        created, error = await slow_start(len(indexes), create)
        for _ in range(len(indexes) - created):
            self.expectations.creation_observed(key)
        if error is not None:
            self._event(job, WARNING, "FailedCreate", f"Error creating: {error}")
            raise error

    @staticmethod
    def _indexed_pod(job: batch_pb2.Job, pod: core_pb2.Pod, index: int, failures: tuple[int, int]) -> None:
        """upstream's addCompletionIndexAnnotation, label, env var and hostname."""
        pod.metadata.annotations[COMPLETION_INDEX] = str(index)
        pod.metadata.labels[COMPLETION_INDEX] = str(index)
        if job.spec.HasField("backoffLimitPerIndex"):
            pod.metadata.annotations[INDEX_FAILURE_COUNT] = str(failures[0])
            if failures[1]:
                pod.metadata.annotations[INDEX_IGNORED_FAILURE_COUNT] = str(failures[1])
        if not pod.spec.hostname:
            pod.spec.hostname = f"{job.metadata.name}-{index}"
        for container in (*pod.spec.initContainers, *pod.spec.containers):
            if any(e.name == "JOB_COMPLETION_INDEX" for e in container.env):
                continue
            env = container.env.add(name="JOB_COMPLETION_INDEX")
            env.valueFrom.fieldRef.fieldPath = f"metadata.annotations['{COMPLETION_INDEX}']"

    async def _delete_pods(self, state: _Sync, pods: Sequence[core_pb2.Pod], key: str = "") -> None:
        """Delete pods the Job no longer wants; their finalizer goes first, so that a pod
        the controller deleted is never counted as failed (upstream's deleteJobPods)."""
        if not pods:
            return
        if key:
            self.expectations.expect_deletions(key, [object_key(p) for p in pods])
        await self._untrack([p for p in pods if TRACKING_FINALIZER in p.metadata.finalizers])
        for pod in pods:
            try:
                await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
                self._event(state.job, NORMAL, "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")
            except errors.NotFound:
                if key:
                    self.expectations.deletion_observed(key, object_key(pod))

    # ---------------------------------------------------------------- status

    async def _write_status(self, state: _Sync) -> None:
        status, job = state.status, state.job
        status.active = len(state.active)
        status.ready = sum(1 for p in state.active if is_ready(p))
        status.terminating = len([p for p in state.pods if _deleting(p) and not _terminal(p)])
        written = await self._write(job, status) if status != job.status else job
        if written is None:
            return
        spec = written.spec
        if spec.HasField("activeDeadlineSeconds") and status.HasField("startTime") and finished(written) is None \
                and not spec.suspend:
            left = status.startTime.seconds + spec.activeDeadlineSeconds - time.time()
            self.queue.add_after(object_key(written), max(left, 0) + 0.5)
        done = finished(written)
        if done is not None:
            await self._expire(written, done)

    async def _write(self, job: batch_pb2.Job, status: batch_pb2.JobStatus) -> batch_pb2.Job | None:
        updated = batch_pb2.Job()
        updated.CopyFrom(job)
        updated.status.CopyFrom(status)
        try:
            return await self.client.jobs.update_status(updated)
        except errors.NotFound:
            return None

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


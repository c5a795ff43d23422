"""The CronJob controller, as upstream's pkg/controller/cronjob (v2): at each time the
schedule names (in spec.timeZone, else the controller manager's zone) a Job from the
job template, named `<cronjob>-<minutes since the epoch>` so that a restarted controller
cannot make the same run twice.

Runs missed while the controller was down (or suspended) are not made up for: only the
most recent missed time starts, and more than 100 missed get upstream's
TooManyMissedTimes warning; startingDeadlineSeconds bounds how late a run may start
(MissSchedule when it is past). concurrencyPolicy Forbid skips a run while one is
active (JobAlreadyActive), Replace deletes the active ones first. status.active lists the
running Jobs, lastScheduleTime and lastSuccessfulTime say when; finished Jobs beyond the
history limits are deleted, oldest first."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from controllers.controllerref import controller_of, controller_ref
from controllers.job import finished
from kubeling import cron, errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import batch_pb2, meta_pb2

__all__ = ["CronJobController", "SCHEDULED_TIMESTAMP", "job_name", "most_recent"]

log = logging.getLogger(__name__)

API_VERSION, KIND = "batch/v1", "CronJob"
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
_TOO_MANY = 100  # upstream: more missed start times than this is worth a warning


def job_name(cj: batch_pb2.CronJob, scheduled: dt.datetime) -> str:
    """upstream's getJobName: the scheduled time in minutes since the epoch."""
    return f"{cj.metadata.name}-{int(scheduled.timestamp()) // 60}"


def most_recent(schedule: cron.Schedule, earliest: dt.datetime, now: dt.datetime) -> tuple[dt.datetime | None, int]:
    """The latest scheduled time in (earliest, now] and how many there were (counted up to
    _TOO_MANY + 1), as upstream's mostRecentScheduleTime."""
    latest, count = None, 0
    for t in schedule.times(earliest, now):
        latest, count = t, count + 1
        if count > _TOO_MANY:
            break
    if count > _TOO_MANY:
        latest = schedule.last_until(earliest, now)  # too many to walk: found backwards from now
    return latest, count


def _time(ts: Any) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, dt.timezone.utc)


def _succeeded(job: batch_pb2.Job) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions)


class CronJobController:
    def __init__(self, client: Client, cronjobs: Informer[batch_pb2.CronJob], jobs: Informer[batch_pb2.Job],
                 recorder: EventRecorder, workers: int = 2) -> None:
        self.client = client
        self.cronjobs = cronjobs
        self.jobs = jobs
        self.recorder = recorder
        self.queue = WorkQueue("cronjob")
        self.workers = Workers(self.queue, self.sync, workers)
        self.now = lambda: dt.datetime.now(dt.timezone.utc)  # a test may move the clock
        cronjobs.add_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                             on_delete=self._enqueue)
        jobs.add_handler(on_add=self._job_changed, on_update=lambda old, new: self._job_changed(new),
                         on_delete=self._job_changed)

    def _enqueue(self, cj: batch_pb2.CronJob) -> None:
        self.queue.add(object_key(cj))

    def _job_changed(self, job: batch_pb2.Job) -> None:
        ref = controller_of(job)
        if ref is not None and ref.kind == KIND:
            self.queue.add(f"{job.metadata.namespace}/{ref.name}")

    def _event(self, cj: batch_pb2.CronJob, kind: str, reason: str, message: str) -> None:
        self.recorder.object_event(cj, API_VERSION, KIND, kind, reason, message)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        cj = self.cronjobs.store.get(key)
        if cj is None or cj.metadata.HasField("deletionTimestamp"):
            return
        uid = cj.metadata.uid
        jobs = [j for j in self.jobs.store.by_index(INDEX_NAMESPACE, cj.metadata.namespace)
                if (ref := controller_of(j)) is not None and ref.uid == uid]
        status = batch_pb2.CronJobStatus()
        status.CopyFrom(cj.status)
        self._reconcile_active(cj, jobs, status)
        requeue = await self._schedule(cj, status)
        if status != cj.status:
            updated = batch_pb2.CronJob()
            updated.CopyFrom(cj)
            updated.status.CopyFrom(status)
            try:
                await self.client.cronjobs.update_status(updated)
            except errors.NotFound:
                return
        await self._clean_history(cj, jobs)
        if requeue is not None:
            self.queue.add_after(key, max(requeue, 0.0) + 0.1)

    def _reconcile_active(self, cj: batch_pb2.CronJob, jobs: list[batch_pb2.Job],
                          status: batch_pb2.CronJobStatus) -> None:
        """status.active as the Jobs are: finished ones leave it (SawCompletedJob), ours not
        listed join it (a controller that died between making a Job and writing status),
        listed ones that are gone leave it (MissingJob)."""
        by_uid = {j.metadata.uid: j for j in jobs}
        active = list(status.active)
        kept = []
        for ref in active:
            job = by_uid.get(ref.uid)
            if job is None:
                if self.jobs.store.get(f"{ref.namespace}/{ref.name}") is None:
                    self._event(cj, NORMAL, "MissingJob", f"Active job went missing: {ref.name}")
                    continue
                kept.append(ref)
                continue
            done = finished(job)
            if done is not None:
                self._event(cj, NORMAL, "SawCompletedJob", f"Saw completed job: {job.metadata.name}, "
                                                           f"condition: {done.type}")
                continue
            kept.append(ref)
        listed = {r.uid for r in kept}
        for job in jobs:
            if finished(job) is None and job.metadata.uid not in listed \
                    and not job.metadata.HasField("deletionTimestamp"):
                kept.append(self._reference(job))
        for job in jobs:
            if _succeeded(job) and job.status.HasField("completionTime") and (
                    not status.HasField("lastSuccessfulTime")
                    or job.status.completionTime.seconds > status.lastSuccessfulTime.seconds):
                status.lastSuccessfulTime.CopyFrom(job.status.completionTime)
        del status.active[:]
        status.active.extend(kept)

    @staticmethod
    def _reference(job: batch_pb2.Job) -> meta_pb2.ObjectReference:
        return meta_pb2.ObjectReference(kind="Job", namespace=job.metadata.namespace, name=job.metadata.name,
                                        uid=job.metadata.uid, apiVersion="batch/v1",
                                        resourceVersion=job.metadata.resourceVersion)

    async def _schedule(self, cj: batch_pb2.CronJob, status: batch_pb2.CronJobStatus) -> float | None:
        """Start the run that is due, if any; seconds until the next one."""
        spec = cj.spec
        try:
            schedule = cron.parse(spec.schedule, cron.zone(spec.timeZone if spec.HasField("timeZone") else None))
        except cron.CronError as err:
            self._event(cj, WARNING, "UnparseableSchedule" if "zone" not in str(err) else "UnknownTimeZone",
                        f"unparseable schedule: {spec.schedule!r} : {err}")
            return None
        now = self.now()
        if spec.suspend:
            return None
        earliest = _time(status.lastScheduleTime) if status.HasField("lastScheduleTime") \
            else _time(cj.metadata.creationTimestamp)
        if spec.HasField("startingDeadlineSeconds"):
            earliest = max(earliest, now - dt.timedelta(seconds=spec.startingDeadlineSeconds))
        scheduled, missed = most_recent(schedule, earliest, now)
        following = schedule.next_after(now)
        wait = (following - now).total_seconds()
        if scheduled is None:
            return wait
        if missed > _TOO_MANY:
            self._event(cj, WARNING, "TooManyMissedTimes", "too many missed start times. Set or decrease "
                                                           ".spec.startingDeadlineSeconds or check clock skew")
        if spec.HasField("startingDeadlineSeconds") and \
                scheduled + dt.timedelta(seconds=spec.startingDeadlineSeconds) < now:
            self._event(cj, WARNING, "MissSchedule", "Missed scheduled time to start a job: "
                                                     f"{scheduled.strftime('%a, %d %b %Y %H:%M:%S %z')}")
            return wait
        name = job_name(cj, scheduled)
        if status.HasField("lastScheduleTime") and _time(status.lastScheduleTime) >= scheduled:
            return wait  # this run was started already
        if any(r.name == name for r in status.active):
            # started by an earlier life of this controller that died before recording it:
            # record it now, or once its Job finishes and leaves the list the run looks due again
            status.lastScheduleTime.FromSeconds(int(scheduled.timestamp()))
            return wait
        if spec.concurrencyPolicy == "Forbid" and status.active:
            self._event(cj, NORMAL, "JobAlreadyActive", "Not starting job because prior execution is running and "
                                                        "concurrency policy is Forbid")
            return wait
        if spec.concurrencyPolicy == "Replace":
            for ref in list(status.active):
                try:
                    await self.client.jobs.delete(ref.name, ref.namespace, uid=ref.uid,
                                                  propagation_policy="Background")
                except errors.NotFound:
                    pass
                self._event(cj, NORMAL, "SuccessfulDelete", f"Deleted job {ref.name}")
            del status.active[:]
        job = self._job(cj, name, scheduled)
        try:
            made = await self.client.jobs.create(job)
        except errors.AlreadyExists:
            # made by an earlier life of this controller: it is this run's
            try:
                made = await self.client.jobs.get(name, cj.metadata.namespace)
            except errors.NotFound:
                return 1.0
            ref = controller_of(made)
            if ref is None or ref.uid != cj.metadata.uid:
                self._event(cj, WARNING, "FailedCreate", f"Error creating job: jobs.batch \"{name}\" already exists")
                return wait
        except errors.ApiError as err:
            self._event(cj, WARNING, "FailedCreate", f"Error creating job: {err.message}")
            raise
        else:
            self._event(cj, NORMAL, "SuccessfulCreate", f"Created job {made.metadata.name}")
        if finished(made) is None and not any(r.uid == made.metadata.uid for r in status.active):
            status.active.append(self._reference(made))
        status.lastScheduleTime.FromSeconds(int(scheduled.timestamp()))
        return wait

    def _job(self, cj: batch_pb2.CronJob, name: str, scheduled: dt.datetime) -> batch_pb2.Job:
        """upstream's getJobFromTemplate2."""
        template = cj.spec.jobTemplate
        job = batch_pb2.Job(spec=template.spec)
        meta = job.metadata
        meta.name, meta.namespace = name, cj.metadata.namespace
        meta.labels.update(template.metadata.labels)
        meta.annotations.update(template.metadata.annotations)
        tz = cron.zone(cj.spec.timeZone if cj.spec.HasField("timeZone") else None)
        meta.annotations[SCHEDULED_TIMESTAMP] = scheduled.astimezone(tz).isoformat()
        meta.ownerReferences.append(controller_ref(cj, API_VERSION, KIND))
        return job

    async def _clean_history(self, cj: batch_pb2.CronJob, jobs: list[batch_pb2.Job]) -> None:
        """Finished Jobs beyond successfulJobsHistoryLimit and failedJobsHistoryLimit, oldest first."""
        done = [j for j in jobs if finished(j) is not None and not j.metadata.HasField("deletionTimestamp")]
        for succeeded, limit in ((True, cj.spec.successfulJobsHistoryLimit), (False, cj.spec.failedJobsHistoryLimit)):
            group = sorted((j for j in done if _succeeded(j) == succeeded),
                           key=lambda j: (j.status.startTime.seconds or j.metadata.creationTimestamp.seconds,
                                          j.metadata.name))
            for job in group[:max(0, len(group) - limit)]:
                try:
                    await self.client.jobs.delete(job.metadata.name, job.metadata.namespace, uid=job.metadata.uid,
                                                  propagation_policy="Background")
                except errors.NotFound:
                    continue
                self._event(cj, NORMAL, "SuccessfulDelete", f"Deleted job {job.metadata.name}")

"""The CronJob controller (controllers/cronjob.py) against a real apiserver, its clock moved
by the test (`controller.now`): a Job per scheduled time with upstream's name and
scheduled-timestamp annotation, Forbid and Replace, the most recent of many missed runs
only (TooManyMissedTimes), startingDeadlineSeconds, suspend, and the history limits."""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from controllers.controllerref import controller_ref, update_with_retry
from controllers.cronjob import SCHEDULED_TIMESTAMP, job_name
from controllers.manager import ControllerManager
from kubeling.client import Client
from protos.kubeling.v1 import batch_pb2, core_pb2, meta_pb2
from tests.objects import pod, update_status
from tests.wait import holds, until


def cronjob(name: str, schedule: str = "* * * * *", **spec: Any) -> batch_pb2.CronJob:
    template = core_pb2.PodTemplateSpec(spec=core_pb2.PodSpec(containers=pod("t").spec.containers,
                                                              restartPolicy="OnFailure"))
    return batch_pb2.CronJob(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=batch_pb2.CronJobSpec(
        schedule=schedule, jobTemplate=batch_pb2.JobTemplateSpec(
            metadata=meta_pb2.ObjectMeta(labels={"cron": name}), spec=batch_pb2.JobSpec(template=template)),
        **spec))


class Clock:
    """The controller's clock, moved by the test."""

    def __init__(self, manager: ControllerManager, start: dt.datetime) -> None:
        self.at = start
        manager.cronjob.now = lambda: self.at
        self.manager = manager

    def move(self, seconds: float, name: str) -> None:
        self.at += dt.timedelta(seconds=seconds)
        self.manager.cronjob.queue.add(f"default/{name}")

    def next_minute(self, name: str, past: int = 5) -> None:
        """To `past` seconds after the next minute starts (its run `past` seconds due)."""
        self.at = self.at.replace(second=0, microsecond=0) + dt.timedelta(minutes=1, seconds=past)
        self.move(0, name)


async def jobs_of(client: Client, name: str) -> list[batch_pb2.Job]:
    jobs = (await client.jobs.list("default", label_selector=f"cron={name}")).items
    return sorted((j for j in jobs if not j.metadata.HasField("deletionTimestamp")), key=lambda j: j.metadata.name)


async def reasons(client: Client, name: str) -> list[str]:
    events = (await client.events.list_all("default"))[0]
    return [e.reason for e in events if e.involvedObject.name == name and e.involvedObject.kind == "CronJob"]


async def complete(client: Client, job: batch_pb2.Job, kind: str = "Complete") -> None:
    now = Timestamp()
    now.GetCurrentTime()

    def end(j: batch_pb2.Job) -> None:
        j.status.conditions.add(type=kind, status="True", lastTransitionTime=now)
        j.status.startTime.CopyFrom(now)
        if kind == "Complete":
            j.status.completionTime.CopyFrom(now)
            j.status.succeeded = 1
    await update_status(client.jobs, job.metadata.name, "default", end)


async def _suspend(client: Client, name: str, suspend: bool) -> None:
    """As kubectl does it: again on a conflict (the controller writes the status)."""
    def change(cj: batch_pb2.CronJob) -> bool:
        cj.spec.suspend = suspend
        return True
    await update_with_retry(client.cronjobs, await client.cronjobs.get(name, "default"), change)


def _created(cj: batch_pb2.CronJob) -> dt.datetime:
    return dt.datetime.fromtimestamp(cj.metadata.creationTimestamp.seconds, dt.timezone.utc)


async def test_a_job_per_scheduled_time_and_forbid(client: Client, manager: ControllerManager) -> None:
    made = await client.cronjobs.create(cronjob("hello", concurrencyPolicy="Forbid"))
    clock = Clock(manager, _created(made))
    clock.move(61, "hello")
    (job,) = await until(lambda: jobs_of(client, "hello"), "the first run", check=lambda js: len(js) == 1)
    minute = int(clock.at.timestamp()) // 60
    assert job.metadata.name == f"hello-{minute}"
    assert job.metadata.ownerReferences[0].kind == "CronJob" and job.metadata.ownerReferences[0].controller
    scheduled = dt.datetime.fromisoformat(job.metadata.annotations[SCHEDULED_TIMESTAMP])
    assert int(scheduled.timestamp()) == minute * 60
    cj = await until(lambda: client.cronjobs.get("hello", "default"), "status", check=lambda c: len(c.status.active))
    assert cj.status.active[0].name == job.metadata.name and cj.status.lastScheduleTime.seconds == minute * 60

    clock.move(60, "hello")  # the next run is due, but one is active: Forbid skips it
    await until(lambda: reasons(client, "hello"), "JobAlreadyActive", check=lambda r: "JobAlreadyActive" in r)
    assert len(await jobs_of(client, "hello")) == 1
    await complete(client, job)
    # finished: it leaves status.active and the due run starts
    await until(lambda: jobs_of(client, "hello"), "the skipped run once the first is done",
                check=lambda js: len(js) == 2)
    cj = await until(lambda: client.cronjobs.get("hello", "default"), "lastSuccessfulTime",
                     check=lambda c: c.status.HasField("lastSuccessfulTime"))
    assert [r.name for r in cj.status.active] != [job.metadata.name]
    assert "SawCompletedJob" in await reasons(client, "hello")


async def test_replace_deletes_the_active_run(client: Client, manager: ControllerManager) -> None:
    made = await client.cronjobs.create(cronjob("swap", concurrencyPolicy="Replace"))
    clock = Clock(manager, _created(made))
    clock.move(61, "swap")
    (first,) = await until(lambda: jobs_of(client, "swap"), "the first run", check=lambda js: len(js) == 1)
    clock.move(60, "swap")
    (second,) = await until(lambda: jobs_of(client, "swap"), "the first replaced",
                            check=lambda js: len(js) == 1 and js[0].metadata.uid != first.metadata.uid)
    cj = await until(lambda: client.cronjobs.get("swap", "default"), "status.active the new one",
                     check=lambda c: [r.uid for r in c.status.active] == [second.metadata.uid])
    assert cj.status.lastScheduleTime.seconds // 60 == int(clock.at.timestamp()) // 60


async def test_many_missed_runs_start_the_latest_only(client: Client, manager: ControllerManager) -> None:
    made = await client.cronjobs.create(cronjob("late"))
    clock = Clock(manager, _created(made))
    clock.move(200 * 60 + 5, "late")  # 200 runs missed while "the controller was down"
    (job,) = await until(lambda: jobs_of(client, "late"), "one run", check=lambda js: len(js) == 1)
    assert job.metadata.name == f"late-{int(clock.at.timestamp()) // 60}"
    assert "TooManyMissedTimes" in await until(lambda: reasons(client, "late"), "the warning",
                                               check=lambda r: "TooManyMissedTimes" in r)
    await holds(lambda: jobs_of(client, "late"), "no more runs for the missed times", 0.5,
                check=lambda js: len(js) == 1)


async def test_deadline_suspend_and_history_limits(client: Client, manager: ControllerManager) -> None:
    made = await client.cronjobs.create(cronjob("keep", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1,
                                                startingDeadlineSeconds=30))
    clock = Clock(manager, _created(made))
    for i in range(3):
        clock.next_minute("keep")
        runs = await until(lambda: jobs_of(client, "keep"), f"run {i + 1}",
                           check=lambda js: len([j for j in js if not j.status.conditions]) == 1)
        active = next(j for j in runs if not j.status.conditions)
        await complete(client, active, "Complete" if i < 2 else "Failed")
    # one succeeded and one failed run kept
    kept = await until(lambda: jobs_of(client, "keep"), "history trimmed", check=lambda js: len(js) == 2)
    assert sorted(j.status.conditions[0].type for j in kept) == ["Complete", "Failed"]
    assert "SuccessfulDelete" in await reasons(client, "keep")

    await _suspend(client, "keep", True)
    # the controller must know of the suspension before its clock moves (a loaded host's
    # watch may bring it later than the write returns)
    await until(lambda: manager.cronjobs.store.get("default/keep"), "the suspension seen",
                check=lambda cj: cj is not None and cj.spec.suspend)
    clock.next_minute("keep")
    await holds(lambda: jobs_of(client, "keep"), "suspended: no run", 0.5, check=lambda js: len(js) == 2)
    clock.next_minute("keep", past=45)  # resumed 45 s after the due time, past startingDeadlineSeconds
    await _suspend(client, "keep", False)
    await holds(lambda: jobs_of(client, "keep"), "too late to start: no run", 0.5, check=lambda js: len(js) == 2)
    clock.next_minute("keep")
    await until(lambda: jobs_of(client, "keep"), "the next run on time", check=lambda js: len(js) == 3)


async def test_a_run_made_before_the_controller_died_is_not_made_again(client: Client,
                                                                        manager: ControllerManager) -> None:
    """The controller made the Job, then died before writing the CronJob's status: its
    successor finds the run's Job by its name and makes no second one."""
    made = await client.cronjobs.create(cronjob("once"))
    clock = Clock(manager, _created(made))
    # the clock moves to the run only once the predecessor's Job is there: moved before,
    # a sync of the CronJob in between (its ADDED, late on a loaded machine) makes the run
    at = clock.at.replace(second=0, microsecond=0) + dt.timedelta(minutes=1, seconds=5)
    scheduled = at.replace(second=0)
    job = batch_pb2.Job(metadata=meta_pb2.ObjectMeta(
        name=job_name(made, scheduled), namespace="default", labels={"cron": "once"},
        ownerReferences=[controller_ref(made, "batch/v1", "CronJob")]), spec=made.spec.jobTemplate.spec)
    await client.jobs.create(job)
    # a successor starts by listing the Jobs: it knows this one before its first tick
    await until(lambda: manager.jobs.store.get(f"default/{job.metadata.name}"), "the run's Job seen",
                check=lambda found: found is not None)
    # and the CronJob itself: a tick for a CronJob its informer has not seen yet does nothing
    await until(lambda: manager.cronjobs.store.get("default/once"), "the CronJob seen",
                check=lambda found: found is not None)
    clock.at = at
    clock.move(0, "once")
    cj = await until(lambda: client.cronjobs.get("once", "default"), "the run recorded",
                     check=lambda c: c.status.lastScheduleTime.seconds == int(scheduled.timestamp()))
    assert [r.name for r in cj.status.active] == [job.metadata.name]
    await holds(lambda: jobs_of(client, "once"), "no second Job for the run", 0.5, check=lambda js: len(js) == 1)

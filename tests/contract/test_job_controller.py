"""The Job controller's complete API (controllers/job.py) against a real apiserver: Indexed
completion (index annotation, label, hostname, JOB_COMPLETION_INDEX, completedIndexes),
pods tracked with the job-tracking finalizer (a deleted pod counted, never lost), the
podFailurePolicy (FailJob on an exit code, Ignore on a condition), backoffLimitPerIndex
and failedIndexes, a successPolicy, suspend and resume, podReplacementPolicy Failed;
upstream's validation messages for them.

No kubelet runs here: `finish()` reports a pod's end as a kubelet would (the one thing
faked, so that a test decides how each pod ends)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from controllers.controllerref import update_with_retry
from controllers.jobutil import COMPLETION_INDEX, TRACKING_FINALIZER
from controllers.manager import ControllerManager, ManagerConfig
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import batch_pb2, core_pb2, meta_pb2
from tests.objects import pod, update_status
from tests.wait import holds, until


def job(name: str, **spec: Any) -> batch_pb2.Job:
    template = core_pb2.PodTemplateSpec(spec=core_pb2.PodSpec(containers=pod("t").spec.containers,
                                                              restartPolicy="Never"))
    return batch_pb2.Job(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                         spec=batch_pb2.JobSpec(template=template, **spec))


async def pods_of(client: Client, name: str, *, live: bool = True) -> list[core_pb2.Pod]:
    pods = (await client.pods.list("default", label_selector=f"batch.kubernetes.io/job-name={name}")).items
    pods = [p for p in pods if not live or (p.status.phase not in ("Succeeded", "Failed")
                                            and not p.metadata.HasField("deletionTimestamp"))]
    return sorted(pods, key=lambda p: (p.metadata.annotations.get(COMPLETION_INDEX, ""), p.metadata.name))


async def finish(client: Client, pods: Sequence[core_pb2.Pod], exit_code: int = 0,
                 condition: str = "") -> None:
    """As a kubelet reports a pod's end: its container terminated with this exit code."""
    def ended(current: core_pb2.Pod) -> None:
        current.status.phase = "Succeeded" if exit_code == 0 else "Failed"
        status = current.status.containerStatuses.add(name="main", image="busybox")
        status.state.terminated.exitCode = exit_code
        status.state.terminated.finishedAt.GetCurrentTime()
        if condition:
            current.status.conditions.add(type=condition, status="True")
    for p in pods:
        await update_status(client.pods, p.metadata.name, "default", ended)


async def get(client: Client, name: str) -> batch_pb2.Job:
    return await client.jobs.get(name, "default")


def condition(j: batch_pb2.Job, kind: str) -> batch_pb2.JobCondition | None:
    return next((c for c in j.status.conditions if c.type == kind and c.status == "True"), None)


async def test_indexed_job_pods_know_their_index(client: Client, manager: ControllerManager) -> None:
    await client.jobs.create(job("idx", completionMode="Indexed", completions=3, parallelism=2))
    pods = await until(lambda: pods_of(client, "idx"), "two pods", check=lambda ps: len(ps) == 2)
    assert [p.metadata.annotations[COMPLETION_INDEX] for p in pods] == ["0", "1"]
    first = pods[0]
    assert first.metadata.labels[COMPLETION_INDEX] == "0" and first.spec.hostname == "idx-0"
    assert first.metadata.name.startswith("idx-0-") and TRACKING_FINALIZER in first.metadata.finalizers
    (env,) = [e for e in first.spec.containers[0].env if e.name == "JOB_COMPLETION_INDEX"]
    assert env.valueFrom.fieldRef.fieldPath == f"metadata.annotations['{COMPLETION_INDEX}']"

    await finish(client, [pods[1]])
    await until(lambda: get(client, "idx"), "index 1 completed and counted",
                check=lambda j: j.status.completedIndexes == "1" and j.status.succeeded == 1)
    third = await until(lambda: pods_of(client, "idx"), "index 2 started",
                        check=lambda ps: [p.metadata.annotations[COMPLETION_INDEX] for p in ps] == ["0", "2"])
    done = await client.pods.get(pods[1].metadata.name, "default")
    assert TRACKING_FINALIZER not in done.metadata.finalizers  # counted, then let go
    await finish(client, third)
    j = await until(lambda: get(client, "idx"), "complete", check=lambda j: condition(j, "Complete") is not None)
    assert j.status.completedIndexes == "0-2" and j.status.succeeded == 3 and j.status.active == 0
    assert not j.status.HasField("uncountedTerminatedPods")


async def test_a_deleted_pod_is_counted_as_failed_and_replaced(client: Client, manager: ControllerManager) -> None:
    manager.job.backoff_base = 0.1
    await client.jobs.create(job("del", backoffLimit=3))
    (first,) = await until(lambda: pods_of(client, "del"), "the pod", check=lambda ps: len(ps) == 1)
    await client.pods.delete(first.metadata.name, "default")
    j = await until(lambda: get(client, "del"), "counted as failed", check=lambda j: j.status.failed == 1)
    assert j.status.succeeded == 0
    (second,) = await until(lambda: pods_of(client, "del"), "a replacement",
                            check=lambda ps: len(ps) == 1 and ps[0].metadata.uid != first.metadata.uid)
    await until(lambda: client.pods.list("default"), "the deleted pod gone once its finalizer is",
                check=lambda ps: first.metadata.uid not in {p.metadata.uid for p in ps.items})
    await finish(client, [second])
    j = await until(lambda: get(client, "del"), "complete", check=lambda j: condition(j, "Complete") is not None)
    assert (j.status.succeeded, j.status.failed) == (1, 1)


def _policy(*rules: batch_pb2.PodFailurePolicyRule) -> batch_pb2.PodFailurePolicy:
    return batch_pb2.PodFailurePolicy(rules=list(rules))


async def test_pod_failure_policy_fail_job_and_ignore(client: Client, manager: ControllerManager) -> None:
    manager.job.backoff_base = 0.1
    policy = _policy(
        batch_pb2.PodFailurePolicyRule(action="FailJob", onExitCodes=batch_pb2.PodFailurePolicyOnExitCodesRequirement(
            containerName="main", operator="In", values=[42])),
        batch_pb2.PodFailurePolicyRule(action="Ignore", onPodConditions=[
            batch_pb2.PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget")]))
    made = await client.jobs.create(job("pfp", podFailurePolicy=policy, backoffLimit=0, parallelism=2,
                                        completions=4))
    assert made.spec.podReplacementPolicy == "Failed"
    assert made.spec.podFailurePolicy.rules[1].onPodConditions[0].status == "True"
    pods = await until(lambda: pods_of(client, "pfp"), "two pods", check=lambda ps: len(ps) == 2)
    await finish(client, [pods[0]], exit_code=137, condition="DisruptionTarget")  # ignored: not a failure
    await until(lambda: pods_of(client, "pfp"), "replaced", check=lambda ps: len(ps) == 2 and
                pods[0].metadata.uid not in {p.metadata.uid for p in ps})
    j = await get(client, "pfp")
    assert j.status.failed == 0 and condition(j, "Failed") is None  # backoffLimit 0, yet not failed
    await finish(client, [pods[1]], exit_code=42)
    j = await until(lambda: get(client, "pfp"), "failed at once", check=lambda j: condition(j, "Failed") is not None)
    failed = condition(j, "Failed")
    assert failed is not None and failed.reason == "PodFailurePolicy"
    assert failed.message == f"Container main for pod default/{pods[1].metadata.name} failed with exit code 42 " \
                             "matching FailJob rule at index 0"
    assert condition(j, "FailureTarget") is not None
    await until(lambda: pods_of(client, "pfp"), "the other pod deleted", check=lambda ps: not ps)


async def test_backoff_limit_per_index_and_failed_indexes(client: Client, manager: ControllerManager) -> None:
    manager.job.backoff_base = 0.1
    made = await client.jobs.create(job("per", completionMode="Indexed", completions=2, parallelism=2,
                                        backoffLimitPerIndex=1))
    assert made.spec.backoffLimit == 2**31 - 1
    pods = await until(lambda: pods_of(client, "per"), "two pods", check=lambda ps: len(ps) == 2)
    await finish(client, [pods[0]])
    for attempt in range(2):  # index 1 fails twice: once more than its limit
        current = await until(lambda: pods_of(client, "per"), f"index 1, attempt {attempt + 1}",
                              check=lambda ps: len(ps) == 1 and ps[0].metadata.annotations[COMPLETION_INDEX] == "1")
        assert current[0].metadata.annotations["batch.kubernetes.io/job-index-failure-count"] == str(attempt)
        await finish(client, current, exit_code=1)
    j = await until(lambda: get(client, "per"), "failed", check=lambda j: condition(j, "Failed") is not None)
    assert j.status.failedIndexes == "1" and j.status.completedIndexes == "0"
    failed = condition(j, "Failed")
    assert failed is not None and (failed.reason, failed.message) == ("FailedIndexes", "Job has failed indexes")


async def test_success_policy_ends_the_job_early(client: Client, manager: ControllerManager) -> None:
    policy = batch_pb2.SuccessPolicy(rules=[batch_pb2.SuccessPolicyRule(succeededIndexes="0")])
    await client.jobs.create(job("lead", completionMode="Indexed", completions=3, parallelism=3,
                                 successPolicy=policy))
    pods = await until(lambda: pods_of(client, "lead"), "three pods", check=lambda ps: len(ps) == 3)
    await finish(client, [pods[0]])
    j = await until(lambda: get(client, "lead"), "complete", check=lambda j: condition(j, "Complete") is not None)
    met = condition(j, "SuccessCriteriaMet")
    assert met is not None and (met.reason, met.message) == ("SuccessPolicy", "Matched rules at index 0")
    await until(lambda: pods_of(client, "lead"), "the others deleted", check=lambda ps: not ps)
    assert j.status.failed == 0


async def _suspend(client: Client, name: str, suspend: bool) -> None:
    """As kubectl does it: again on a conflict (the controller writes the status)."""
    def change(j: batch_pb2.Job) -> bool:
        j.spec.suspend = suspend
        return True
    await update_with_retry(client.jobs, await get(client, name), change)


async def test_suspend_and_resume(client: Client, manager: ControllerManager) -> None:
    await client.jobs.create(job("later", suspend=True, parallelism=2, completions=2))
    j = await until(lambda: get(client, "later"), "suspended", check=lambda j: condition(j, "Suspended") is not None)
    assert not j.status.HasField("startTime") and not await pods_of(client, "later")
    await _suspend(client, "later", False)
    pods = await until(lambda: pods_of(client, "later"), "started", check=lambda ps: len(ps) == 2)
    j = await until(lambda: get(client, "later"), "resumed", check=lambda j: j.status.HasField("startTime"))
    resumed = next(c for c in j.status.conditions if c.type == "Suspended")
    assert (resumed.status, resumed.reason) == ("False", "JobResumed")
    await _suspend(client, "later", True)
    await until(lambda: pods_of(client, "later"), "its pods deleted", check=lambda ps: not ps)
    j = await until(lambda: get(client, "later"), "suspended again", check=lambda j: j.status.active == 0 and
                    condition(j, "Suspended") is not None)
    assert j.status.failed == 0  # deleted by the controller: not failures
    await holds(lambda: get(client, "later"), "no pod while suspended", 0.5, check=lambda j: j.status.active == 0)
    assert pods  # they ran before


async def test_job_api_validation(client: Client) -> None:
    async def invalid(obj: batch_pb2.Job) -> str:
        with pytest.raises(errors.Invalid) as err:
            await client.jobs.create(obj)
        return err.value.message

    assert "spec.completions: Required value: when completion mode is Indexed" in await invalid(
        job("a", completionMode="Indexed", parallelism=2))
    assert "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode" in await invalid(
        job("b", backoffLimitPerIndex=1))
    bad = job("c", podFailurePolicy=_policy(batch_pb2.PodFailurePolicyRule(
        action="FailJob", onExitCodes=batch_pb2.PodFailurePolicyOnExitCodesRequirement(operator="In", values=[0]))))
    bad.spec.template.spec.restartPolicy = "OnFailure"
    message = await invalid(bad)
    assert 'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when ' \
           'podFailurePolicy is specified' in message
    assert "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: 0: must not be 0 for the In " \
           "operator" in message
    assert "requires the backoffLimitPerIndex to be set" in await invalid(job("d", podFailurePolicy=_policy(
        batch_pb2.PodFailurePolicyRule(action="FailIndex", onExitCodes=(
            batch_pb2.PodFailurePolicyOnExitCodesRequirement(operator="In", values=[3]))))))
    assert "spec.successPolicy: Invalid value: \"\": requires indexed completion mode" in await invalid(job(
        "e", successPolicy=batch_pb2.SuccessPolicy(rules=[batch_pb2.SuccessPolicyRule(succeededCount=1)])))
    assert "at least one of succeededCount or succeededIndexes must be specified" in await invalid(job(
        "f", completionMode="Indexed", completions=2, successPolicy=batch_pb2.SuccessPolicy(
            rules=[batch_pb2.SuccessPolicyRule()])))


async def test_a_controller_manager_killed_mid_run_loses_no_count_and_makes_no_extra_pod(
        client: Client, manager: ControllerManager) -> None:
    made: set[str] = set()
    rv = (await client.pods.list("default")).metadata.resourceVersion

    async def record() -> None:
        async for ev in client.pods.watch("default", resource_version=rv):
            if ev.type == "ADDED":
                made.add(ev.object.metadata.name)
    watcher = asyncio.create_task(record())
    await client.jobs.create(job("crash", completions=6, parallelism=3))
    first = await until(lambda: pods_of(client, "crash"), "three pods", check=lambda ps: len(ps) == 3)
    await manager.stop(release=False)  # dies: its expectations and memory are gone
    await finish(client, first[:2])  # two end while no controller runs
    await client.pods.delete(first[2].metadata.name, "default")  # one is deleted meanwhile
    successor = ControllerManager(Client(client.address), ManagerConfig(leader_elect=False, job_backoff_base=0.1))
    await successor.start()
    try:
        async def drive() -> batch_pb2.Job | None:
            await finish(client, await pods_of(client, "crash"))
            current = await get(client, "crash")
            return current if condition(current, "Complete") is not None else None
        done = await until(drive, "complete after the restart")
    finally:
        await successor.stop()
        watcher.cancel()
    assert (done.status.succeeded, done.status.failed) == (6, 1)  # the deleted pod counted as failed
    assert len(made) == 7, sorted(made)  # 6 that succeeded and the one deleted: nothing more

"""Pod workers: which API changes wake a sync (upstream's podsDifferSemantically), that
a change kept without a sync is what the next sync sees, and that a container ending
during a sync is noticed."""

from __future__ import annotations

import asyncio

from kubelet.podworkers import Outcome, PodWorkers, pods_differ_semantically
from kubelet.runtime import EXITED, RUNNING, ContainerInfo, PodRuntimeStatus
from kubelet.syncpod import SyncResult
from protos.kubeling.v1 import core_pb2, meta_pb2


def _pod(**meta: str | int | dict[str, str]) -> core_pb2.Pod:
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="default", uid="u1"),
                       spec=core_pb2.PodSpec(containers=[core_pb2.Container(name="c", image="busybox")]))
    for key, value in meta.items():
        if isinstance(value, dict):
            getattr(pod.metadata, key).update(value)
        else:
            setattr(pod.metadata, key, value)
    return pod


def test_what_differs_semantically() -> None:
    base = _pod(resourceVersion="1")
    status_only = _pod(resourceVersion="2")
    status_only.status.phase = "Running"
    assert not pods_differ_semantically(base, status_only)
    labelled = _pod(labels={"a": "b"})
    annotated = _pod(annotations={"a": "b"})
    respecced = _pod()
    respecced.spec.containers[0].image = "other"
    deleting = _pod()
    deleting.metadata.deletionTimestamp.GetCurrentTime()
    graced = _pod(deletionGracePeriodSeconds=0)
    for changed in (labelled, annotated, respecced, deleting, graced):
        assert pods_differ_semantically(base, changed)


async def test_a_kept_change_waits_for_the_next_sync() -> None:
    seen: list[tuple[str, bool]] = []
    synced = asyncio.Event()

    async def sync(pod: core_pb2.Pod, deleted: bool) -> Outcome:
        seen.append((pod.status.phase, deleted))
        synced.set()
        return Outcome(done=deleted)

    workers = PodWorkers(sync, resync=60)
    workers.update(_pod())
    await asyncio.wait_for(synced.wait(), 5)
    synced.clear()
    running = _pod()
    running.status.phase = "Running"
    workers.update(running, wake=False)
    await asyncio.sleep(0)  # the worker would run now if woken
    assert seen == [("", False)] and workers.pod("u1") is running
    workers.update(running, deleted=True, wake=False)  # a deletion always wakes
    await asyncio.wait_for(synced.wait(), 5)
    assert seen == [("", False), ("Running", True)]
    await workers.stop()


def test_a_container_that_ended_during_the_sync_is_noticed() -> None:
    old = ContainerInfo(id="old", name="c", state=EXITED, created_at=1)
    before = PodRuntimeStatus("u1", containers=[old])
    quick = ContainerInfo(id="new", name="c", state=EXITED, created_at=2)
    running = ContainerInfo(id="new", name="c", state=RUNNING, created_at=2)
    assert SyncResult(PodRuntimeStatus("u1", containers=[quick, old]), before=before).ended_meanwhile()
    assert not SyncResult(PodRuntimeStatus("u1", containers=[running, old]), before=before).ended_meanwhile()
    assert not SyncResult(before, before=before).ended_meanwhile()  # nothing new ended

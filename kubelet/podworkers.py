"""One worker per pod (pkg/kubelet/pod_workers.go): syncs of a pod never overlap,
the latest desired pod is always the one synced (updates that arrive meanwhile
collapse into one more sync), and a pod is synced again when woken (an API change,
a PLEG event, a probe verdict), when a back-off it is waiting for ends, and at
least every resync period."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["PodWorkers", "Outcome", "pods_differ_semantically"]

log = logging.getLogger(__name__)

_ERROR_RETRY = 2.0  # seconds before a sync that raised is tried again


def pods_differ_semantically(existing: Pod, new: Pod) -> bool:
    """Whether the change is one a sync acts on (pkg/kubelet/config's podsDifferSemantically):
    spec, labels, annotations, deletion; not the status, nor the bookkeeping metadata."""
    a, b = existing.metadata, new.metadata
    return (existing.spec != new.spec or a.labels != b.labels or a.annotations != b.annotations
            or a.HasField("deletionTimestamp") != b.HasField("deletionTimestamp")
            or a.deletionTimestamp != b.deletionTimestamp
            or a.HasField("deletionGracePeriodSeconds") != b.HasField("deletionGracePeriodSeconds")
            or a.deletionGracePeriodSeconds != b.deletionGracePeriodSeconds)


@dataclass
class Outcome:
    done: bool = False  # the pod is gone for good: the worker ends
    retry_after: float | None = None


@dataclass
class _Worker:
    pod: Pod
    deleted: bool = False  # gone from the API
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class PodWorkers:
    def __init__(self, sync: Callable[[Pod, bool], Awaitable[Outcome]], resync: float = 30.0) -> None:
        self.sync = sync
        self.resync = resync
        self._workers: dict[str, _Worker] = {}

    def __contains__(self, uid: str) -> bool:
        return uid in self._workers

    def uids(self) -> set[str]:
        return set(self._workers)

    def pod(self, uid: str) -> Pod | None:
        worker = self._workers.get(uid)
        return worker.pod if worker else None

    def update(self, pod: Pod, deleted: bool = False, wake: bool = True) -> None:
        """The pod's newest object; a sync follows unless `wake` is False (a change the
        worker need not act on: the object is kept for the next sync)."""
        uid = pod.metadata.uid
        worker = self._workers.get(uid)
        if worker is None:
            if deleted:
                return  # never seen running here: housekeeping cleans the runtime if needed
            worker = self._workers[uid] = _Worker(pod)
            worker.task = asyncio.create_task(self._run(uid, worker),
                                              name=f"pod-worker-{pod.metadata.namespace}/{pod.metadata.name}")
        worker.pod = pod
        worker.deleted = worker.deleted or deleted
        if wake or deleted:
            worker.wake.set()

    def wake(self, uid: str) -> None:
        worker = self._workers.get(uid)
        if worker is not None:
            worker.wake.set()

    async def stop(self) -> None:
        workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            await cancel_and_wait(worker.task)

    async def _run(self, uid: str, worker: _Worker) -> None:
        delay: float | None = 0.0
        while True:
            if delay is None or delay > 0:
                try:
                    async with asyncio.timeout(self.resync if delay is None else min(delay, self.resync)):
                        await worker.wake.wait()
                except asyncio.TimeoutError:
                    pass
            worker.wake.clear()
            pod = worker.pod
            try:
                outcome = await self.sync(pod, worker.deleted)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pod %s/%s: sync failed; retrying", pod.metadata.namespace, pod.metadata.name)
                outcome = Outcome(retry_after=_ERROR_RETRY)
            if outcome.done:
                if self._workers.get(uid) is worker:
                    del self._workers[uid]
                return
            delay = outcome.retry_after
            if delay is not None:
                delay = max(delay, 0.05)

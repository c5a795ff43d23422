"""What the scheduler tells the API: Scheduled / FailedScheduling Events and the pod's
PodScheduled condition (plus nominatedNodeName), as kube-scheduler does."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kubeling import errors
from kubeling.client import Client
from scheduler.framework.types import pod_key
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["ApiRecorder"]

log = logging.getLogger(__name__)

Pod = Any


class ApiRecorder:
    """Writes in the background: the scheduling loop never waits for these calls."""

    def __init__(self, client: Client, component: str = "default-scheduler", instance: str = "") -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def scheduled(self, pod: Pod, node: str) -> None:
        msg = f"Successfully assigned {pod.metadata.namespace}/{pod.metadata.name} to {node}"
        self._spawn(self._event(pod, "Normal", "Scheduled", msg))

    def preempted(self, pod: Pod, message: str) -> None:
        self._spawn(self._event(pod, "Normal", "Preempted", message))

    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None) -> None:
        self._spawn(self._event(pod, "Warning", "FailedScheduling", message))
        self._spawn(self._status(pod, reason, message, nominated_node))

    async def _event(self, pod: Pod, kind: str, reason: str, message: str) -> None:
        now = core_pb2.Event().lastTimestamp
        now.GetCurrentTime()
        now.nanos = 0
        ev = core_pb2.Event(
            metadata=meta_pb2.ObjectMeta(name=f"{pod.metadata.name}.{time.time_ns():x}",
                                         namespace=pod.metadata.namespace),
            involvedObject=meta_pb2.ObjectReference(kind="Pod", namespace=pod.metadata.namespace,
                                                    name=pod.metadata.name, uid=pod.metadata.uid,
                                                    apiVersion="v1"),
            reason=reason, message=message[:4096], type=kind,
            source=core_pb2.EventSource(component=self.component),
            reportingComponent=self.component, reportingInstance=self.instance, action="Scheduling",
            firstTimestamp=now, lastTimestamp=now, count=1)
        try:
            await self.client.events.create(ev)
        except errors.ApiError as err:
            log.debug("event for pod %s not recorded: %s", pod_key(pod), err.message)

    async def _status(self, pod: Pod, reason: str, message: str, nominated: str | None) -> None:
        for _ in range(3):
            try:
                current = await self.client.pods.get(pod.metadata.name, pod.metadata.namespace)
            except errors.NotFound:
                return
            except errors.ApiError as err:
                log.debug("status of pod %s not updated: %s", pod_key(pod), err.message)
                return
            if current.spec.nodeName or current.metadata.uid != pod.metadata.uid:
                return  # bound meanwhile, or a different pod of the same name
            changed = _set_condition(current, reason, message)
            if nominated is not None and current.status.nominatedNodeName != nominated:
                current.status.nominatedNodeName = nominated
                changed = True
            if not changed:
                return
            try:
                await self.client.pods.update_status(current)
                return
            except errors.Conflict:
                continue
            except errors.ApiError as err:
                log.debug("status of pod %s not updated: %s", pod_key(pod), err.message)
                return


def _set_condition(pod: core_pb2.Pod, reason: str, message: str) -> bool:
    for cond in pod.status.conditions:
        if cond.type == "PodScheduled":
            if (cond.status, cond.reason, cond.message) == ("False", reason, message):
                return False
            if cond.status != "False":
                cond.lastTransitionTime.GetCurrentTime()
            cond.status, cond.reason, cond.message = "False", reason, message
            cond.lastProbeTime.Clear()
            return True
    cond = pod.status.conditions.add(type="PodScheduled", status="False", reason=reason, message=message)
    cond.lastTransitionTime.GetCurrentTime()
    return True

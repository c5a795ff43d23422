"""What the scheduler tells the API: Scheduled / FailedScheduling Events and the pod's
PodScheduled condition (plus nominatedNodeName), as kube-scheduler does."""

from __future__ import annotations

import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.results import PREFIX, RECORD
from scheduler.framework.types import pod_key

__all__ = ["ApiRecorder"]

log = logging.getLogger(__name__)


class ApiRecorder:
    """Writes in the background: the scheduling loop never waits for these calls."""

    def __init__(self, client: Client, component: str = "default-scheduler", instance: str = "") -> None:
        self.client = client
        self.events = EventRecorder(client, component, instance=instance)

    async def flush(self) -> None:
        await self.events.flush()

    def scheduled(self, pod: Pod, node: str) -> None:
        msg = f"Successfully assigned {pod.metadata.namespace}/{pod.metadata.name} to {node}"
        self.events.pod_event(pod, NORMAL, "Scheduled", msg, action="Binding")

    def preempted(self, pod: Pod, message: str) -> None:
        self.events.pod_event(pod, NORMAL, "Preempted", message, action="Preempting")

    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None,
               annotations: dict[str, str] | None = None) -> None:
        self.events.pod_event(pod, WARNING, "FailedScheduling", message, action="Scheduling")
        self.events.spawn(self._status(pod, reason, message, nominated_node, annotations))

    async def _status(self, pod: Pod, reason: str, message: str, nominated: str | None,
                      annotations: dict[str, str] | None) -> None:
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
            if annotations is not None:  # the recorded attempt, in the same write (pods/status takes them)
                changed = _set_results(current, annotations) or changed
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


def _set_results(pod: core_pb2.Pod, annotations: dict[str, str]) -> bool:
    """Replace the last attempt's result annotations (not the pod's own `record` request)."""
    held = pod.metadata.annotations
    before = dict(held)
    for key in [k for k in held if k.startswith(PREFIX) and k != RECORD]:
        del held[key]
    held.update(annotations)
    return dict(held) != before


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

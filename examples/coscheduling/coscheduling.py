"""Coscheduling, an out-of-tree scheduler plugin: a pod group is bound all together or not at all.

An example for plugin authors of what the framework.Handle offers beyond the snapshot: the
pods that Permit parked. Pods carry a group label, and the group's size in an annotation:

    metadata:
      labels:      {scheduling.kubeling.io/pod-group: training}
      annotations: {scheduling.kubeling.io/min-available: "3"}

Permit parks each member (Wait) until the group has `min-available` members assumed on
nodes; the member that completes it allows every parked sibling through the handle. When a
member leaves (its wait timed out, it was rejected, its binding failed), Unreserve rejects
the siblings still waiting, so no partial group holds on to resources.

Install it beside kubeling and register it under the scheduler's entry point group
(in your package's pyproject.toml):

    [project.entry-points."kubeling.scheduler.plugins"]
    Coscheduling = "coscheduling:Coscheduling"

then enable it in a profile (`permit` and `reserve`), with its args:

    pluginConfig:
    - name: Coscheduling
      args: {permitWaitingTimeSeconds: 60}
"""

from __future__ import annotations

from typing import Any

from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import Handle, PermitPlugin, ReservePlugin
from scheduler.framework.status import SUCCESS, Code, Status

__all__ = ["Coscheduling", "GROUP_LABEL", "MIN_AVAILABLE_ANNOTATION"]

GROUP_LABEL = "scheduling.kubeling.io/pod-group"
MIN_AVAILABLE_ANNOTATION = "scheduling.kubeling.io/min-available"


def _group(pod: Pod) -> tuple[str, str] | None:
    name = pod.metadata.labels.get(GROUP_LABEL, "")
    return (pod.metadata.namespace, name) if name else None


class Coscheduling(PermitPlugin, ReservePlugin):
    name = "Coscheduling"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        if handle is None:
            raise ValueError("Coscheduling needs the scheduler's handle (its waiting pods)")
        self._handle: Handle = handle
        self.timeout = float(self.args.get("permitWaitingTimeSeconds", 60))
        if self.timeout <= 0:
            raise ValueError("pluginConfig[Coscheduling].args.permitWaitingTimeSeconds: must be greater than 0")

    def _assigned(self, group: tuple[str, str]) -> int:
        """Members on nodes in this cycle's snapshot: bound, or assumed (parked ones included)."""
        return sum(1 for info in self._handle.node_infos() for pi in info.pods if _group(pi.pod) == group)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        group = _group(pod)
        if group is None:
            return SUCCESS, 0.0
        text = pod.metadata.annotations.get(MIN_AVAILABLE_ANNOTATION, "1")
        if not text.isdigit() or int(text) < 1:
            why = f"annotation {MIN_AVAILABLE_ANNOTATION}: {text!r} is not a positive integer"
            return Status.unresolvable(why), 0.0
        # The snapshot was taken before this pod was assumed: it counts once more.
        if self._assigned(group) + 1 < int(text):
            return Status(Code.WAIT, (f"waiting for pod group {group[1]!r}: {text} members",)), self.timeout
        for waiting in self._handle.iterate_over_waiting_pods():
            if _group(waiting.pod) == group:
                waiting.allow(self.name)
        return SUCCESS, 0.0

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        group = _group(pod)
        if group is None:
            return
        for waiting in self._handle.iterate_over_waiting_pods():
            if _group(waiting.pod) == group and waiting.pod.metadata.uid != pod.metadata.uid:
                waiting.reject(self.name, f"pod group {group[1]!r} rejected: member {pod.metadata.name} left it")

"""SchedulingGates: a pod with gates waits outside the active queue until they are removed."""

from __future__ import annotations

from typing import Any

from scheduler.framework.interface import Action, ClusterEvent, EnqueueExtensions, PreEnqueuePlugin, Resource
from scheduler.framework.status import SUCCESS, Status

__all__ = ["SchedulingGates"]


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: Any) -> Status:
        gates = [g.name for g in pod.spec.schedulingGates]
        if not gates:
            return SUCCESS
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(gates)}]")

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES)]

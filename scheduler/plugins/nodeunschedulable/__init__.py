"""NodeUnschedulable: no pods on a cordoned node, unless they tolerate its taint."""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import tolerates
from scheduler.framework.interface import Action, ClusterEvent, EnqueueExtensions, FilterPlugin, Resource
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo
from protos.kubeling.v1 import core_pb2

__all__ = ["NodeUnschedulable"]

_TAINT = core_pb2.Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    name = "NodeUnschedulable"

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        if node.node is None or not node.node.spec.unschedulable:
            return SUCCESS
        if any(tolerates(t, _TAINT) for t in pod.spec.tolerations):
            return SUCCESS
        return Status.unresolvable("node(s) were unschedulable")

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT)]

"""NodeUnschedulable: no pods on a cordoned node, unless they tolerate its taint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from protos.kubeling.v1 import core_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import tolerates
from scheduler.framework.interface import Action, ClusterEvent, EnqueueExtensions, FilterPlugin, Resource
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo

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

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        if any(tolerates(t, _TAINT) for t in pod.spec.tolerations):
            return np.ones(len(rows), dtype=bool)
        return ~table.unschedulable[rows]

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT)]

"""NodeName: a pod that names a node fits only there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import Action, ClusterEvent, EnqueueExtensions, FilterPlugin, Resource
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import NodeInfo

__all__ = ["NodeName"]


class NodeName(FilterPlugin, EnqueueExtensions):
    name = "NodeName"

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        if pod.spec.nodeName and pod.spec.nodeName != node.name:
            return Status.unresolvable("node(s) didn't match the requested node name")
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        if not pod.spec.nodeName:
            return np.ones(len(rows), dtype=bool)
        return np.fromiter((nodes[r].name == pod.spec.nodeName for r in rows), dtype=bool, count=len(rows))

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD)]

"""NodePorts: a host port (address, protocol, port) is used by one pod per node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Resource,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import NodeInfo

__all__ = ["NodePorts"]

_KEY = "PreFilterNodePorts"


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodePorts"

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        wanted = [(p.hostIP or "0.0.0.0", p.protocol or "TCP", p.hostPort)
                  for c in pod.spec.containers for p in c.ports if p.hostPort]
        if not wanted:
            return None, Status(Code.SKIP)
        state.write(_KEY, wanted)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        for ip, protocol, port in state.read(_KEY):
            if node.port_in_use(ip, protocol, port):
                return Status.unschedulable("node(s) didn't have free ports for the requested pod ports")
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        mask = ~table.has_ports[rows]  # no port in use: nothing to conflict with
        for i in np.flatnonzero(~mask):
            mask[i] = self.filter(state, pod, nodes[rows[i]]).ok
        return mask

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.NODE, Action.ADD)]

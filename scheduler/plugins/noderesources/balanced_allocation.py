"""NodeResourcesBalancedAllocation (Score): favours nodes whose resource fractions stay close."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Handle,
    PreScorePlugin,
    ScorePlugin,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo
from scheduler.framework.types import Resource as Amounts
from scheduler.plugins.noderesources.resource_allocation import requested_with, requests_of, resource_specs

__all__ = ["BalancedAllocation"]


class BalancedAllocation(PreScorePlugin, ScorePlugin):
    """Favours nodes whose resource fractions stay close: (1 - std) × 100."""

    name = "NodeResourcesBalancedAllocation"
    _KEY = "PreScoreNodeResourcesBalancedAllocation"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.resources = resource_specs(self.args, "pluginConfig[NodeResourcesBalancedAllocation].args")

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        req = requests_of(state, pod)
        if all(req.get(spec.name) == 0 for spec in self.resources):
            return Status(Code.SKIP)  # a best-effort pod changes no balance
        state.write(self._KEY, req)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        names = [s.name for s in self.resources]
        if len(names) != 2 or set(names) != {"cpu", "memory"}:
            return None
        req: Amounts = state.get(self._KEY) or requests_of(state, pod)
        cpu_cap, mem_cap = table.alloc_cpu[rows], table.alloc_mem[rows]
        if cpu_cap.all() and mem_cap.all():  # the usual case: no zero-capacity masking
            cpu = np.minimum((table.req_cpu[rows] + req.milli_cpu) / cpu_cap, 1.0)
            mem = np.minimum((table.req_mem[rows] + req.memory) / mem_cap, 1.0)
            return ((1 - np.abs((cpu - mem) / 2)) * MAX_NODE_SCORE).astype(np.int64)
        fractions, valid = [], []
        for name in names:
            if name == "cpu":
                cap, used = table.alloc_cpu[rows], table.req_cpu[rows] + req.milli_cpu
            else:
                cap, used = table.alloc_mem[rows], table.req_mem[rows] + req.memory
            has = cap > 0
            fractions.append(np.minimum(used / np.where(has, cap, 1), 1.0))
            valid.append(has)
        both = valid[0] & valid[1]
        std = np.where(both, np.abs((fractions[0] - fractions[1]) / 2), 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        req: Amounts = state.get(self._KEY) or requests_of(state, pod)
        fractions = []
        for spec in self.resources:
            capacity, requested = requested_with(node, req, spec.name, non_zero=False)
            if capacity == 0:
                continue
            fractions.append(min(requested / capacity, 1.0))
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = (sum((f - mean) ** 2 for f in fractions) / len(fractions)) ** 0.5
        return int((1 - std) * MAX_NODE_SCORE), SUCCESS

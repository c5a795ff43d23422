"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import default_normalize, default_normalize_array, node_selector_matches, term_matches
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    Resource,
    ScorePlugin,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import NodeInfo

__all__ = ["NodeAffinity"]

_ERR = "node(s) didn't match Pod's node affinity/selector"


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeAffinity"

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        spec = pod.spec
        required = spec.affinity.nodeAffinity.HasField("requiredDuringSchedulingIgnoredDuringExecution")
        if not spec.nodeSelector and not required:
            return None, Status(Code.SKIP)
        if not required:
            return None, SUCCESS
        # Terms that name nodes (matchFields metadata.name In [...]) narrow the node set,
        # as upstream does; any term without such a field keeps every node possible.
        names: set[str] = set()
        for term in spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms:
            fields = [f for f in term.matchFields if f.key == "metadata.name" and f.operator == "In"]
            if not fields:
                return None, SUCCESS
            term_names = set(fields[0].values)
            for f in fields[1:]:
                term_names &= set(f.values)
            names |= term_names
        if not names:
            return None, Status.unresolvable(_ERR)
        return PreFilterResult(names), SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        n = node.node
        if n is None:
            return Status.as_error("node not found")
        labels = n.metadata.labels
        for k, v in pod.spec.nodeSelector.items():
            if labels.get(k) != v:
                return Status.unresolvable(_ERR)
        na = pod.spec.affinity.nodeAffinity
        if na.HasField("requiredDuringSchedulingIgnoredDuringExecution") and \
                not node_selector_matches(na.requiredDuringSchedulingIgnoredDuringExecution, n):
            return Status.unresolvable(_ERR)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                     nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """No node selector and no required affinity (a profile without NodeAffinity's
        PreFilter, as upstream 1.20's DefaultProvider, still filters such pods): all pass."""
        spec = pod.spec
        if not spec.nodeSelector and not spec.affinity.nodeAffinity.HasField(
                "requiredDuringSchedulingIgnoredDuringExecution"):
            return np.ones(len(rows), dtype=bool)
        return None

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        if not pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution:
            return Status(Code.SKIP)
        return SUCCESS

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        total = 0
        for pref in pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution:
            if pref.weight and term_matches(pref.preference, node.node):
                total += pref.weight
        return total, SUCCESS

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """No preferred terms (a profile without NodeAffinity's PreScore, as upstream 1.20's
        DefaultProvider, still scores such pods): 0 everywhere, at once."""
        if not pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution:
            return np.zeros(len(rows), dtype=np.int64)
        return None

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        return default_normalize(scores), SUCCESS

    def normalize_batch(self, state: CycleState, pod: Any, scores: np.ndarray) -> np.ndarray | None:
        return default_normalize_array(scores)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)]

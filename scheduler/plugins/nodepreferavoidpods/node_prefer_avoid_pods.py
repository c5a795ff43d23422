"""NodePreferAvoidPods (Score), upstream's plugin until 1.22 (the NodePreferAvoidPodsPriority
of a Policy and of the algorithm providers, weight 10000): a node whose annotation
`scheduler.alpha.kubernetes.io/preferAvoidPods` lists the pod's controller (a
ReplicationController or ReplicaSet, by kind and uid) scores 0, every other node 100.

    scheduler.alpha.kubernetes.io/preferAvoidPods: '{"preferAvoidPods": [{"podSignature":
      {"podController": {"kind": "ReplicaSet", "name": "web-1", "uid": "..."}}, "reason": "..."}]}'

An annotation that does not parse avoids nothing (upstream too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo
from scheduler.plugins.helper import controller_of

__all__ = ["NodePreferAvoidPods", "PREFER_AVOID_PODS", "avoided_controllers"]

PREFER_AVOID_PODS = "scheduler.alpha.kubernetes.io/preferAvoidPods"
_KINDS = ("ReplicationController", "ReplicaSet")


def avoided_controllers(annotations: Any) -> set[tuple[str, str]]:
    """(kind, uid) of every controller the node's annotation asks to avoid."""
    text = annotations.get(PREFER_AVOID_PODS)
    if not text:
        return set()
    try:
        entries = json.loads(text).get("preferAvoidPods") or []
        return {(str(e["podSignature"]["podController"]["kind"]), str(e["podSignature"]["podController"]["uid"]))
                for e in entries if (e.get("podSignature") or {}).get("podController")}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()


class NodePreferAvoidPods(ScorePlugin):
    name = "NodePreferAvoidPods"

    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """A pod no ReplicationController or ReplicaSet controls: 100 everywhere, at once."""
        owner = controller_of(pod)
        return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64) if owner is None or owner.kind not in _KINDS \
            else None

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        n = node.node
        if n is None:
            return 0, Status.as_error("node not found")
        owner = controller_of(pod)
        if owner is None or owner.kind not in _KINDS:
            return MAX_NODE_SCORE, SUCCESS  # only pods of these controllers can be avoided
        if (owner.kind, owner.uid) in avoided_controllers(n.metadata.annotations):
            return 0, SUCCESS
        return MAX_NODE_SCORE, SUCCESS

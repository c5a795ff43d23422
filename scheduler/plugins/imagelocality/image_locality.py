"""ImageLocality: favour nodes that already have the pod's images, scaled by how widely
each image is spread (so one node with a popular image does not attract everything)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import normalized_image_name
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo

__all__ = ["ImageLocality"]

_MB = 1024 * 1024
_MIN_THRESHOLD = 23 * _MB
_MAX_CONTAINER_THRESHOLD = 1000 * _MB


class ImageLocality(ScorePlugin):
    name = "ImageLocality"

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        total_nodes = len(self.handle.node_infos()) if self.handle is not None else 1
        total = 0
        containers = list(pod.spec.initContainers) + list(pod.spec.containers)
        for c in containers:
            image = node.image_states.get(normalized_image_name(c.image))
            if image is not None:
                total += int(image.size * (image.num_nodes / max(total_nodes, 1)))
        return calculate_priority(total, len(containers)), SUCCESS


    def score_batch(self, state: CycleState, pod: Any, table: NodeTable, rows: np.ndarray,
                    nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        out = np.zeros(len(rows), dtype=np.int64)  # no images on the node: score 0
        for i in np.flatnonzero(table.has_images[rows]):
            out[i] = self.score(state, pod, nodes[rows[i]])[0]
        return out


def calculate_priority(sum_scores: int, containers: int) -> int:
    max_threshold = _MAX_CONTAINER_THRESHOLD * containers
    # upstream clamps with "if ... else if": a small sum is raised to the minimum only
    if sum_scores < _MIN_THRESHOLD:
        sum_scores = _MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    num, den = MAX_NODE_SCORE * (sum_scores - _MIN_THRESHOLD), max_threshold - _MIN_THRESHOLD
    if den == 0:
        return 0
    q = abs(num) // abs(den)  # Go's int64 division truncates toward zero
    return q if (num >= 0) == (den > 0) else -q

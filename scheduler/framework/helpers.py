"""Matching rules shared by plugins: tolerations, node selector terms, score normalization."""

from __future__ import annotations

import numpy as np

from kubeling.nodeaffinity import node_selector_matches, term_matches
from kubeling.taints import find_untolerated, tolerates
from scheduler.framework.interface import NodeScore

__all__ = ["tolerates", "find_untolerated", "term_matches", "node_selector_matches",
           "default_normalize", "default_normalize_array", "normalized_image_name"]


def default_normalize(scores: list[NodeScore], reverse: bool = False, max_score: int = 100) -> list[NodeScore]:
    """Upstream helper.DefaultNormalizeScore: scale to 0..max by the highest; reverse flips."""
    highest = max((s.score for s in scores), default=0)
    if highest == 0:
        return [NodeScore(s.name, max_score) for s in scores] if reverse else scores
    out = []
    for s in scores:
        v = max_score * s.score // highest
        out.append(NodeScore(s.name, max_score - v if reverse else v))
    return out


def default_normalize_array(scores: np.ndarray, reverse: bool = False, max_score: int = 100) -> np.ndarray:
    """default_normalize on an int64 array (same integer arithmetic)."""
    highest = int(scores.max()) if scores.size else 0
    if highest == 0:
        return np.full_like(scores, max_score) if reverse else scores
    out = max_score * scores // highest
    return max_score - out if reverse else out


def normalized_image_name(name: str) -> str:
    """busybox → busybox:latest (an image without a tag is :latest)."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return name

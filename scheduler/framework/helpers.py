"""Matching rules shared by plugins: tolerations, node selector terms, score normalization."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubeling.taints import find_untolerated, tolerates
from scheduler.framework.interface import NodeScore

__all__ = ["tolerates", "find_untolerated", "term_matches", "node_selector_matches",
           "default_normalize", "default_normalize_array", "normalized_image_name"]


def _requirement_matches(req: Any, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            actual, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def term_matches(term: Any, node: Any) -> bool:
    """A NodeSelectorTerm: every expression (labels) and field (metadata.name) must hold;
    an empty term matches nothing (upstream)."""
    if not term.matchExpressions and not term.matchFields:
        return False
    labels = node.metadata.labels
    for req in term.matchExpressions:
        if not _requirement_matches(req, labels.get(req.key)):
            return False
    for req in term.matchFields:
        value = node.metadata.name if req.key == "metadata.name" else None
        if not _requirement_matches(req, value):
            return False
    return True


def node_selector_matches(selector: Any, node: Any) -> bool:
    """A NodeSelector: any of its terms."""
    return any(term_matches(t, node) for t in selector.nodeSelectorTerms)


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

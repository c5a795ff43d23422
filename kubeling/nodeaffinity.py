"""Node selectors and node affinity as upstream's component-helpers
(scheduling/corev1/nodeaffinity): whether a node matches a NodeSelectorTerm or a
NodeSelector, and a pod's nodeSelector plus required node affinity. Shared by the
scheduler's plugins and the DaemonSet controller (which decides where daemon pods run)."""

from __future__ import annotations

from typing import Any

__all__ = ["term_matches", "node_selector_matches", "pod_matches_node"]


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


def pod_matches_node(spec: Any, node: Any) -> bool:
    """A pod spec's nodeSelector and required node affinity (upstream's
    GetRequiredNodeAffinity(pod).Match(node))."""
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in spec.nodeSelector.items()):
        return False
    na = spec.affinity.nodeAffinity
    if na.HasField("requiredDuringSchedulingIgnoredDuringExecution"):
        return node_selector_matches(na.requiredDuringSchedulingIgnoredDuringExecution, node)
    return True

"""PodTopologySpread: keep matching pods evenly spread over topology domains.

Filter (whenUnsatisfiable: DoNotSchedule): placing the pod in a domain may not make
`count + self - min(count over domains)` exceed maxSkew (min is 0 while fewer than
minDomains domains exist). Score (ScheduleAnyway): fewer matching pods in the node's
domains is better, weighted by log(domains + 2), normalized as upstream. Nodes are
counted according to nodeAffinityPolicy (Honor) and nodeTaintsPolicy (Ignore).

A pod without constraints of its own gets the default ones (args `defaultingType`:
`System`, upstream's: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway; or
`List`: `defaultConstraints`), selecting the pods of the same Services and ReplicaSet
(helper.default_selector); a pod nothing selects has none. With the System defaults, a node
without a zone label is still scored (by its hostname), as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeling.selectors import LabelSelector, Requirement, from_label_selector_proto
from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.helpers import find_untolerated, node_selector_matches
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeScore,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    Resource,
    ScorePlugin,
)
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, PodInfo
from scheduler.plugins.helper import default_selector

__all__ = ["PodTopologySpread", "SYSTEM_DEFAULT_CONSTRAINTS"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
# upstream's systemDefaultConstraints: (topologyKey, maxSkew, whenUnsatisfiable)
SYSTEM_DEFAULT_CONSTRAINTS = ((HOSTNAME, 3, "ScheduleAnyway"), (ZONE, 5, "ScheduleAnyway"))
_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_FILTER_KEY = "PreFilterPodTopologySpread"
_SCORE_KEY = "PreScorePodTopologySpread"
ERR_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ERR_SKEW = "node(s) didn't match pod topology spread constraints"


@dataclass(frozen=True)
class _Constraint:
    max_skew: int
    key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _own_constraints(pod: Any, action: str) -> list[_Constraint]:
    out = []
    for c in pod.spec.topologySpreadConstraints:
        if c.whenUnsatisfiable != action:
            continue
        sel = from_label_selector_proto(c.labelSelector) if c.HasField("labelSelector") else None
        reqs = list(sel.requirements) if sel is not None else []
        for key in c.matchLabelKeys:  # the pod's own value for each key joins the selector
            if key in pod.metadata.labels:
                reqs.append(Requirement(key, "in", (pod.metadata.labels[key],)))
        # a nil selector selects nothing: no pod is counted
        selector = LabelSelector(tuple(reqs)) if sel is not None else LabelSelector((Requirement("", "in", ()),))
        out.append(_Constraint(c.maxSkew, c.topologyKey, selector,
                               c.minDomains if c.HasField("minDomains") else 1,
                               c.nodeAffinityPolicy != "Ignore", c.nodeTaintsPolicy == "Honor"))
    return out


def _default_constraints(args: dict[str, Any]) -> tuple[str, list[tuple[str, int, str]]]:
    """(defaultingType, its constraints as (topologyKey, maxSkew, whenUnsatisfiable)), validated
    with upstream's messages."""
    where = "pluginConfig[PodTopologySpread].args"
    kind = args.get("defaultingType", "System")
    listed = args.get("defaultConstraints") or []
    if kind not in ("System", "List"):
        raise ConfigError(f'{where}.defaultingType: Unsupported value: {kind!r}: supported values: "System", "List"')
    if not isinstance(listed, list):
        raise ConfigError(f"{where}.defaultConstraints: Invalid value: must be a list")
    if kind == "System" and listed:
        raise ConfigError(f'{where}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty')
    if kind == "System":
        return kind, list(SYSTEM_DEFAULT_CONSTRAINTS)
    out: list[tuple[str, int, str]] = []
    for i, c in enumerate(listed):
        at = f"{where}.defaultConstraints[{i}]"
        if not isinstance(c, dict):
            raise ConfigError(f"{at}: Invalid value: must be a mapping")
        skew, key, action = c.get("maxSkew"), c.get("topologyKey"), c.get("whenUnsatisfiable")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise ConfigError(f"{at}.maxSkew: Invalid value: {skew!r}: not in valid range")
        if not key or not isinstance(key, str):
            raise ConfigError(f"{at}.topologyKey: Required value: can not be empty")
        if action not in _ACTIONS:
            raise ConfigError(f'{at}.whenUnsatisfiable: Unsupported value: {action!r}: supported values: '
                              '"DoNotSchedule", "ScheduleAnyway"')
        if "labelSelector" in c:
            raise ConfigError(f"{at}.labelSelector: Forbidden: constraint must not define a selector, "
                              "as they deduced for each pod")
        if any(k == key and a == action for k, _, a in out):
            raise ConfigError(f"{where}.defaultConstraints[{i}]: Duplicate value: \"{{{key}, {action}}}\"")
        out.append((key, skew, action))
    return kind, out


def _has_keys(node: Any, constraints: Sequence[_Constraint]) -> bool:
    labels = node.metadata.labels
    return all(c.key in labels for c in constraints)


def _counts_node(pod: Any, node: Any, c: _Constraint) -> bool:
    """Node inclusion policies: whether this node's pods count for the constraint."""
    if c.honor_affinity:
        if any(node.metadata.labels.get(k) != v for k, v in pod.spec.nodeSelector.items()):
            return False
        na = pod.spec.affinity.nodeAffinity
        if na.HasField("requiredDuringSchedulingIgnoredDuringExecution") and \
                not node_selector_matches(na.requiredDuringSchedulingIgnoredDuringExecution, node):
            return False
    if c.honor_taints and find_untolerated(node.spec.taints, pod.spec.tolerations, ("NoSchedule", "NoExecute")):
        return False
    return True


def _matching(pods: Sequence[PodInfo], c: _Constraint, namespace: str) -> int:
    return sum(1 for pi in pods if pi.pod.metadata.namespace == namespace
               and not pi.pod.metadata.HasField("deletionTimestamp")
               and c.selector.matches(pi.pod.metadata.labels))


@dataclass
class _FilterState:
    constraints: list[_Constraint]
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def clone(self) -> _FilterState:
        return _FilterState(self.constraints, dict(self.counts))

    def min_count(self, c: _Constraint) -> int:
        domains = [n for (k, _), n in self.counts.items() if k == c.key]
        if len(domains) < c.min_domains:
            return 0  # too few domains: the global minimum is taken as zero
        return min(domains) if domains else 0


class PodTopologySpread(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "PodTopologySpread"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.defaulting, self.default_constraints = _default_constraints(self.args)

    def _constraints(self, pod: Any, action: str) -> tuple[list[_Constraint], bool]:
        """The pod's constraints for `action`, else the defaults with the selector of the pods
        it is spread with; and whether they are the System defaults."""
        if pod.spec.topologySpreadConstraints:
            return _own_constraints(pod, action), False
        wanted = [(key, skew) for key, skew, a in self.default_constraints if a == action]
        if not wanted:
            return [], False
        selector = default_selector(pod, self.handle)
        if selector.empty():
            return [], False
        return [_Constraint(skew, key, selector, 1, True, False) for key, skew in wanted], self.defaulting == "System"

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        constraints, _ = self._constraints(pod, "DoNotSchedule")
        if not constraints:
            return None, Status(Code.SKIP)
        st = _FilterState(constraints)
        all_nodes = self.handle.node_infos() if self.handle is not None else nodes
        for info in all_nodes:
            node = info.node
            if node is None or not _has_keys(node, constraints):
                continue
            for c in constraints:
                if not _counts_node(pod, node, c):
                    continue
                pair = (c.key, node.metadata.labels[c.key])
                st.counts[pair] = st.counts.get(pair, 0) + _matching(info.pods, c, pod.metadata.namespace)
        state.write(_FILTER_KEY, st)
        return None, SUCCESS

    def _update(self, state: CycleState, pod: Any, other: PodInfo, node: NodeInfo, delta: int) -> Status:
        st: _FilterState | None = state.get(_FILTER_KEY)
        if st is None or node.node is None or not _has_keys(node.node, st.constraints):
            return SUCCESS
        if other.pod.metadata.namespace != pod.metadata.namespace:
            return SUCCESS
        for c in st.constraints:
            pair = (c.key, node.node.metadata.labels[c.key])
            if pair in st.counts and c.selector.matches(other.pod.metadata.labels):
                st.counts[pair] += delta
        return SUCCESS

    def add_pod(self, state: CycleState, pod: Any, added: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, pod, added, node, 1)

    def remove_pod(self, state: CycleState, pod: Any, removed: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, pod, removed, node, -1)

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        st: _FilterState = state.read(_FILTER_KEY)
        n = node.node
        if n is None:
            return Status.as_error("node not found")
        labels = n.metadata.labels
        for c in st.constraints:
            value = labels.get(c.key)
            if value is None:
                return Status.unresolvable(ERR_MISSING_LABEL)
            self_match = 1 if c.selector.matches(pod.metadata.labels) else 0
            count = st.counts.get((c.key, value), 0)
            if count + self_match - st.min_count(c) > c.max_skew:
                return Status.unschedulable(ERR_SKEW)
        return SUCCESS

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        constraints, system_defaulted = self._constraints(pod, "ScheduleAnyway")
        if not constraints:
            return Status(Code.SKIP)
        # Nodes without every topology key are left out of scoring, except for the System
        # defaults (a node without a zone is still spread by hostname).
        require_all = not system_defaulted
        ignored: set[str] = set()
        counts: dict[tuple[str, str], int] = {}
        sizes = [0] * len(constraints)
        for info in nodes:
            if info.node is None or (require_all and not _has_keys(info.node, constraints)):
                ignored.add(info.name)
                continue
            for i, c in enumerate(constraints):
                if c.key == HOSTNAME:
                    continue  # per node, counted in Score
                # A node without the key makes a domain "" of its own (upstream counts it so
                # in the normalizing weight, and never scores it).
                pair = (c.key, info.node.metadata.labels.get(c.key, ""))
                if pair not in counts:
                    counts[pair] = 0
                    sizes[i] += 1
        weights = []
        for i, c in enumerate(constraints):
            size = len(nodes) - len(ignored) if c.key == HOSTNAME else sizes[i]
            weights.append(math.log(size + 2))
        all_nodes = self.handle.node_infos() if self.handle is not None else nodes
        for info in all_nodes:
            node = info.node
            if node is None or (require_all and not _has_keys(node, constraints)):
                continue
            for c in constraints:
                if c.key == HOSTNAME or not _counts_node(pod, node, c):
                    continue
                pair = (c.key, node.metadata.labels.get(c.key, ""))
                if pair in counts:
                    counts[pair] += _matching(info.pods, c, pod.metadata.namespace)
        state.write(_SCORE_KEY, (constraints, counts, weights, ignored))
        return SUCCESS

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        constraints, counts, weights, ignored = state.read(_SCORE_KEY)
        if node.name in ignored or node.node is None:
            return 0, SUCCESS
        total = 0.0
        for c, w in zip(constraints, weights, strict=True):
            value = node.node.metadata.labels.get(c.key)
            if value is None:
                continue
            if c.key == HOSTNAME:
                cnt = _matching(node.pods, c, pod.metadata.namespace)
            else:
                cnt = counts.get((c.key, value), 0)
            total += cnt * w + (c.max_skew - 1)
        return int(total), SUCCESS  # truncated, as upstream's int64(score)

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        entry = state.get(_SCORE_KEY)
        if entry is None:
            return scores, SUCCESS
        ignored = entry[3]
        valid = [s.score for s in scores if s.name not in ignored]
        lo, hi = (min(valid), max(valid)) if valid else (0, 0)
        out = []
        for s in scores:
            if s.name in ignored:
                out.append(NodeScore(s.name, 0))
            elif hi == 0:
                out.append(NodeScore(s.name, MAX_NODE_SCORE))
            else:
                out.append(NodeScore(s.name, MAX_NODE_SCORE * (hi + lo - s.score) // hi))
        return out, SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.ALL), ClusterEvent(Resource.NODE, Action.ADD),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT)]


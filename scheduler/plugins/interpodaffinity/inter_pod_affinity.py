"""InterPodAffinity: required pod affinity / anti-affinity (Filter), preferred terms (Score).

As upstream: PreFilter counts, per topology pair, the existing pods that match the
incoming pod's required affinity terms (all of them) and anti-affinity terms, and the
existing pods whose required anti-affinity terms match the incoming pod. Filter checks
affinity first (a pod whose terms match only itself may start a series), then
anti-affinity both ways. Score sums preferred-term weights of both sides, and existing
pods' required affinity at hardPodAffinityWeight (default 1).

namespaceSelector: an empty selector means all namespaces; a non-empty one would need
Namespace labels, which the scheduler does not watch yet: it then matches namespaces
as if they had no labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeling.selectors import LabelSelector, Requirement, from_label_selector_proto
from scheduler.framework.cycle_state import CycleState
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

__all__ = ["InterPodAffinity", "ERR_AFFINITY", "ERR_ANTI_AFFINITY", "ERR_EXISTING_ANTI_AFFINITY"]

ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_FILTER_KEY = "PreFilterInterPodAffinity"
_SCORE_KEY = "PreScoreInterPodAffinity"

Pair = tuple[str, str]


@dataclass(frozen=True)
class _Term:
    selector: LabelSelector | None  # None selects nothing
    namespaces: frozenset[str]       # empty with all_namespaces False: the owner's namespace
    all_namespaces: bool
    topology_key: str
    weight: int = 0

    def matches(self, pod: Any) -> bool:
        if not self.all_namespaces and pod.metadata.namespace not in self.namespaces:
            return False
        return self.selector is not None and self.selector.matches(pod.metadata.labels)


@dataclass(frozen=True)
class _Terms:
    required_affinity: tuple[_Term, ...] = ()
    required_anti: tuple[_Term, ...] = ()
    preferred_affinity: tuple[_Term, ...] = ()
    preferred_anti: tuple[_Term, ...] = ()


def _term(owner: Any, t: Any, weight: int = 0) -> _Term:
    sel = from_label_selector_proto(t.labelSelector) if t.HasField("labelSelector") else None
    if sel is not None:
        extra = [Requirement(k, "in", (owner.metadata.labels[k],
                                       )) for k in t.matchLabelKeys if k in owner.metadata.labels]
        extra += [Requirement(k, "notin", (owner.metadata.labels[k],)) for k in t.mismatchLabelKeys
                  if k in owner.metadata.labels]
        sel = LabelSelector(sel.requirements + tuple(extra))
    all_ns = t.HasField("namespaceSelector") and not t.namespaceSelector.matchLabels \
        and not t.namespaceSelector.matchExpressions
    namespaces = frozenset(t.namespaces) if (t.namespaces or t.HasField("namespaceSelector")) \
        else frozenset([owner.metadata.namespace])
    return _Term(sel, namespaces, all_ns, t.topologyKey, weight)


_NO_TERMS = _Terms()


def _pod_terms(pod: Any) -> _Terms:
    """The incoming pod's terms (plain pods: none, without building a PodInfo)."""
    aff = pod.spec.affinity
    if not (aff.HasField("podAffinity") or aff.HasField("podAntiAffinity")):
        return _NO_TERMS
    return terms_of(PodInfo.of(pod))


def terms_of(pi: PodInfo) -> _Terms:
    cached = pi.derived.get("interpodaffinity")
    if cached is None:
        pod = pi.pod
        if not pi.has_affinity:
            cached = _Terms()
        else:
            pa, paa = pod.spec.affinity.podAffinity, pod.spec.affinity.podAntiAffinity
            cached = _Terms(
                tuple(_term(pod, t) for t in pa.requiredDuringSchedulingIgnoredDuringExecution),
                tuple(_term(pod, t) for t in paa.requiredDuringSchedulingIgnoredDuringExecution),
                tuple(_term(pod, w.podAffinityTerm, w.weight)
                      for w in pa.preferredDuringSchedulingIgnoredDuringExecution),
                tuple(_term(pod, w.podAffinityTerm, w.weight)
                      for w in paa.preferredDuringSchedulingIgnoredDuringExecution))
        pi.derived["interpodaffinity"] = cached
    return cached


@dataclass
class _FilterState:
    terms: _Terms
    existing_anti: dict[Pair, int] = field(default_factory=dict)
    affinity: dict[Pair, int] = field(default_factory=dict)
    anti: dict[Pair, int] = field(default_factory=dict)

    def clone(self) -> _FilterState:
        return _FilterState(self.terms, dict(self.existing_anti), dict(self.affinity), dict(self.anti))

    def update(self, pod: Any, other: PodInfo, node: Any, delta: int) -> None:
        labels = node.metadata.labels
        for t in terms_of(other).required_anti:
            if t.topology_key in labels and t.matches(pod):
                _add(self.existing_anti, (t.topology_key, labels[t.topology_key]), delta)
        if self.terms.required_affinity and all(t.matches(other.pod) for t in self.terms.required_affinity):
            for t in self.terms.required_affinity:
                if t.topology_key in labels:
                    _add(self.affinity, (t.topology_key, labels[t.topology_key]), delta)
        for t in self.terms.required_anti:
            if t.topology_key in labels and t.matches(other.pod):
                _add(self.anti, (t.topology_key, labels[t.topology_key]), delta)


def _add(counts: dict[Pair, int], pair: Pair, delta: int) -> None:
    counts[pair] = counts.get(pair, 0) + delta


class InterPodAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "InterPodAffinity"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.hard_weight = int(self.args.get("hardPodAffinityWeight", 1))
        if not 0 <= self.hard_weight <= 100:
            from scheduler.config import ConfigError
            raise ConfigError("pluginConfig[InterPodAffinity].args.hardPodAffinityWeight: Invalid value: "
                              f"{self.hard_weight}: not in valid range [0-100]")

    def _nodes(self, fallback: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        return self.handle.node_infos() if self.handle is not None else fallback

    def _any(self, nodes: Sequence[NodeInfo], column: str) -> bool:
        if self.handle is not None:
            return bool(getattr(self.handle.node_table(), column).sum())
        attr = "pods_with_required_anti_affinity" if column == "anti_affinity_pods" else "pods_with_affinity"
        return any(getattr(n, attr) for n in nodes)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        all_nodes = self._nodes(nodes)
        terms = _pod_terms(pod)
        if not terms.required_affinity and not terms.required_anti and not self._any(all_nodes, "anti_affinity_pods"):
            return None, Status(Code.SKIP)
        st = _FilterState(terms)
        needs_all_pods = bool(terms.required_affinity or terms.required_anti)
        for info in all_nodes:
            if info.node is None:
                continue
            if not needs_all_pods and not info.pods_with_required_anti_affinity:
                continue
            for pi in info.pods:
                if needs_all_pods or pi.has_required_anti_affinity:
                    st.update(pod, pi, info.node, 1)
        state.write(_FILTER_KEY, st)
        return None, SUCCESS

    def add_pod(self, state: CycleState, pod: Any, added: PodInfo, node: NodeInfo) -> Status:
        st = state.get(_FILTER_KEY)
        if st is not None and node.node is not None:
            st.update(pod, added, node.node, 1)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: Any, removed: PodInfo, node: NodeInfo) -> Status:
        st = state.get(_FILTER_KEY)
        if st is not None and node.node is not None:
            st.update(pod, removed, node.node, -1)
        return SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        st: _FilterState = state.read(_FILTER_KEY)
        if node.node is None:
            return Status.as_error("node not found")
        labels = node.node.metadata.labels
        if not self._satisfies_affinity(st, pod, labels):
            return Status.unresolvable(ERR_AFFINITY)
        for t in st.terms.required_anti:
            if t.topology_key in labels and st.anti.get((t.topology_key, labels[t.topology_key]), 0) > 0:
                return Status.unschedulable(ERR_ANTI_AFFINITY)
        if st.existing_anti:
            for key, value in labels.items():
                if st.existing_anti.get((key, value), 0) > 0:
                    return Status.unschedulable(ERR_EXISTING_ANTI_AFFINITY)
        return SUCCESS

    @staticmethod
    def _satisfies_affinity(st: _FilterState, pod: Any, labels: Any) -> bool:
        exist = True
        for t in st.terms.required_affinity:
            if t.topology_key not in labels:
                return False  # every topology label must be on the node
            if st.affinity.get((t.topology_key, labels[t.topology_key]), 0) <= 0:
                exist = False
        if exist:
            return True
        # The first pod of a series that is affine to itself: if nothing else in the
        # cluster matches and the pod matches its own terms, let it start the series.
        return not any(st.affinity.values()) and all(t.matches(pod) for t in st.terms.required_affinity)

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> Status:
        terms = _pod_terms(pod)
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti)
        all_nodes = self._nodes(nodes)
        if not has_constraints and not self._any(all_nodes, "affinity_pods"):
            return Status(Code.SKIP)
        scores: dict[Pair, int] = {}
        for info in all_nodes:
            node = info.node
            if node is None or not node.metadata.labels:
                continue
            if not has_constraints and not info.pods_with_affinity:
                continue
            labels = node.metadata.labels
            for pi in info.pods:
                if not has_constraints and not pi.has_affinity:
                    continue
                self._existing(scores, terms, pod, pi, labels)
        if not scores:
            return Status(Code.SKIP)
        state.write(_SCORE_KEY, scores)
        return SUCCESS

    def _existing(self, scores: dict[Pair, int], terms: _Terms, pod: Any, pi: PodInfo, labels: Any) -> None:
        def process(ts: Sequence[_Term], target: Any, sign: int, weight: int | None = None) -> None:
            for t in ts:
                if t.topology_key in labels and t.matches(target):
                    _add(scores, (t.topology_key, labels[t.topology_key]),
                         sign * (t.weight if weight is None else weight))

        theirs = terms_of(pi)
        process(terms.preferred_affinity, pi.pod, 1)
        process(terms.preferred_anti, pi.pod, -1)
        if self.hard_weight > 0:
            process(theirs.required_affinity, pod, 1, self.hard_weight)
        process(theirs.preferred_affinity, pod, 1)
        process(theirs.preferred_anti, pod, -1)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        scores: dict[Pair, int] = state.read(_SCORE_KEY)
        if node.node is None:
            return 0, SUCCESS
        return sum(scores.get((k, v), 0) for k, v in node.node.metadata.labels.items()), SUCCESS

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        if state.get(_SCORE_KEY) is None or not scores:
            return scores, SUCCESS
        lo, hi = min(s.score for s in scores), max(s.score for s in scores)
        diff = hi - lo
        return [NodeScore(s.name, int(MAX_NODE_SCORE * ((s.score - lo) / diff)) if diff > 0 else 0)
                for s in scores], SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.ALL), ClusterEvent(Resource.NODE, Action.ADD),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)]

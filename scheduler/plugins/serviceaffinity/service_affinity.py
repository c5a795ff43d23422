"""ServiceAffinity (PreFilter + Filter + Score), upstream's plugin of 1.18-1.22, which only a
Policy's CheckServiceAffinity predicate (`serviceAffinity` argument) and ServiceAntiAffinity
priority (`serviceAntiAffinity` argument) configure.

args: `affinityLabels` (Filter): a pod of a Service goes only to nodes whose values of these
labels are those of the node its first already-placed fellow pod runs on (or those its own
nodeSelector names); `antiAffinityLabelsPreference` (Score): fewer of the Service's pods
among the nodes with the same value of each label is better.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
    Resource,
    ScorePlugin,
)
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, PodInfo
from scheduler.plugins.helper import label_list, pod_services

__all__ = ["ServiceAffinity", "ERR_REASON"]

ERR_REASON = "node(s) didn't match service affinity"
_KEY = "PreFilterServiceAffinity"
_SCORE_KEY = "ScoreServiceAffinity"


@dataclass
class _State:
    matching: list[PodInfo] = field(default_factory=list)  # the pod's namespace, all its labels
    has_services: bool = False

    def clone(self) -> _State:
        return _State(list(self.matching), self.has_services)


def _has_labels(labels: Any, wanted: Any) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


class ServiceAffinity(PreFilterPlugin, FilterPlugin, ScorePlugin, EnqueueExtensions):
    name = "ServiceAffinity"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        where = "pluginConfig[ServiceAffinity].args"
        self.affinity_labels = label_list(self.args, "affinityLabels", where)
        self.anti_affinity_labels = label_list(self.args, "antiAffinityLabelsPreference", where)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Any,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        all_nodes = self.handle.node_infos() if self.handle is not None else nodes
        ns, labels = pod.metadata.namespace, pod.metadata.labels
        # Every placed pod of the namespace that carries all of this pod's labels.
        matching = [pi for info in all_nodes for pi in info.pods
                    if pi.pod.metadata.namespace == ns and _has_labels(pi.pod.metadata.labels, labels)]
        state.write(_KEY, _State(matching, bool(pod_services(pod, self.handle))))
        return None, SUCCESS

    def add_pod(self, state: CycleState, pod: Any, added: PodInfo, node: NodeInfo) -> Status:
        st: _State | None = state.get(_KEY)
        if st is not None and added.pod.metadata.namespace == pod.metadata.namespace \
                and _has_labels(added.pod.metadata.labels, pod.metadata.labels):
            st.matching.append(added)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: Any, removed: PodInfo, node: NodeInfo) -> Status:
        st: _State | None = state.get(_KEY)
        if st is not None:
            st.matching = [pi for pi in st.matching if pi.uid != removed.uid]
        return SUCCESS

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        if not self.affinity_labels:
            return SUCCESS
        n = node.node
        if n is None:
            return Status.as_error("node not found")
        st: _State | None = state.get(_KEY)
        if st is None:  # a Filter without its PreFilter (upstream computes it then)
            self.pre_filter(state, pod, ())
            st = state.read(_KEY)
        selector = {k: pod.spec.nodeSelector[k] for k in self.affinity_labels if k in pod.spec.nodeSelector}
        if len(selector) < len(self.affinity_labels) and st.has_services:
            # The missing labels take their values from the node of the first fellow pod
            # (pods this node's view removed, as preemption does, not counted: FilterOutPods).
            on_node = {pi.uid for pi in node.pods}
            fellows = [pi for pi in st.matching if pi.pod.spec.nodeName != node.name or pi.uid in on_node]
            if fellows:
                where = self.handle.node_info(fellows[0].pod.spec.nodeName) if self.handle is not None else None
                if where is None or where.node is None:
                    return Status.as_error("node not found")
                for k in self.affinity_labels:
                    if k not in selector and k in where.node.metadata.labels:
                        selector[k] = where.node.metadata.labels[k]
        if _has_labels(n.metadata.labels, selector):
            return SUCCESS
        return Status.unschedulable(ERR_REASON)

    # ------------------------------------------------------------ score

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        if node.node is None:
            return 0, Status.as_error("node not found")
        selector = state.get(_SCORE_KEY)
        if selector is None:  # the first Service's selector (as upstream), looked up once a cycle
            services = pod_services(pod, self.handle)
            selector = dict(services[0].spec.selector) if services else {}
            state.write(_SCORE_KEY, selector)
        if not selector or not node.pods:
            return 0, SUCCESS
        ns = pod.metadata.namespace
        return sum(1 for pi in node.pods if pi.pod.metadata.namespace == ns
                   and not pi.pod.metadata.HasField("deletionTimestamp")
                   and _has_labels(pi.pod.metadata.labels, selector)), SUCCESS

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> tuple[list[NodeScore], Status]:
        result = [0.0] * len(scores)
        labels = self.anti_affinity_labels
        for label in labels:
            total = 0
            counts: dict[str, int] = {}
            values: dict[int, str] = {}
            for i, s in enumerate(scores):
                total += s.score
                info = self.handle.node_info(s.name) if self.handle is not None else None
                if info is None or info.node is None:
                    return scores, Status.as_error(f"node {s.name!r} not found")
                node_labels = info.node.metadata.labels
                if label not in node_labels:
                    continue
                values[i] = node_labels[label]
                counts[node_labels[label]] = counts.get(node_labels[label], 0) + s.score
            for i, value in values.items():
                f = float(MAX_NODE_SCORE)
                if total > 0:
                    f = MAX_NODE_SCORE * ((total - counts[value]) / total)
                # Each label weighs 1/len(labels): the Policy's weights were summed for the plugin.
                result[i] += f / len(labels)
        return [NodeScore(s.name, int(v)) for s, v in zip(scores, result, strict=True)], SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.POD, Action.ALL), ClusterEvent(Resource.NODE, Action.ADD),
                ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL),
                ClusterEvent(Resource.SERVICE, Action.UPDATE), ClusterEvent(Resource.SERVICE, Action.DELETE)]

"""DefaultPreemption (PostFilter): make room for a pod by evicting lower-priority pods.

As upstream's preemption.Evaluator: only nodes that failed with Unschedulable (not
UnschedulableAndUnresolvable) are candidates; on each, all lower-priority pods are
removed, the pod must then fit, and victims are put back while it still fits
("reprieve"): first those whose eviction would violate a PodDisruptionBudget, then the
others, most important first. Among candidates the node is chosen by: fewest PDB
violations, lowest highest-victim priority, lowest sum of victim priorities, fewest
victims, latest start of the highest-priority victims, then order. Victims are evicted through the scheduler's
handle and the pod is nominated to the node; it is scheduled once they are gone.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeling.selectors import SelectorError, from_label_selector_proto
from protos.kubeling.v1.policy_pb2 import PodDisruptionBudget
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import Handle, PostFilterPlugin, PostFilterResult
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["DefaultPreemption", "split_by_pdb_violation"]

MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_INT32_OFFSET = 2**31  # upstream adds MaxInt32+1 so negative priorities sum sensibly


@dataclass
class _Candidate:
    node: str
    victims: list[PodInfo] = field(default_factory=list)
    pdb_violations: int = 0


def split_by_pdb_violation(pods: list[PodInfo],
                           pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), in the given order (upstream's filterPodsWithPDBViolation):
    each pod a budget covers uses one of its disruptionsAllowed; a pod that takes a budget
    below zero would violate it. Pods a budget already counts as disrupted are free."""
    allowed = [pdb.status.disruptionsAllowed for pdb in pdbs]
    selectors = []
    for pdb in pdbs:
        try:
            selectors.append(from_label_selector_proto(pdb.spec.selector))
        except SelectorError:
            selectors.append(None)
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pi in pods:
        meta = pi.pod.metadata
        violated = False
        for i, pdb in enumerate(pdbs):
            selector = selectors[i]
            if pdb.metadata.namespace != meta.namespace or selector is None or selector.empty() \
                    or not selector.matches(meta.labels) or meta.name in pdb.status.disruptedPods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        (violating if violated else fine).append(pi)
    return violating, fine


def _priority(pod: Any) -> int:
    return int(pod.spec.priority)


def _start_time(pod: Any) -> float:
    st = pod.status.startTime
    if st.seconds or st.nanos:
        return st.seconds + st.nanos / 1e9
    ct = pod.metadata.creationTimestamp
    return ct.seconds + ct.nanos / 1e9


class DefaultPreemption(PostFilterPlugin):
    name = "DefaultPreemption"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self.rng = random.Random()

    async def post_filter(self, state: CycleState, pod: Any,
                          statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        h = self.handle
        if h is None:
            return None, Status.as_error("DefaultPreemption needs the scheduler's handle")
        ok, why = self._eligible(pod)
        if not ok:
            return None, Status.unschedulable(why)
        # Per-node outcome, worded as upstream (it becomes part of the FailedScheduling message).
        outcome: dict[str, str] = {name: "Preemption is not helpful for scheduling"
                                   for name, st in statuses.items() if st.code is not Code.UNSCHEDULABLE}
        potential = [n for n in h.node_infos() if n.name in statuses and statuses[n.name].code is Code.UNSCHEDULABLE]
        candidates = self._dry_run(state, pod, potential, outcome) if potential else []
        if not candidates:
            counts: dict[str, int] = {}
            for reason in outcome.values():
                counts[reason] = counts.get(reason, 0) + 1
            summary = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
            return PostFilterResult(""), Status.unschedulable(
                f"preemption: 0/{len(statuses)} nodes are available: {summary}.")
        best = self._select(candidates)
        if state.results is not None:
            state.results.post_filter.update(
                victims=[f"{v.pod.metadata.namespace}/{v.pod.metadata.name}" for v in best.victims],
                candidates=len(candidates), pdbViolations=best.pdb_violations)
        for victim in best.victims:
            await h.evict(victim.pod,
                          f"Preempted by pod {pod.metadata.namespace}/{pod.metadata.name} on node {best.node}")
        h.clear_lower_nominations(pod, best.node)
        return PostFilterResult(best.node), Status()

    def _eligible(self, pod: Any) -> tuple[bool, str]:
        if pod.spec.preemptionPolicy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = pod.status.nominatedNodeName
        if nominated:
            info = self.handle.node_info(nominated) if self.handle is not None else None
            if info is not None:
                prio = _priority(pod)
                for pi in info.pods:
                    if pi.pod.metadata.HasField("deletionTimestamp") and _priority(pi.pod) < prio:
                        return False, "not eligible: victims on the nominated node are still terminating"
        return True, ""

    def _dry_run(self, state: CycleState, pod: Any, nodes: list[NodeInfo],
                 outcome: dict[str, str]) -> list[_Candidate]:
        n = len(nodes)
        want = min(n, max(n * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))
        offset = self.rng.randrange(n)
        out = []
        for i in range(n):
            node = nodes[(offset + i) % n]
            selected = self._select_victims(state, pod, node, outcome)
            if selected is not None:
                out.append(_Candidate(node.name, *selected))
                if len(out) >= want:
                    break
        return out

    def _select_victims(self, state: CycleState, pod: Any, node: NodeInfo,
                        outcome: dict[str, str]) -> tuple[list[PodInfo], int] | None:
        assert self.handle is not None  # post_filter checked it
        fwk = self.handle.framework_for(pod)
        info = node.clone()
        st = state.clone()
        prio = _priority(pod)
        potential = [pi for pi in info.pods if _priority(pi.pod) < prio]
        if not potential:
            outcome[node.name] = "No preemption victims found for incoming pod"
            return None
        for pi in potential:
            info.remove_pod(pi.uid)
            for p in fwk.pre_filter:
                if p.name not in st.skip_filter:
                    p.remove_pod(st, pod, pi, info)
        nominated = self.handle.nominated_for_node(node.name)
        fits = fwk.run_filter_with_nominated_pods(st, pod, info, nominated)
        if not fits.ok:
            outcome[node.name] = fits.message
            return None
        ordered = sorted(potential, key=lambda p: (-_priority(p.pod), _start_time(p.pod)))
        violating, fine = split_by_pdb_violation(ordered, self.handle.pod_disruption_budgets())
        protected = {id(pi) for pi in violating}
        victims: list[PodInfo] = []
        violations = 0
        for pi in [*violating, *fine]:  # keep as many as possible: PDB-protected, then most important
            info.add_pod(pi)
            for p in fwk.pre_filter:
                if p.name not in st.skip_filter:
                    p.add_pod(st, pod, pi, info)
            if fwk.run_filter_with_nominated_pods(st, pod, info, nominated).ok:
                continue  # reprieved
            info.remove_pod(pi.uid)
            for p in fwk.pre_filter:
                if p.name not in st.skip_filter:
                    p.remove_pod(st, pod, pi, info)
            victims.append(pi)
            if id(pi) in protected:
                violations += 1
        return victims, violations

    def _select(self, candidates: list[_Candidate]) -> _Candidate:
        for c in candidates:
            if not c.victims:
                return c
        def highest(c: _Candidate) -> int:
            return max(_priority(v.pod) for v in c.victims)

        def total(c: _Candidate) -> int:
            return sum(_priority(v.pod) + _INT32_OFFSET for v in c.victims)

        def earliest_of_highest(c: _Candidate) -> float:
            top = highest(c)
            return min(_start_time(v.pod) for v in c.victims if _priority(v.pod) == top)

        pool = candidates
        for key, pick in ((lambda c: c.pdb_violations, min), (highest, min), (total, min),
                          (lambda c: len(c.victims), min), (earliest_of_highest, max)):
            target = pick(key(c) for c in pool)
            pool = [c for c in pool if key(c) == target]
            if len(pool) == 1:
                break
        return pool[0]

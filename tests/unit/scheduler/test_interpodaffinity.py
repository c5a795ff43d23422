"""InterPodAffinity: required affinity/anti-affinity both ways, self-affinity, preferred scoring."""

from __future__ import annotations

from scheduler.cache import Cache, Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code
from scheduler.plugins.interpodaffinity import (
    ERR_AFFINITY, ERR_ANTI_AFFINITY, ERR_EXISTING_ANTI_AFFINITY, InterPodAffinity,
)
from protos.kubeling.v1 import core_pb2
from tests.unit.scheduler.builders import make_node, make_pod


class _Handle:
    def __init__(self, snap: Snapshot) -> None:
        self.snap, self.client = snap, None

    def node_infos(self):  # type: ignore[no-untyped-def]
        return self.snap.node_infos()

    def node_info(self, name):  # type: ignore[no-untyped-def]
        return self.snap.get(name)

    def node_table(self):  # type: ignore[no-untyped-def]
        return self.snap.table


def _term(key: str, op: str, values: list[str], topology: str) -> core_pb2.PodAffinityTerm:
    t = core_pb2.PodAffinityTerm(topologyKey=topology)
    t.labelSelector.matchExpressions.add(key=key, operator=op, values=values)
    return t


def _snap(nodes: dict[str, dict[str, str]], pods: list[core_pb2.Pod]) -> Snapshot:
    cache = Cache()
    for name, labels in nodes.items():
        cache.add_node(make_node(name, "8", "8Gi", "110", labels=labels))
    for p in pods:
        cache.add_pod(p)
    snap = Snapshot()
    cache.update_snapshot(snap)
    return snap


def _filter(snap: Snapshot, pod: core_pb2.Pod) -> dict[str, tuple[Code, tuple[str, ...]]]:
    pl = InterPodAffinity(handle=_Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos())
    if s.is_skip:
        return {n.name: (Code.SUCCESS, ()) for n in snap.node_infos()}
    out = {}
    for n in snap.node_infos():
        st = pl.filter(state, pod, n)
        out[n.name] = (st.code, st.reasons)
    return out


NODES = {"node1": {"region": "r1", "zone": "z11", "kubernetes.io/hostname": "node1"},
         "node2": {"region": "r1", "zone": "z12", "kubernetes.io/hostname": "node2"},
         "node3": {"region": "r2", "zone": "z21", "kubernetes.io/hostname": "node3"}}


def test_required_affinity_in_operator_matches_existing_pod() -> None:
    existing = make_pod("existing", node="node1", labels={"service": "securityscan"})
    pod = make_pod("p", labels={"app": "x"})
    pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("service", "In", ["securityscan", "value2"], "region"))
    got = _filter(_snap(NODES, [existing]), pod)
    assert got["node1"][0] is Code.SUCCESS and got["node2"][0] is Code.SUCCESS  # same region r1
    assert got["node3"] == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_AFFINITY,))


def test_required_affinity_not_matching_anything_is_unresolvable() -> None:
    existing = make_pod("existing", node="node1", labels={"service": "other"})
    pod = make_pod("p")
    pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("service", "In", ["securityscan"], "region"))
    got = _filter(_snap(NODES, [existing]), pod)
    assert {c for c, _ in got.values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_first_pod_of_a_self_affine_series_may_go_anywhere() -> None:
    pod = make_pod("p", labels={"app": "db"})
    pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["db"], "zone"))
    got = _filter(_snap(NODES, []), pod)
    assert {c for c, _ in got.values()} == {Code.SUCCESS}


def test_anti_affinity_both_ways() -> None:
    existing = make_pod("existing", node="node1", labels={"app": "web"})
    pod = make_pod("p", labels={"app": "web"})
    pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["web"], "zone"))
    got = _filter(_snap(NODES, [existing]), pod)
    assert got["node1"] == (Code.UNSCHEDULABLE, (ERR_ANTI_AFFINITY,))
    assert got["node2"][0] is Code.SUCCESS and got["node3"][0] is Code.SUCCESS
    # the existing pod's anti-affinity keeps a matching newcomer out of its region
    guard = make_pod("guard", node="node3", labels={"role": "guard"})
    guard.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["web"], "region"))
    got = _filter(_snap(NODES, [guard]), make_pod("newcomer", labels={"app": "web"}))
    assert got["node3"] == (Code.UNSCHEDULABLE, (ERR_EXISTING_ANTI_AFFINITY,))
    assert got["node1"][0] is Code.SUCCESS
    # pods in other namespaces do not match a term that names no namespaces
    other_ns = make_pod("existing2", node="node2", labels={"app": "web"})
    other_ns.metadata.namespace = "elsewhere"
    got = _filter(_snap(NODES, [other_ns]), pod)
    assert {c for c, _ in got.values()} == {Code.SUCCESS}


def test_plain_pods_skip_the_plugin() -> None:
    pl = InterPodAffinity(handle=_Handle(_snap(NODES, [make_pod("x", node="node1")])))  # type: ignore[arg-type]
    _, s = pl.pre_filter(CycleState(), make_pod("p"), [])
    assert s.is_skip
    assert pl.pre_score(CycleState(), make_pod("p"), []).is_skip


def test_preferred_affinity_scores() -> None:
    existing = make_pod("existing", node="node1", labels={"security": "S1"})
    pod = make_pod("p")
    pod.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.add(
        weight=5, podAffinityTerm=_term("security", "In", ["S1"], "region"))
    snap = _snap(NODES, [existing])
    pl = InterPodAffinity(handle=_Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    assert pl.pre_score(state, pod, snap.node_infos()).ok
    raw = [NodeScore(n.name, pl.score(state, pod, n)[0]) for n in snap.node_infos()]
    assert [s.score for s in raw] == [5, 5, 0]  # region r1 holds the matching pod
    normalized, _ = pl.normalize_score(state, pod, raw)
    assert [s.score for s in normalized] == [100, 100, 0]


async def test_scheduler_spreads_replicas_with_anti_affinity() -> None:
    from tests.unit.scheduler.harness import drain, make_scheduler
    sched = make_scheduler()
    for name, labels in NODES.items():
        sched.on_node_add(make_node(name, "8", "8Gi", "110", labels=labels))
    for i in range(4):
        pod = make_pod(f"web-{i}", {"cpu": "100m"}, labels={"app": "web"})
        pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
            _term("app", "In", ["web"], "kubernetes.io/hostname"))
        sched.on_pod_add(pod)
    await drain(sched)
    placed = sched.bindings  # type: ignore[attr-defined]
    assert len(placed) == 3 and len(set(placed.values())) == 3  # one per node; the 4th waits
    assert len(sched.queue.unschedulable) == 1

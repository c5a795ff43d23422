"""InterPodAffinity: required affinity/anti-affinity both ways, self-affinity, preferred scoring."""

from __future__ import annotations

from protos.kubeling.v1 import core_pb2
from scheduler.cache import Cache, Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code
from scheduler.plugins.interpodaffinity import InterPodAffinity
from tests.unit.scheduler.builders import SnapshotHandle, make_node, make_pod, snapshot_of

# upstream's reasons (framework/plugins/interpodaffinity/filtering.go), word for word
ERR_AFFINITY = "node(s) didn't match pod affinity rules"  # ErrReasonAffinityRulesNotMatch
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"  # ErrReasonAntiAffinityRulesNotMatch
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"  # ...ExistingAntiAffinity...


def _term(key: str, op: str, values: list[str], topology: str) -> core_pb2.PodAffinityTerm:
    t = core_pb2.PodAffinityTerm(topologyKey=topology)
    t.labelSelector.matchExpressions.add(key=key, operator=op, values=values)
    return t




def _filter(snap: Snapshot, pod: core_pb2.Pod) -> dict[str, tuple[Code, tuple[str, ...]]]:
    pl = InterPodAffinity(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
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
    got = _filter(snapshot_of(NODES, [existing]), pod)
    assert got["node1"][0] is Code.SUCCESS and got["node2"][0] is Code.SUCCESS  # same region r1
    assert got["node3"] == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_AFFINITY,))


def test_required_affinity_not_matching_anything_is_unresolvable() -> None:
    existing = make_pod("existing", node="node1", labels={"service": "other"})
    pod = make_pod("p")
    pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("service", "In", ["securityscan"], "region"))
    got = _filter(snapshot_of(NODES, [existing]), pod)
    assert {c for c, _ in got.values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_first_pod_of_a_self_affine_series_may_go_anywhere() -> None:
    pod = make_pod("p", labels={"app": "db"})
    pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["db"], "zone"))
    got = _filter(snapshot_of(NODES, []), pod)
    assert {c for c, _ in got.values()} == {Code.SUCCESS}


def test_anti_affinity_both_ways() -> None:
    existing = make_pod("existing", node="node1", labels={"app": "web"})
    pod = make_pod("p", labels={"app": "web"})
    pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["web"], "zone"))
    got = _filter(snapshot_of(NODES, [existing]), pod)
    assert got["node1"] == (Code.UNSCHEDULABLE, (ERR_ANTI_AFFINITY,))
    assert got["node2"][0] is Code.SUCCESS and got["node3"][0] is Code.SUCCESS
    # the existing pod's anti-affinity keeps a matching newcomer out of its region
    guard = make_pod("guard", node="node3", labels={"role": "guard"})
    guard.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(
        _term("app", "In", ["web"], "region"))
    got = _filter(snapshot_of(NODES, [guard]), make_pod("newcomer", labels={"app": "web"}))
    assert got["node3"] == (Code.UNSCHEDULABLE, (ERR_EXISTING_ANTI_AFFINITY,))
    assert got["node1"][0] is Code.SUCCESS
    # pods in other namespaces do not match a term that names no namespaces
    other_ns = make_pod("existing2", node="node2", labels={"app": "web"})
    other_ns.metadata.namespace = "elsewhere"
    got = _filter(snapshot_of(NODES, [other_ns]), pod)
    assert {c for c, _ in got.values()} == {Code.SUCCESS}


def test_plain_pods_skip_the_plugin() -> None:
    pl = InterPodAffinity(handle=SnapshotHandle(snapshot_of(NODES, [make_pod("x", node="node1")])))  # type: ignore[arg-type]
    _, s = pl.pre_filter(CycleState(), make_pod("p"), [])
    assert s.is_skip
    assert pl.pre_score(CycleState(), make_pod("p"), []).is_skip


def test_preferred_affinity_scores() -> None:
    existing = make_pod("existing", node="node1", labels={"security": "S1"})
    pod = make_pod("p")
    pod.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.add(
        weight=5, podAffinityTerm=_term("security", "In", ["S1"], "region"))
    snap = snapshot_of(NODES, [existing])
    pl = InterPodAffinity(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
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


# ---------------------------------------------------------------- upstream scoring_test.go cases

def _weighted(weight: int, term: core_pb2.PodAffinityTerm) -> core_pb2.WeightedPodAffinityTerm:
    return core_pb2.WeightedPodAffinityTerm(weight=weight, podAffinityTerm=term)


def _aff(affinity: list | None = None, anti: list | None = None,
         hard: list | None = None) -> core_pb2.Affinity:
    a = core_pb2.Affinity()
    for w in affinity or []:
        a.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.append(w)
    for w in anti or []:
        a.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.append(w)
    for t in hard or []:
        a.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.append(t)
    return a


def _multi(topology: str, *exprs: tuple[str, str, list[str]]) -> core_pb2.PodAffinityTerm:
    t = core_pb2.PodAffinityTerm(topologyKey=topology)
    for key, op, values in exprs:
        t.labelSelector.matchExpressions.add(key=key, operator=op, values=values)
    return t


S1, S2 = {"security": "S1"}, {"security": "S2"}
CHINA, INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}
STAY_S1 = _aff([_weighted(5, _term("security", "In", ["S1"], "region"))])
STAY_S2 = _aff([_weighted(6, _term("security", "In", ["S2"], "region"))])
AFFINITY3 = _aff([_weighted(8, _multi("region", ("security", "NotIn", ["S1"]), ("security", "In", ["S2"]))),
                  _weighted(2, _multi("region", ("security", "Exists", []), ("wrongkey", "DoesNotExist", [])))])
HARD = _aff(hard=[_term("security", "In", ["S1", "value2"], "region"),
                  _multi("region", ("security", "Exists", []), ("wrongkey", "DoesNotExist", []))])
AWAY_S1_AZ = _aff(anti=[_weighted(5, _term("security", "In", ["S1"], "az"))])
AWAY_S2_AZ = _aff(anti=[_weighted(5, _term("security", "In", ["S2"], "az"))])
STAY_S1_AWAY_S2 = _aff([_weighted(8, _term("security", "In", ["S1"], "region"))],
                       [_weighted(5, _term("security", "In", ["S2"], "az"))])


def _with(labels: dict[str, str] | None, node: str = "", affinity: core_pb2.Affinity | None = None) -> core_pb2.Pod:
    pod = make_pod("", node=node, labels=labels or {})
    if affinity is not None:
        pod.spec.affinity.CopyFrom(affinity)
    return pod


def _score(nodes: list[tuple[str, dict[str, str]]], pods: list[core_pb2.Pod], pod: core_pb2.Pod) -> list[int] | None:
    cache = Cache()
    for name, labels in nodes:
        cache.add_node(make_node(name, "8", "8Gi", "110", labels=labels))
    for p in pods:
        cache.add_pod(p)
    snap = Snapshot()
    cache.update_snapshot(snap)
    pl = InterPodAffinity(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
    state = CycleState()
    if pl.pre_score(state, pod, snap.node_infos()).is_skip:
        return None
    raw = [NodeScore(n.name, pl.score(state, pod, n)[0]) for n in snap.node_infos()]
    return [s.score for s in pl.normalize_score(state, pod, raw)[0]]


def test_preferred_affinity_upstream_cases() -> None:
    three = [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)]
    assert _score(three, [], _with(S1)) is None  # no affinity anywhere: Skip
    assert _score(three, [_with(S1, "node1"), _with(S2, "node2"), _with(S1, "node3")],
                  _with(S1, affinity=STAY_S1)) == [100, 0, 0]
    assert _score([("node1", CHINA), ("node2", {**CHINA, **AZ1}), ("node3", INDIA)], [_with(S1, "node1")],
                  _with({}, affinity=STAY_S1)) == [100, 100, 0]
    five = [("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)]
    assert _score(five, [_with(S2, "node1"), _with(S2, "node1"), _with(S2, "node2"), _with(S2, "node3"),
                         _with(S2, "node4"), _with(S2, "node5")],
                  _with(S1, affinity=STAY_S2)) == [100, 0, 100, 100, 0]
    # different operators, including some match failures
    assert _score(three, [_with(S1, "node1"), _with(S2, "node2"), _with(S1, "node3")],
                  _with(S1, affinity=AFFINITY3)) == [20, 100, 0]


def test_symmetry_upstream_cases() -> None:
    three = [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)]
    # existing pods' preferred affinity that the incoming pod satisfies
    assert _score(three, [_with(S1, "node1", STAY_S1), _with(S2, "node2", STAY_S2)], _with(S2)) == [0, 100, 0]
    # existing pods' required affinity counts at hardPodAffinityWeight
    assert _score(three, [_with(S1, "node1", HARD), _with(S2, "node2", HARD)], _with(S1)) == [100, 100, 0]
    # anti-affinity symmetry
    assert _score([("node1", AZ1), ("node2", AZ2)], [_with(S1, "node1", AWAY_S2_AZ), _with(S2, "node2", AWAY_S1_AZ)],
                  _with(S2)) == [0, 100]
    # kubernetes#82796: partial topology coverage, incoming pod without affinity
    assert _score([("node1", CHINA), ("node2", CHINA)], [_with(S1, "node1"), _with({}, "node2", STAY_S1_AWAY_S2)],
                  _with(S1)) == [0, 0]


def test_anti_affinity_and_combined_upstream_cases() -> None:
    assert _score([("node1", AZ1), ("node2", CHINA)], [_with(S1, "node1"), _with(S2, "node2")],
                  _with(S1, affinity=AWAY_S1_AZ)) == [0, 100]
    assert _score([("node1", AZ1), ("node2", INDIA)], [_with(S1, "node1"), _with(S1, "node1"), _with(S2, "node2")],
                  _with(S1, affinity=AWAY_S1_AZ)) == [0, 100]
    assert _score([("node1", CHINA), ("node2", AZ1)], [_with(S1, "node1"), _with(S1, "node2")],
                  _with(S1, affinity=STAY_S1_AWAY_S2)) == [100, 0]
    five = [("node1", {**CHINA, **AZ1}), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)]
    assert _score(five, [_with(S1, "node1"), _with(S1, "node1"), _with(S1, "node2"), _with(S1, "node3"),
                         _with(S1, "node3"), _with(S1, "node4"), _with(S1, "node5")],
                  _with(S1, affinity=STAY_S1_AWAY_S2)) == [100, 0, 100, 100, 0]
    # affinity, anti-affinity and both symmetries together: weights 8, -5, 8, -5
    assert _score([("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)],
                  [_with(S1, "node1"), _with(S2, "node2"), _with({}, "node3", STAY_S1_AWAY_S2),
                   _with({}, "node4", AWAY_S1_AZ)],
                  _with(S1, affinity=STAY_S1_AWAY_S2)) == [100, 0, 100, 0]

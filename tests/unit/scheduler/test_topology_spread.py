"""PodTopologySpread: skew filter, minDomains, inclusion policies, scoring."""

from __future__ import annotations

from protos.kubeling.v1 import core_pb2
from scheduler.cache import Cache, Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code
from scheduler.plugins.podtopologyspread import PodTopologySpread
from tests.unit.scheduler.builders import SnapshotHandle, make_node, make_pod


def _cluster(nodes: dict[str, dict[str, str]], pods: dict[str, int], labels: dict[str, str] | None = None):
    cache = Cache()
    for name, node_labels in nodes.items():
        cache.add_node(make_node(name, "8", "8Gi", "110", labels=node_labels))
    for node, count in pods.items():
        for i in range(count):
            cache.add_pod(make_pod(f"{node}-{i}", node=node, labels=labels or {"foo": ""}))
    snap = Snapshot()
    cache.update_snapshot(snap)
    return snap


def _spread_pod(key: str, max_skew: int = 1, when: str = "DoNotSchedule", **kw: object) -> core_pb2.Pod:
    pod = make_pod("p", labels={"foo": ""})
    c = pod.spec.topologySpreadConstraints.add(maxSkew=max_skew, topologyKey=key, whenUnsatisfiable=when)
    c.labelSelector.matchExpressions.add(key="foo", operator="Exists")
    for k, v in kw.items():
        setattr(c, k, v)
    return pod


ZONES = {"node-a": {"zone": "zone1", "kubernetes.io/hostname": "node-a"},
         "node-b": {"zone": "zone1", "kubernetes.io/hostname": "node-b"},
         "node-x": {"zone": "zone2", "kubernetes.io/hostname": "node-x"},
         "node-y": {"zone": "zone2", "kubernetes.io/hostname": "node-y"}}


def _fits(snap: Snapshot, pod: core_pb2.Pod) -> dict[str, Code]:
    pl = PodTopologySpread(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos())
    assert s.ok
    return {n.name: pl.filter(state, pod, n).code for n in snap.node_infos()}


def test_skew_filter_by_zone() -> None:
    snap = _cluster(ZONES, {"node-a": 2, "node-x": 1})
    got = _fits(snap, _spread_pod("zone"))
    # zone1 has 2, zone2 has 1: only zone2 keeps the skew <= 1
    assert got == {"node-a": Code.UNSCHEDULABLE, "node-b": Code.UNSCHEDULABLE,
                   "node-x": Code.SUCCESS, "node-y": Code.SUCCESS}
    got = _fits(snap, _spread_pod("zone", max_skew=2))
    assert set(got.values()) == {Code.SUCCESS}


def test_missing_label_is_unresolvable_and_other_namespaces_do_not_count() -> None:
    nodes = dict(ZONES)
    nodes["node-nolabel"] = {}
    snap = _cluster(nodes, {"node-a": 3})
    got = _fits(snap, _spread_pod("zone", max_skew=5))
    assert got["node-nolabel"] is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    pod = _spread_pod("zone")
    pod.metadata.namespace = "other"  # the 3 pods on node-a are in "default"
    assert set(_fits(snap, pod).values()) - {Code.UNSCHEDULABLE_AND_UNRESOLVABLE} == {Code.SUCCESS}


def test_min_domains_treats_the_minimum_as_zero() -> None:
    snap = _cluster(ZONES, {"node-a": 1, "node-x": 1})
    assert set(_fits(snap, _spread_pod("zone")).values()) == {Code.SUCCESS}
    got = _fits(snap, _spread_pod("zone", minDomains=3))  # only 2 zones exist
    assert set(got.values()) == {Code.UNSCHEDULABLE}


def test_node_affinity_policy_honor_excludes_nodes_from_counting() -> None:
    nodes = {name: {**labels, "pool": "x" if name != "node-a" else "y"} for name, labels in ZONES.items()}
    snap = _cluster(nodes, {"node-a": 3})
    pod = _spread_pod("zone")
    pod.spec.nodeSelector["pool"] = "x"
    # node-a does not match the pod's selector: its pods do not count (Honor, the default)
    assert _fits(snap, pod)["node-b"] is Code.SUCCESS
    ignore = _spread_pod("zone", nodeAffinityPolicy="Ignore")
    ignore.spec.nodeSelector["pool"] = "x"
    assert _fits(snap, ignore)["node-b"] is Code.UNSCHEDULABLE


def test_scoring_prefers_emptier_domains() -> None:
    snap = _cluster({"a": {"kubernetes.io/hostname": "a"}, "b": {"kubernetes.io/hostname": "b"},
                     "c": {"kubernetes.io/hostname": "c"}}, {"a": 2, "b": 1})
    pod = _spread_pod("kubernetes.io/hostname", when="ScheduleAnyway")
    pl = PodTopologySpread(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
    state = CycleState()
    nodes = snap.node_infos()
    assert pl.pre_score(state, pod, nodes).ok
    raw = [NodeScore(n.name, pl.score(state, pod, n)[0]) for n in nodes]
    # weight log(3+2)=1.609: a 2*1.609=3.22 -> 3, b 1.61 -> 1 (truncated), c 0
    assert [s.score for s in raw] == [3, 1, 0]
    normalized, _ = pl.normalize_score(state, pod, raw)
    assert [s.score for s in normalized] == [0, 66, 100]
    assert pl.pre_score(CycleState(), make_pod("plain"), nodes).is_skip


async def test_scheduler_spreads_a_workload_across_zones() -> None:
    from collections import Counter

    from tests.unit.scheduler.harness import drain, make_scheduler
    sched = make_scheduler()
    # zone1 has one big node, zone2 three small ones: resources alone would pile onto zone1's
    sched.on_node_add(make_node("big", "64", "64Gi", "110", labels={"zone": "zone1"}))
    for i in range(3):
        sched.on_node_add(make_node(f"small{i}", "4", "8Gi", "110", labels={"zone": "zone2"}))
    for i in range(8):
        pod = _spread_pod("zone")
        pod.metadata.name = f"web-{i}"
        pod.metadata.uid = f"uid-web-{i}"
        pod.spec.containers.add(name="c", image="busybox").resources.requests["cpu"] = "100m"
        sched.on_pod_add(pod)
    await drain(sched)
    zones = Counter("zone1" if n == "big" else "zone2" for n in sched.bindings.values())  # type: ignore[attr-defined]
    assert zones == {"zone1": 4, "zone2": 4}


def _scores(nodes: dict[str, dict[str, str]], pods: dict[str, int], pod: core_pb2.Pod,
            failed: tuple[str, ...] = ()) -> dict[str, int]:
    snap = _cluster(nodes, pods)
    pl = PodTopologySpread(handle=SnapshotHandle(snap))  # type: ignore[arg-type]
    state = CycleState()
    candidates = [n for n in snap.node_infos() if n.name not in failed]
    assert pl.pre_score(state, pod, candidates).ok
    raw = [NodeScore(n.name, pl.score(state, pod, n)[0]) for n in candidates]
    normalized, _ = pl.normalize_score(state, pod, raw)
    return {s.name: s.score for s in normalized}


def _hosts(*names: str) -> dict[str, dict[str, str]]:
    return {n: {"kubernetes.io/hostname": n} for n in names}


def test_scoring_upstream_cases() -> None:
    """scoring_test.go (TestPodTopologySpreadScore), same inputs, same expected scores."""
    soft = "ScheduleAnyway"
    # one constraint on node, all 4 nodes are candidates (2/1/0/3)
    spread = {"node-a": 2, "node-b": 1, "node-d": 3}
    nodes = _hosts("node-a", "node-b", "node-c", "node-d")
    assert _scores(nodes, spread, _spread_pod("kubernetes.io/hostname", 1, soft)) == \
        {"node-a": 40, "node-b": 80, "node-c": 100, "node-d": 0}
    assert _scores(nodes, spread, _spread_pod("kubernetes.io/hostname", 2, soft)) == \
        {"node-a": 50, "node-b": 83, "node-c": 100, "node-d": 16}
    assert _scores(nodes, {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1},
                   _spread_pod("kubernetes.io/hostname", 3, soft)) == \
        {"node-a": 33, "node-b": 55, "node-c": 77, "node-d": 100}
    # one constraint on node, 3 out of 4 nodes are candidates (4/2/1/~3~)
    four = {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}
    assert _scores(_hosts("node-a", "node-b", "node-x", "node-y"), four,
                   _spread_pod("kubernetes.io/hostname", 1, soft), failed=("node-y",)) == \
        {"node-a": 16, "node-b": 66, "node-x": 100}
    # one constraint on zone, 3 out of 4 nodes are candidates
    zoned = {n: {"zone": z, "kubernetes.io/hostname": n}
             for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))}
    assert _scores(zoned, four, _spread_pod("zone", 1, soft), failed=("node-y",)) == \
        {"node-a": 62, "node-b": 62, "node-x": 100}

"""The plugins a Policy's predicates and priorities become (upstream 1.19-1.22), on upstream's
own test vectors: SelectorSpread (selector_spread_test.go, with zones), ServiceAffinity
(service_affinity_test.go), NodeLabel, NodePreferAvoidPods, the per-strategy resource
scores; and PodTopologySpread's default constraints, which replaced SelectorSpread."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from scheduler.cache import Cache, Snapshot
from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code
from scheduler.plugins.nodelabel import NodeLabel
from scheduler.plugins.nodepreferavoidpods import PREFER_AVOID_PODS, NodePreferAvoidPods
from scheduler.plugins.noderesources import Fit, LeastAllocated, MostAllocated, RequestedToCapacityRatio
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.selectorspread import SelectorSpread
from scheduler.plugins.serviceaffinity import ServiceAffinity
from tests.unit.scheduler.builders import SnapshotHandle, make_node, make_pod, snapshot_of

ZONE = "topology.kubernetes.io/zone"


def _pod(name: str = "", node: str = "", labels: dict[str, str] | None = None, namespace: str = "default",
         owner: tuple[str, str] | None = None) -> core_pb2.Pod:
    pod = make_pod(name, node=node, labels=labels)
    pod.metadata.namespace = namespace
    if owner is not None:
        kind, owner_name = owner
        pod.metadata.ownerReferences.add(apiVersion="apps/v1" if kind == "ReplicaSet" else "v1", kind=kind,
                                         name=owner_name, uid=f"uid-{owner_name}", controller=True)
    return pod


def _service(selector: dict[str, str], namespace: str = "default", name: str = "s1") -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace),
                            spec=core_pb2.ServiceSpec(selector=selector))


def _replica_set(name: str, match: dict[str, str], namespace: str = "default") -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace))
    rs.spec.selector.matchLabels.update(match)
    return rs




def _scores(plugin: Any, snap: Snapshot, pod: core_pb2.Pod) -> dict[str, int]:
    """PreScore (if any), Score on every node, NormalizeScore: the plugin's final scores."""
    state = CycleState()
    nodes = snap.node_infos()
    if hasattr(plugin, "pre_score"):
        assert plugin.pre_score(state, pod, nodes).ok
    raw = [NodeScore(n.name, plugin.score(state, pod, n)[0]) for n in nodes]
    normalized, status = plugin.normalize_score(state, pod, raw)
    assert status.ok
    return {s.name: s.score for s in normalized}


# ---------------------------------------------------------------- SelectorSpread

L1 = {"foo": "bar", "baz": "blah"}
L2 = {"bar": "foo", "baz": "blah"}
TWO_NODES: dict[str, dict[str, str]] = {"node1": {}, "node2": {}}


@pytest.mark.parametrize("name,pod,pods,services,replica_sets,want", [
    ("nothing scheduled", _pod("p"), [], [], [], {"node1": 100, "node2": 100}),
    ("no services", _pod("p", labels=L1), [_pod(node="node1")], [], [], {"node1": 100, "node2": 100}),
    ("different services", _pod("p", labels=L1), [_pod(node="node1", labels=L2)], [_service({"key": "value"})], [],
     {"node1": 100, "node2": 100}),
    ("two pods, one service pod", _pod("p", labels=L1),
     [_pod(node="node1", labels=L2), _pod(node="node2", labels=L1)], [_service(L1)], [], {"node1": 100, "node2": 0}),
    ("five pods, one service pod in no namespace", _pod("p", labels=L1),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1, namespace="ns1"), _pod(node="node2", labels=L1),
      _pod(node="node2", labels=L2)], [_service(L1)], [], {"node1": 100, "node2": 0}),
    ("three pods, two service pods on different nodes", _pod("p", labels=L1),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [_service(L1)], [], {"node1": 0, "node2": 0}),
    ("four pods, three service pods", _pod("p", labels=L1),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1),
      _pod(node="node2", labels=L1)], [_service(L1)], [], {"node1": 50, "node2": 0}),
    ("service with partial pod label matches", _pod("p", labels=L1),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [_service({"baz": "blah"})], [], {"node1": 0, "node2": 50}),
    # "baz=blah" matches both label sets, "foo=bar" only L1: spread the pods of both together
    ("service with partial pod label matches with service and replica set",
     _pod("p", labels=L1, owner=("ReplicaSet", "rs1")),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [_service({"baz": "blah"})], [_replica_set("rs1", {"foo": "bar"}), _replica_set("rs2", {"bar": "foo"})],
     {"node1": 0, "node2": 0}),
    ("disjoined service and replica set matches no pods",
     _pod("p", labels={"foo": "bar", "bar": "foo"}, owner=("ReplicaSet", "rs3")),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [_service({"bar": "foo"})], [_replica_set("rs3", {"foo": "bar"})], {"node1": 100, "node2": 100}),
    ("Replica set with partial pod label matches", _pod("p", labels=L1, owner=("ReplicaSet", "rs1")),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [], [_replica_set("rs1", {"foo": "bar"})], {"node1": 0, "node2": 0}),
    ("Another replica set with partial pod label matches", _pod("p", labels=L1, owner=("ReplicaSet", "rs3")),
     [_pod(node="node1", labels=L2), _pod(node="node1", labels=L1), _pod(node="node2", labels=L1)],
     [], [_replica_set("rs3", {"baz": "blah"})], {"node1": 0, "node2": 50}),
])
def test_selector_spread_score(name: str, pod: core_pb2.Pod, pods: list[core_pb2.Pod],
                               services: list[core_pb2.Service], replica_sets: list[apps_pb2.ReplicaSet],
                               want: dict[str, int]) -> None:
    """TestSelectorSpreadScore (its ReplicationController and StatefulSet cases have the
    ReplicaSet's shape: kubeling serves neither yet)."""
    snap = snapshot_of(TWO_NODES, pods)
    pl = SelectorSpread(handle=SnapshotHandle(snap, services, replica_sets))  # type: ignore[arg-type]
    assert _scores(pl, snap, pod) == want


def test_selector_spread_leaves_pods_with_their_own_constraints_to_pod_topology_spread() -> None:
    pod = _pod("p", labels=L1, owner=("ReplicaSet", "rs1"))
    pod.spec.topologySpreadConstraints.add(maxSkew=1, topologyKey="foo", whenUnsatisfiable="DoNotSchedule")
    snap = snapshot_of(TWO_NODES, [_pod(node="node1", labels=L1)])
    pl = SelectorSpread(handle=SnapshotHandle(snap, [], [_replica_set("rs1", {"baz": "blah"})]))  # type: ignore
    assert pl.pre_score(CycleState(), pod, snap.node_infos()).is_skip


ZONED = {"node1.zone1": {ZONE: "zone1"}, "node1.zone2": {ZONE: "zone2"}, "node2.zone2": {ZONE: "zone2"},
         "node1.zone3": {ZONE: "zone3"}, "node2.zone3": {ZONE: "zone3"}, "node3.zone3": {ZONE: "zone3"}}
Z1 = {"label1": "l1", "baz": "blah"}
Z2 = {"label2": "l2", "baz": "blah"}


@pytest.mark.parametrize("pods,owner,want", [
    # two pods, 1 matching (in z2)
    ([("node1.zone1", Z2), ("node1.zone2", Z1)], None,
     {"node1.zone1": 100, "node1.zone2": 0, "node2.zone2": 33, "node1.zone3": 100, "node2.zone3": 100,
      "node3.zone3": 100}),
    # five pods, 3 matching (z2=2, z3=1)
    ([("node1.zone1", Z2), ("node1.zone2", Z1), ("node2.zone2", Z1), ("node1.zone3", Z2), ("node2.zone3", Z1)], None,
     {"node1.zone1": 100, "node1.zone2": 0, "node2.zone2": 0, "node1.zone3": 66, "node2.zone3": 33,
      "node3.zone3": 66}),
    # four pods, 3 matching (z1=1, z2=1, z3=1)
    ([("node1.zone1", Z1), ("node1.zone2", Z1), ("node2.zone2", Z2), ("node1.zone3", Z1)], None,
     {"node1.zone1": 0, "node1.zone2": 0, "node2.zone2": 33, "node1.zone3": 0, "node2.zone3": 33,
      "node3.zone3": 33}),
    # five pods, 4 matching (z1=1, z2=2, z3=1)
    ([("node1.zone1", Z1), ("node1.zone2", Z1), ("node2.zone2", Z1), ("node2.zone2", Z2), ("node1.zone3", Z1)], None,
     {"node1.zone1": 33, "node1.zone2": 0, "node2.zone2": 0, "node1.zone3": 33, "node2.zone3": 66,
      "node3.zone3": 66}),
    # a controller's pods spread (z1=0, z2=1, z3=2), upstream's ReplicationController case
    ([("node1.zone3", Z1), ("node1.zone2", Z1), ("node1.zone3", Z1)], ("ReplicaSet", "rs1"),
     {"node1.zone1": 100, "node1.zone2": 50, "node2.zone2": 66, "node1.zone3": 0, "node2.zone3": 33,
      "node3.zone3": 33}),
])
def test_zone_selector_spread_priority(pods: list[tuple[str, dict[str, str]]], owner: tuple[str, str] | None,
                                       want: dict[str, int]) -> None:
    """TestZoneSelectorSpreadPriority: 2/3 of the score from the zone, 1/3 from the node."""
    snap = snapshot_of(ZONED, [_pod(node=n, labels=labels) for n, labels in pods])
    services = [] if owner else [_service(Z1)]
    pl = SelectorSpread(handle=SnapshotHandle(snap, services, [_replica_set("rs1", Z1)]))  # type: ignore[arg-type]
    assert _scores(pl, snap, _pod("p", labels=Z1, owner=owner)) == want


# ---------------------------------------------------------------- ServiceAffinity

SELECTOR = {"foo": "bar"}
MACHINES = {"machine1": {"region": "r1", "zone": "z11"}, "machine2": {"region": "r1", "zone": "z12"},
            "machine3": {"region": "r2", "zone": "z21"}, "machine4": {"region": "r2", "zone": "z22"},
            "machine5": {"region": "r2", "zone": "z22"}}


def _selecting(node_selector: dict[str, str], labels: dict[str, str] | None = None,
               namespace: str = "default") -> core_pb2.Pod:
    pod = _pod("p", labels=labels, namespace=namespace)
    pod.spec.nodeSelector.update(node_selector)
    return pod


@pytest.mark.parametrize("name,pod,pods,services,node,labels,code", [
    ("nothing scheduled", _pod("p"), [], [], "machine1", ["region"], Code.SUCCESS),
    ("pod with region label match", _selecting({"region": "r1"}), [], [], "machine1", ["region"], Code.SUCCESS),
    ("pod with region label mismatch", _selecting({"region": "r2"}), [], [], "machine1", ["region"],
     Code.UNSCHEDULABLE),
    ("service pod on same node", _pod("p", labels=SELECTOR), [_pod(node="machine1", labels=SELECTOR)],
     [_service(SELECTOR)], "machine1", ["region"], Code.SUCCESS),
    ("service pod on different node, region match", _pod("p", labels=SELECTOR),
     [_pod(node="machine2", labels=SELECTOR)], [_service(SELECTOR)], "machine1", ["region"], Code.SUCCESS),
    ("service pod on different node, region mismatch", _pod("p", labels=SELECTOR),
     [_pod(node="machine3", labels=SELECTOR)], [_service(SELECTOR)], "machine1", ["region"], Code.UNSCHEDULABLE),
    ("service in different namespace, region mismatch", _pod("p", labels=SELECTOR, namespace="ns1"),
     [_pod(node="machine3", labels=SELECTOR, namespace="ns1")], [_service(SELECTOR, "ns2")], "machine1",
     ["region"], Code.SUCCESS),
    ("pod in different namespace, region mismatch", _pod("p", labels=SELECTOR, namespace="ns1"),
     [_pod(node="machine3", labels=SELECTOR, namespace="ns2")], [_service(SELECTOR, "ns1")], "machine1",
     ["region"], Code.SUCCESS),
    ("service and pod in same namespace, region mismatch", _pod("p", labels=SELECTOR, namespace="ns1"),
     [_pod(node="machine3", labels=SELECTOR, namespace="ns1")], [_service(SELECTOR, "ns1")], "machine1",
     ["region"], Code.UNSCHEDULABLE),
    ("service pod on different node, multiple labels, not all match", _pod("p", labels=SELECTOR),
     [_pod(node="machine2", labels=SELECTOR)], [_service(SELECTOR)], "machine1", ["region", "zone"],
     Code.UNSCHEDULABLE),
    ("service pod on different node, multiple labels, all match", _pod("p", labels=SELECTOR),
     [_pod(node="machine5", labels=SELECTOR)], [_service(SELECTOR)], "machine4", ["region", "zone"], Code.SUCCESS),
])
def test_service_affinity_filter(name: str, pod: core_pb2.Pod, pods: list[core_pb2.Pod],
                                 services: list[core_pb2.Service], node: str, labels: list[str], code: Code) -> None:
    """TestServiceAffinity."""
    snap = snapshot_of(MACHINES, pods)
    pl = ServiceAffinity({"affinityLabels": labels}, SnapshotHandle(snap, services))  # type: ignore[arg-type]
    state = CycleState()
    assert pl.pre_filter(state, pod, snap.node_infos())[1].ok
    info = snap.get(node)
    assert info is not None
    status = pl.filter(state, pod, info)
    assert status.code is code
    if code is Code.UNSCHEDULABLE:
        assert status.reasons == ("node(s) didn't match service affinity",)


SL1 = {"foo": "bar", "baz": "blah"}
SL2 = {"bar": "foo", "baz": "blah"}
NOZONE = {"name": "value"}
LABELED = {"machine01": NOZONE, "machine02": NOZONE, "machine11": {"zone": "zone1"}, "machine12": {"zone": "zone1"},
           "machine21": {"zone": "zone2"}, "machine22": {"zone": "zone2"}}
RACKED = {"machine01": NOZONE, "machine02": NOZONE, "machine11": {"zone": "zone1", "rack": "rack1"},
          "machine12": {"zone": "zone1", "rack": "rack2"}, "machine21": {"zone": "zone2", "rack": "rack1"},
          "machine22": {"zone": "zone2", "rack": "rack1"}}


def _on(node: str, labels: dict[str, str] | None = None, namespace: str = "default") -> core_pb2.Pod:
    return _pod(node=node, labels=labels, namespace=namespace)


@pytest.mark.parametrize("name,nodes,pods,selector,labels,want", [
    ("nothing scheduled", LABELED, [], None, ["zone"], (100, 100, 100, 100, 0, 0)),
    ("no services", LABELED, [_on("machine11")], None, ["zone"], (100, 100, 100, 100, 0, 0)),
    ("different services", LABELED, [_on("machine11", SL2)], {"key": "value"}, ["zone"], (100, 100, 100, 100, 0, 0)),
    ("three pods, one service pod", LABELED, [_on("machine01", SL2), _on("machine11", SL2), _on("machine21", SL1)],
     SL1, ["zone"], (100, 100, 0, 0, 0, 0)),
    ("three pods, two service pods on different machines", LABELED,
     [_on("machine11", SL2), _on("machine11", SL1), _on("machine21", SL1)], SL1, ["zone"], (50, 50, 50, 50, 0, 0)),
    ("three service label match pods in different namespaces", LABELED,
     [_on("machine11", SL1, "ns0"), _on("machine11", SL1), _on("machine21", SL1, "ns0"), _on("machine21", SL1, "ns1")],
     SL1, ["zone"], (0, 0, 100, 100, 0, 0)),
    ("four pods, three service pods", LABELED,
     [_on("machine11", SL2), _on("machine11", SL1), _on("machine21", SL1), _on("machine21", SL1)], SL1, ["zone"],
     (66, 66, 33, 33, 0, 0)),
    ("service with partial pod label matches", LABELED,
     [_on("machine11", SL2), _on("machine11", SL1), _on("machine21", SL1)], {"baz": "blah"}, ["zone"],
     (33, 33, 66, 66, 0, 0)),
    ("service pod on non-zoned node", LABELED,
     [_on("machine01", SL1), _on("machine11", SL1), _on("machine21", SL1), _on("machine21", SL1)], SL1, ["zone"],
     (75, 75, 50, 50, 0, 0)),
    ("three pods, two service pods, with rack label", RACKED,
     [_on("machine01", SL2), _on("machine11", SL1), _on("machine21", SL1)], SL1, ["zone", "rack"],
     (25, 75, 25, 25, 0, 0)),
])
def test_service_affinity_score(name: str, nodes: dict[str, dict[str, str]], pods: list[core_pb2.Pod],
                                selector: dict[str, str] | None, labels: list[str],
                                want: tuple[int, ...]) -> None:
    """TestServiceAffinityScore: (machine11, machine12, machine21, machine22, machine01, machine02)."""
    snap = snapshot_of(nodes, pods)
    services = [_service(selector)] if selector else []
    pl = ServiceAffinity({"antiAffinityLabelsPreference": labels}, SnapshotHandle(snap, services))  # type: ignore
    got = _scores(pl, snap, _pod("p", labels=SL1))
    order = ("machine11", "machine12", "machine21", "machine22", "machine01", "machine02")
    assert tuple(got[n] for n in order) == want


# ---------------------------------------------------------------- NodeLabel, NodePreferAvoidPods

@pytest.mark.parametrize("labels,args,fits", [
    ({"foo": "any"}, {"presentLabels": ["foo"]}, True),
    ({"foo": "any"}, {"absentLabels": ["foo"]}, False),
    ({"foo": "any", "bar": "x"}, {"presentLabels": ["foo"], "absentLabels": ["baz"]}, True),
    ({"foo": "any", "bar": "x"}, {"presentLabels": ["foo", "baz"]}, False),
    ({}, {}, True),
])
def test_node_label_filter(labels: dict[str, str], args: dict[str, Any], fits: bool) -> None:
    info = snapshot_of({"n": labels}, []).get("n")
    assert info is not None
    status = NodeLabel(args).filter(CycleState(), _pod("p"), info)
    assert status.ok is fits
    if not fits:  # no preemption can add or remove a node's labels
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("node(s) didn't have the requested labels",)


@pytest.mark.parametrize("labels,args,score", [
    ({"foo": "1"}, {"presentLabelsPreference": ["foo"]}, 100),
    ({"foo": "1"}, {"absentLabelsPreference": ["foo"]}, 0),
    ({"foo": "1"}, {"presentLabelsPreference": ["foo", "somelabel"]}, 50),
    ({"foo": "1", "bar": "2"}, {"presentLabelsPreference": ["foo"], "absentLabelsPreference": ["somelabel"]}, 100),
    ({"foo": "1", "bar": "2"}, {"presentLabelsPreference": ["foo", "bar"], "absentLabelsPreference": ["bar"]}, 66),
])
def test_node_label_score(labels: dict[str, str], args: dict[str, Any], score: int) -> None:
    if set(args.get("presentLabelsPreference", [])) & set(args.get("absentLabelsPreference", [])):
        with pytest.raises(ConfigError, match=r"presentLabelsPreference\[1\]: Invalid value: 'bar': has conflict "
                                              r"with pluginConfig\[NodeLabel\].args.absentLabelsPreference\[0\]"):
            NodeLabel(args)
        return
    info = snapshot_of({"n": labels}, []).get("n")
    assert info is not None
    assert NodeLabel(args).score(CycleState(), _pod("p"), info)[0] == score


def test_node_prefer_avoid_pods() -> None:
    """TestNodePreferAvoidPods: only a ReplicationController's or ReplicaSet's pods are avoided,
    by the controller's kind and uid."""
    avoid = {"preferAvoidPods": [
        {"podSignature": {"podController": {"apiVersion": "v1", "kind": "ReplicationController", "name": "foo",
                                            "uid": "abcdef123456", "controller": True}},
         "reason": "some reason", "message": "some message"}]}
    nodes: dict[str, dict[str, str]] = {"machine1": {}, "machine2": {}, "machine3": {}}
    snap = snapshot_of(nodes, [])
    for name in ("machine1", "machine3"):
        info = snap.get(name)
        assert info is not None and info.node is not None
        info.node.metadata.annotations[PREFER_AVOID_PODS] = json.dumps(avoid)
    pl = NodePreferAvoidPods()

    def scores(pod: core_pb2.Pod) -> dict[str, int]:
        return {n.name: pl.score(CycleState(), pod, n)[0] for n in snap.node_infos()}

    rc = _pod("p")
    rc.metadata.ownerReferences.add(apiVersion="v1", kind="ReplicationController", name="foo", uid="abcdef123456",
                                    controller=True)
    assert scores(rc) == {"machine1": 0, "machine2": 100, "machine3": 0}
    rc.metadata.ownerReferences[0].uid = "other"
    assert scores(rc) == {"machine1": 100, "machine2": 100, "machine3": 100}
    rs = _pod("q")
    rs.metadata.ownerReferences.add(apiVersion="apps/v1", kind="ReplicaSet", name="foo", uid="abcdef123456",
                                    controller=True)
    assert scores(rs) == {"machine1": 100, "machine2": 100, "machine3": 100}  # a ReplicaSet of that uid is not named
    assert scores(_pod("bare")) == {"machine1": 100, "machine2": 100, "machine3": 100}


# ---------------------------------------------------------------- the per-strategy resource scores

TWO_CONTAINERS = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})


@pytest.mark.parametrize("plugin,strategy,want", [
    (LeastAllocated, "LeastAllocated", {"node1": 37, "node2": 50}),   # least_allocated_test.go
    (MostAllocated, "MostAllocated", {"node1": 62, "node2": 50}),     # most_allocated_test.go
])
def test_the_strategy_plugins_score_as_node_resources_fit(plugin: Any, strategy: str, want: dict[str, int]) -> None:
    cache = Cache()
    cache.add_node(make_node("node1", "4", "10000"))
    cache.add_node(make_node("node2", "6", "10000"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    pod = make_pod("p", *TWO_CONTAINERS)
    nodes = snap.node_infos()
    legacy = plugin({})
    fit = Fit({"scoringStrategy": {"type": strategy}})
    got = {n.name: legacy.score(CycleState(), pod, n)[0] for n in nodes}
    assert got == want == {n.name: fit.score(CycleState(), pod, n)[0] for n in nodes}
    batch = legacy.score_batch(CycleState(), pod, snap.table, np.arange(len(nodes)), nodes)
    assert batch is not None and batch.tolist() == [want[n.name] for n in nodes]


def test_requested_to_capacity_ratio_as_upstream() -> None:
    """requested_to_capacity_ratio_test.go: shape 0->10, 100->0 (spreading) on two nodes."""
    cache = Cache()
    cache.add_node(make_node("node1", "4", "10000"))
    cache.add_node(make_node("node2", "6", "10000"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    pl = RequestedToCapacityRatio({"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
                                   "resources": [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 1}]})
    pod = make_pod("p", {"cpu": "3000m", "memory": "5000"})
    assert {n.name: pl.score(CycleState(), pod, n)[0] for n in snap.node_infos()} == {"node1": 38, "node2": 50}
    with pytest.raises(ConfigError, match=r"pluginConfig\[RequestedToCapacityRatio\].args.shape: Required value"):
        RequestedToCapacityRatio({})


# ---------------------------------------------------------------- PodTopologySpread's default constraints

HOSTS = {n: {"kubernetes.io/hostname": n} for n in ("node-a", "node-b", "node-c")}


def test_system_default_constraints_spread_a_replica_sets_pods_by_host() -> None:
    """The System defaults (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) with the
    ReplicaSet's selector; nodes without a zone are scored by hostname alone. Raw scores
    2*log(5)+2, log(5)+2, 2 truncate to 5, 3, 2; normalized 100*(5+2-s)//5."""
    existing = [_pod(node="node-a", labels={"app": "web"}), _pod(node="node-a", labels={"app": "web"}),
                _pod(node="node-b", labels={"app": "web"}), _pod(node="node-c", labels={"app": "db"})]
    snap = snapshot_of(HOSTS, existing)
    handle = SnapshotHandle(snap, [], [_replica_set("web-1", {"app": "web"})])
    pl = PodTopologySpread(handle=handle)  # type: ignore[arg-type]
    pod = _pod("p", labels={"app": "web"}, owner=("ReplicaSet", "web-1"))
    assert _scores(pl, snap, pod) == {"node-a": 40, "node-b": 80, "node-c": 100}
    # nothing selects a bare pod: no constraint, nothing to do
    assert pl.pre_score(CycleState(), _pod("bare", labels={"app": "web"}), snap.node_infos()).is_skip
    # List with no constraints: nothing either (the 1.19 behaviour a Policy asks for)
    listed = PodTopologySpread({"defaultingType": "List"}, handle)  # type: ignore[arg-type]
    assert listed.pre_score(CycleState(), pod, snap.node_infos()).is_skip


def test_listed_default_constraints_filter_too() -> None:
    snap = snapshot_of({"node-a": {"rack": "r1"}, "node-b": {"rack": "r2"}},
                     [_pod(node="node-a", labels={"app": "web"}), _pod(node="node-a", labels={"app": "web"})])
    pl = PodTopologySpread({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]},
        SnapshotHandle(snap, [_service({"app": "web"})]))  # type: ignore[arg-type]
    pod = _pod("p", labels={"app": "web"})
    state = CycleState()
    assert pl.pre_filter(state, pod, snap.node_infos())[1].ok
    got = {n.name: pl.filter(state, pod, n).code for n in snap.node_infos()}
    assert got == {"node-a": Code.UNSCHEDULABLE, "node-b": Code.SUCCESS}


@pytest.mark.parametrize("args,message", [
    ({"defaultingType": "Other"}, 'defaultingType: Unsupported value: \'Other\': supported values: "System", "List"'),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "k",
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "x"}]},
     "defaultConstraints[0].whenUnsatisfiable: Unsupported value: 'x'"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k",
                                                        "whenUnsatisfiable": "DoNotSchedule",
                                                        "labelSelector": {}}]},
     "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultConstraints[1]: Duplicate value: "{k, DoNotSchedule}"'),
])
def test_pod_topology_spread_args_are_validated(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        PodTopologySpread(args)
    assert message in str(info.value)


def test_batch_paths_agree_with_the_per_node_ones() -> None:
    """SelectorSpread and NodePreferAvoidPods answer for every node at once when nothing
    selects the pod (the common case); then what they say is what node by node would."""
    snap = snapshot_of(ZONED, [_pod(node="node1.zone1", labels=Z1), _pod(node="node2.zone3", labels=Z1)])
    nodes = snap.node_infos()
    rows = np.arange(len(nodes))
    handle = SnapshotHandle(snap, [_service({"other": "x"})], [_replica_set("rs1", Z1)])
    spread, avoid = SelectorSpread(handle=handle), NodePreferAvoidPods(handle=handle)  # type: ignore[arg-type]
    owned_pod = _pod("owned", labels=Z1, owner=("ReplicaSet", "rs1"))
    for pod, batched in ((_pod("bare", labels=Z1), True), (owned_pod, False)):
        state = CycleState()
        assert spread.pre_score(state, pod, nodes).ok
        for plugin in (spread, avoid):
            batch = plugin.score_batch(state, pod, snap.table, rows, nodes)
            one_by_one = [plugin.score(state, pod, n)[0] for n in nodes]
            if batch is None:
                assert not batched
                continue
            assert batch.tolist() == one_by_one
            normalized = plugin.normalize_batch(state, pod, batch)
            if normalized is not None:
                per_node, _ = plugin.normalize_score(state, pod, [NodeScore(n.name, v) for n, v in
                                                                  zip(nodes, one_by_one, strict=True)])
                assert normalized.tolist() == [s.score for s in per_node]
    owned = _pod("owned", labels=Z1, owner=("ReplicaSet", "rs1"))
    state = CycleState()
    spread.pre_score(state, owned, nodes)
    assert spread.score_batch(state, owned, snap.table, rows, nodes) is None  # counted node by node
    assert avoid.score_batch(state, owned, snap.table, rows, nodes) is None


def test_node_affinity_answers_at_once_for_pods_without_affinity() -> None:
    """Upstream 1.20's DefaultProvider runs NodeAffinity's Filter and Score without its
    PreFilter and PreScore, so they see pods without any affinity: all nodes at once."""
    from scheduler.plugins.nodeaffinity import NodeAffinity
    snap = snapshot_of({"a": {"disk": "ssd"}, "b": {}}, [])
    nodes, rows, pl = snap.node_infos(), np.arange(2), NodeAffinity()
    bare = _pod("bare")
    state = CycleState()
    mask = pl.filter_batch(state, bare, snap.table, rows, nodes)
    assert mask is not None and mask.tolist() == [pl.filter(state, bare, n).ok for n in nodes] == [True, True]
    scores = pl.score_batch(state, bare, snap.table, rows, nodes)
    assert scores is not None and scores.tolist() == [pl.score(state, bare, n)[0] for n in nodes] == [0, 0]
    picky = _pod("picky")
    picky.spec.nodeSelector["disk"] = "ssd"
    picky.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.add(weight=1)
    assert pl.filter_batch(state, picky, snap.table, rows, nodes) is None  # node by node
    assert pl.score_batch(state, picky, snap.table, rows, nodes) is None

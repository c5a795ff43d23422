"""Recorded scheduling results (scheduler.framework.results): the numbers a recorded
attempt leaves on the pod are the plugins' own — the upstream vectors of test_plugins,
test_topology_spread and test_interpodaffinity, run through the whole scheduler — and the
filter verdicts, caps, PostFilter victims and the `kubeling why` rendering."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.why import render, results_of
from protos.kubeling.v1 import core_pb2
from scheduler.config import ConfigError, parse_config
from scheduler.framework.interface import PreScorePlugin
from scheduler.framework.results import PREFIX, RECORD, REJECTED
from scheduler.plugins import in_tree_registry
from tests.unit.scheduler.builders import FailureLog, make_node, make_pod
from tests.unit.scheduler.harness import drain, make_scheduler
from tests.unit.scheduler.test_interpodaffinity import CHINA, INDIA, S1, S2, STAY_S1, _with
from tests.unit.scheduler.test_plugins import _taint, _tol
from tests.unit.scheduler.test_topology_spread import _hosts, _spread_pod


def _profile(plugin: str, weight: int = 1, args: dict[str, Any] | None = None, record: Any = True) -> dict[str, Any]:
    points: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]},
                              "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                              "score": {"enabled": [{"name": plugin, "weight": weight}]}}
    if issubclass(in_tree_registry()[plugin], PreScorePlugin):  # type: ignore[arg-type]
        points["preScore"] = {"enabled": [{"name": plugin}]}
    return {"profiles": [{"schedulerName": "default-scheduler", "recordResults": record, "plugins": points,
                          "pluginConfig": [{"name": plugin, "args": args or {}}]}]}


async def _recorded(plugin: str, nodes: list[core_pb2.Node], existing: list[core_pb2.Pod], pod: core_pb2.Pod,
                    weight: int = 1, args: dict[str, Any] | None = None) -> dict[str, Any]:
    sched = make_scheduler(_profile(plugin, weight, args))
    for n in nodes:
        sched.on_node_add(n)
    for p in existing:
        sched.on_pod_add(p)
    pod.spec.nodeName = ""
    sched.on_pod_add(pod)
    await drain(sched)
    annotations = sched.recorded[pod.metadata.name]  # type: ignore[attr-defined]
    results = results_of(annotations)
    assert results is not None
    return results


def _normalized(results: dict[str, Any], plugin: str) -> dict[str, int]:
    return {node: s[plugin]["normalized"] for node, s in results["score-result"].items()}


def _with_pods(node: str, *requests: dict[str, str]) -> list[core_pb2.Pod]:
    return [make_pod("", r, node=node) for r in requests]


TWO = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})


async def test_least_allocated_and_balanced_allocation_vectors() -> None:
    nodes = [make_node("node1", "4000", "10000"), make_node("node2", "6000", "10000")]
    r = await _recorded("NodeResourcesFit", nodes, [], make_pod("p", *TWO))
    assert _normalized(r, "NodeResourcesFit") == {"node1": 37, "node2": 50}  # least_allocated_test.go
    assert r["selected-node"] == "node2" and r["finalscore-result"] == {"node1": 37, "node2": 50}
    nodes = [make_node("node1", "10000", "20000"), make_node("node2", "10000", "50000")]
    existing = _with_pods("node1", {"cpu": "3000", "memory": "0"}) + _with_pods("node2", {"cpu": "3000",
                                                                                         "memory": "5000"})
    r = await _recorded("NodeResourcesFit", nodes, existing, make_pod("p", *TWO), weight=2)
    assert _normalized(r, "NodeResourcesFit") == {"node1": 57, "node2": 60}
    assert {n: s["NodeResourcesFit"]["weighted"] for n, s in r["score-result"].items()} == {"node1": 114, "node2": 120}
    # balanced_allocation_test.go
    cpu_mem = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    nodes = [make_node("node1", "4", "10000"), make_node("node2", "6", "10000")]
    r = await _recorded("NodeResourcesBalancedAllocation", nodes, [], make_pod("p", *cpu_mem))
    assert _normalized(r, "NodeResourcesBalancedAllocation") == {"node1": 87, "node2": 100}


async def test_taint_toleration_and_node_affinity_vectors() -> None:
    pod = make_pod("p", tolerations=[_tol("foo", "bar", "PreferNoSchedule")])
    nodes = [make_node("nodeA"), make_node("nodeB", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule")]),
             make_node("nodeC", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule"),
                                        _taint("disk-type", "ssd", "PreferNoSchedule")])]
    r = await _recorded("TaintToleration", nodes, [], pod, weight=3)
    assert _normalized(r, "TaintToleration") == {"nodeA": 100, "nodeB": 50, "nodeC": 0}
    assert {n: s["TaintToleration"]["raw"] for n, s in r["score-result"].items()} == {"nodeA": 0, "nodeB": 1,
                                                                                      "nodeC": 2}
    assert r["finalscore-result"] == {"nodeA": 300, "nodeB": 150, "nodeC": 0}
    pod = make_pod("p")
    term = pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution
    for weight, exprs in ((2, [("foo", "bar")]), (4, [("key", "value")]),
                          (5, [("foo", "bar"), ("key", "value"), ("az", "az1")])):
        t = term.add(weight=weight)
        for k, v in exprs:
            t.preference.matchExpressions.add(key=k, operator="In", values=[v])
    nodes = [make_node("node1", labels={"foo": "bar"}),
             make_node("node5", labels={"foo": "bar", "key": "value", "az": "az1"}),
             make_node("node2", labels={"key": "value"})]
    r = await _recorded("NodeAffinity", nodes, [], pod)
    assert _normalized(r, "NodeAffinity") == {"node1": 18, "node5": 100, "node2": 36}


async def test_topology_spread_and_inter_pod_affinity_vectors() -> None:
    nodes = [make_node(n, "8", "8Gi", "110", labels=labels)
             for n, labels in _hosts("node-a", "node-b", "node-c", "node-d").items()]
    existing = [make_pod(f"{n}-{i}", node=n, labels={"foo": ""})
                for n, count in {"node-a": 2, "node-b": 1, "node-d": 3}.items() for i in range(count)]
    r = await _recorded("PodTopologySpread", nodes, existing, _spread_pod("kubernetes.io/hostname", 1,
                                                                          "ScheduleAnyway"))
    assert _normalized(r, "PodTopologySpread") == {"node-a": 40, "node-b": 80, "node-c": 100, "node-d": 0}
    nodes = [make_node(n, "8", "8Gi", "110", labels=labels) for n, labels in
             (("node1", CHINA), ("node2", INDIA), ("node3", {"az": "az1"}))]
    existing = [_with(S1, "node1"), _with(S2, "node2"), _with(S1, "node3")]
    r = await _recorded("InterPodAffinity", nodes, existing, _with(S1, affinity=STAY_S1))
    assert _normalized(r, "InterPodAffinity") == {"node1": 100, "node2": 0, "node3": 0}


async def test_filter_verdicts_failures_caps_and_why() -> None:
    log = FailureLog()
    sched = make_scheduler({"profiles": [{"schedulerName": "default-scheduler",
                                          "recordResults": {"maxNodes": 3, "topNodes": 1}}]}, recorder=log)
    sched.queue.initial_backoff = sched.queue.max_backoff = 0.0
    for i in range(4):
        sched.on_node_add(make_node(f"n{i}", "4", "8Gi", "110"))
    sched.on_node_add(make_node("tainted", "4", "8Gi", "110", taints=[_taint("k", "v", "NoSchedule")]))
    sched.on_pod_add(make_pod("p", {"cpu": "1"}))
    await drain(sched)
    r = results_of(sched.recorded["p"])  # type: ignore[attr-defined]
    assert r is not None and r["attempt"] == 1
    filters = r["filter-result"]
    # above maxNodes: the winner (the top 1), and one count per rejecting plugin and reason
    assert set(filters) == {r["selected-node"], REJECTED}
    assert filters[REJECTED] == {
        "TaintToleration: UnschedulableAndUnresolvable: node(s) had untolerated taint {k: v}": 1}
    assert all(v == "passed" for v in filters[r["selected-node"]].values())
    assert list(filters[r["selected-node"]])[:2] == ["NodeUnschedulable", "NodeName"]  # the framework's order
    text = render("default/p", r, wide=True)
    assert f"*   {r['selected-node']}" in text and "and 1 more node(s): TaintToleration" in text

    # No node fits: every node's rejection, on the failure status update (no binding).
    sched.on_pod_add(make_pod("big", {"cpu": "64"}))
    await drain(sched)
    failed = log.annotations[-1]
    assert failed is not None and failed[PREFIX + "selected-node"] == ""
    verdicts = json.loads(failed[PREFIX + "filter-result"])
    assert verdicts == {REJECTED: {  # nothing feasible to show above maxNodes: only the counts
        "NodeResourcesFit: Unschedulable: Insufficient cpu": 4,
        "TaintToleration: UnschedulableAndUnresolvable: node(s) had untolerated taint {k: v}": 1}}
    few = make_scheduler({"profiles": [{"schedulerName": "default-scheduler", "recordResults": True}]},
                         recorder=log)
    few.on_node_add(make_node("n0", "4", "8Gi", "110"))
    few.on_node_add(make_node("tainted", "4", "8Gi", "110", taints=[_taint("k", "v", "NoSchedule")]))
    few.on_pod_add(make_pod("big", {"cpu": "64"}))
    await drain(few)
    verdicts = json.loads(log.annotations[-1][PREFIX + "filter-result"])  # type: ignore[index]
    assert verdicts["n0"]["NodeResourcesFit"] == "Unschedulable: Insufficient cpu"
    assert "NodeResourcesFit" not in verdicts["tainted"]  # the chain stops at the first rejection
    assert verdicts["tainted"]["TaintToleration"].startswith("UnschedulableAndUnresolvable: node(s) had untolerated")


async def test_off_by_default_on_per_pod() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "4", "8Gi", "110"))
    sched.on_pod_add(make_pod("quiet", {"cpu": "1"}))
    asking = make_pod("asking", {"cpu": "1"})
    asking.metadata.annotations[RECORD] = "true"
    sched.on_pod_add(asking)
    await drain(sched)
    assert sched.recorded["quiet"] is None  # type: ignore[attr-defined]
    assert results_of(sched.recorded["asking"])["selected-node"] == "n1"  # type: ignore[attr-defined,index]


async def test_preemption_victims_are_recorded() -> None:
    log = FailureLog()
    sched = make_scheduler({"profiles": [{"schedulerName": "default-scheduler", "recordResults": True}]},
                           recorder=log)
    sched.on_node_add(make_node("n1", "2", "8Gi", "110"))
    sched.on_pod_add(make_pod("low", {"cpu": "2"}, node="n1", priority=1))
    sched.on_pod_add(make_pod("urgent", {"cpu": "2"}, priority=10))
    await drain(sched)
    post = json.loads(log.annotations[0][PREFIX + "postfilter-result"])  # type: ignore[index]
    assert post["nominatedNode"] == "n1" and post["victims"] == ["default/low"] and post["status"] == "passed"
    assert "victims default/low" in render("default/urgent", results_of(log.annotations[0]))  # type: ignore[arg-type]


def test_record_results_config() -> None:
    registry = in_tree_registry()
    cfg = parse_config({"profiles": [{"recordResults": {"maxNodes": 20}}]}, registry)
    assert (cfg.profiles[0].record.enabled, cfg.profiles[0].record.max_nodes) == (True, 20)
    assert not parse_config({}, registry).profiles[0].record.enabled
    with pytest.raises(ConfigError, match=r"profiles\[0\].recordResults.top: unknown field"):
        parse_config({"profiles": [{"recordResults": {"top": 1}}]}, registry)

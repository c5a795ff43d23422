"""A Policy schedules as the profile it translates to: for each predicate and priority, a
cluster where it decides, the scheduler made from the Policy and one made from the profile
written out by hand (upstream's legacy registry table) pick the same node and record the
same filter verdicts and scores (scheduler.kubeling.io/* results). Then
alwaysCheckAllPredicates (every failing predicate in FailedScheduling) and
disablePreemption (no victim ever)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.results import CycleResults, RecordOptions
from scheduler.framework.types import PodInfo
from scheduler.legacy.policy import parse_policy
from scheduler.legacy.registry import FeatureGates
from scheduler.plugins.nodepreferavoidpods import PREFER_AVOID_PODS
from scheduler.schedule_one import FitError
from scheduler.scheduler import Scheduler
from tests.unit.scheduler.builders import FailureLog, make_node, make_pod
from tests.unit.scheduler.harness import drain, make_scheduler

HOST = "kubernetes.io/hostname"
MANDATORY = ["NodeUnschedulable", "TaintToleration"]


def _profile(*, filters: list[str] | None = None, pre_filters: list[str] | None = None,
             scores: list[tuple[str, int]] | None = None, pre_scores: list[str] | None = None,
             config: dict[str, Any] | None = None, reserve: list[str] | None = None,
             pre_bind: list[str] | None = None) -> dict[str, Any]:
    """A profile written out by hand: what upstream's table says a Policy becomes."""
    plugins: dict[str, Any] = {
        "multiPoint": {"disabled": [{"name": "*"}]},
        "preEnqueue": {"enabled": [{"name": "SchedulingGates"}]},
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "filter": {"enabled": [{"name": n} for n in (filters if filters is not None else MANDATORY)]},
        "postFilter": {"enabled": [{"name": "DefaultPreemption"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
    }
    if pre_filters:
        plugins["preFilter"] = {"enabled": [{"name": n} for n in pre_filters]}
    if pre_scores:
        plugins["preScore"] = {"enabled": [{"name": n} for n in pre_scores]}
    if reserve:
        plugins["reserve"] = {"enabled": [{"name": n} for n in reserve]}
    if pre_bind:
        plugins["preBind"] = {"enabled": [{"name": n} for n in pre_bind]}
    if scores:
        plugins["score"] = {"enabled": [{"name": n, "weight": w} for n, w in scores]}
    profile: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": plugins}
    if config:
        profile["pluginConfig"] = [{"name": n, "args": a} for n, a in config.items()]
    return {"profiles": [profile]}


@dataclass
class Cluster:
    nodes: list[core_pb2.Node]
    pod: core_pb2.Pod
    pods: list[core_pb2.Pod] = field(default_factory=list)
    services: list[core_pb2.Service] = field(default_factory=list)
    replica_sets: list[apps_pb2.ReplicaSet] = field(default_factory=list)


def _nodes(*names: str, cpu: str = "4", memory: str = "8Gi", labels: dict[str, dict[str, str]] | None = None) \
        -> list[core_pb2.Node]:
    return [make_node(n, cpu, memory, "110", labels={HOST: n, **(labels or {}).get(n, {})}) for n in names]


def _owned(pod: core_pb2.Pod, rs: str = "web-1") -> core_pb2.Pod:
    pod.metadata.ownerReferences.add(apiVersion="apps/v1", kind="ReplicaSet", name=rs, uid=f"uid-{rs}",
                                     controller=True)
    return pod


def _web_rs() -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet(metadata=meta_pb2.ObjectMeta(name="web-1", namespace="default", uid="uid-web-1"))
    rs.spec.selector.matchLabels["app"] = "web"
    return rs


def _service(selector: dict[str, str]) -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name="svc", namespace="default"),
                            spec=core_pb2.ServiceSpec(selector=selector))


# ---------------------------------------------------------------- clusters, one per predicate or priority

def fits_resources() -> Cluster:
    return Cluster(_nodes("n1", "n2", cpu="1") + _nodes("n3", cpu="4"), make_pod("p", {"cpu": "2"}))


def host_name() -> Cluster:
    pod = make_pod("p")
    pod.spec.nodeName = "n2"  # a pod that names its node (schedule_pod is called with it directly)
    return Cluster(_nodes("n1", "n2", "n3"), pod)


def host_ports() -> Cluster:
    taken = make_pod("taken", node="n1")
    taken.spec.containers.add(name="c", image="busybox").ports.add(containerPort=80, hostPort=8080)
    pod = make_pod("p")
    pod.spec.containers.add(name="c", image="busybox").ports.add(containerPort=80, hostPort=8080)
    return Cluster(_nodes("n1", "n2"), pod, [taken])


def node_selector() -> Cluster:
    pod = make_pod("p")
    pod.spec.nodeSelector["disk"] = "ssd"
    return Cluster(_nodes("n1", "n2", labels={"n2": {"disk": "ssd"}}), pod)


def taints() -> Cluster:
    nodes = _nodes("n1", "n2")
    nodes[0].spec.taints.add(key="dedicated", value="gpu", effect="NoSchedule")
    return Cluster(nodes, make_pod("p"))


def unschedulable() -> Cluster:
    nodes = _nodes("n1", "n2")
    nodes[0].spec.unschedulable = True
    return Cluster(nodes, make_pod("p"))


def inter_pod_anti_affinity() -> Cluster:
    pod = make_pod("p", labels={"app": "web"})
    term = pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.add(topologyKey=HOST)
    term.labelSelector.matchLabels["app"] = "web"
    return Cluster(_nodes("n1", "n2"), pod, [make_pod("web-0", node="n1", labels={"app": "web"})])


def even_pods_spread() -> Cluster:
    pod = make_pod("p", labels={"app": "web"})
    c = pod.spec.topologySpreadConstraints.add(maxSkew=1, topologyKey=HOST, whenUnsatisfiable="DoNotSchedule")
    c.labelSelector.matchLabels["app"] = "web"
    return Cluster(_nodes("n1", "n2"), pod, [make_pod(f"web-{i}", node="n1", labels={"app": "web"})
                                             for i in range(2)])


def label_presence() -> Cluster:
    return Cluster(_nodes("n1", "n2", labels={"n2": {"ssd": "yes"}}), make_pod("p"))


def service_affinity() -> Cluster:
    labels = {"n1": {"region": "r1"}, "n2": {"region": "r2"}, "n3": {"region": "r2"}}
    return Cluster(_nodes("n1", "n2", "n3", labels=labels), make_pod("p", labels={"app": "web"}),
                   [make_pod("web-0", node="n2", labels={"app": "web"})], [_service({"app": "web"})])


def general() -> Cluster:
    pod = make_pod("p", {"cpu": "2"})
    pod.spec.nodeSelector["disk"] = "ssd"
    nodes = _nodes("n1", cpu="4") + _nodes("n2", cpu="1", labels={"n2": {"disk": "ssd"}}) + \
        _nodes("n3", cpu="4", labels={"n3": {"disk": "ssd"}})
    return Cluster(nodes, pod)


def busy_and_idle() -> Cluster:
    """n1 half full, n2 empty: LeastRequested picks n2, MostRequested n1."""
    return Cluster(_nodes("n1", "n2"), make_pod("p", {"cpu": "1", "memory": "1Gi"}),
                   [make_pod("busy", {"cpu": "2", "memory": "4Gi"}, node="n1")])


def balance() -> Cluster:
    """n1 ends up cpu-heavy, n2 balanced."""
    return Cluster(_nodes("n1", "n2"), make_pod("p", {"cpu": "1", "memory": "1Gi"}),
                   [make_pod("cpu-heavy", {"cpu": "2", "memory": "0"}, node="n1"),
                    make_pod("even", {"cpu": "1", "memory": "2Gi"}, node="n2")])


def replica_set_spread() -> Cluster:
    return Cluster(_nodes("n1", "n2"), _owned(make_pod("p", labels={"app": "web"})),
                   [_owned(make_pod(f"web-{i}", node="n1", labels={"app": "web"})) for i in range(2)],
                   replica_sets=[_web_rs()])


def service_spread() -> Cluster:
    return Cluster(_nodes("n1", "n2"), make_pod("p", labels={"app": "web"}),
                   [make_pod("web-0", node="n1", labels={"app": "web"})], [_service({"app": "web"})])


def preferred_pod_affinity() -> Cluster:
    pod = make_pod("p")
    term = pod.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.add(weight=10)
    term.podAffinityTerm.topologyKey = HOST
    term.podAffinityTerm.labelSelector.matchLabels["app"] = "db"
    return Cluster(_nodes("n1", "n2"), pod, [make_pod("db-0", node="n2", labels={"app": "db"})])


def preferred_node_affinity() -> Cluster:
    pod = make_pod("p")
    pref = pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.add(weight=5)
    pref.preference.matchExpressions.add(key="disk", operator="In", values=["ssd"])
    return Cluster(_nodes("n1", "n2", labels={"n2": {"disk": "ssd"}}), pod)


def prefer_no_schedule() -> Cluster:
    nodes = _nodes("n1", "n2")
    nodes[0].spec.taints.add(key="noisy", value="yes", effect="PreferNoSchedule")
    return Cluster(nodes, make_pod("p"))


def image_locality() -> Cluster:
    nodes = _nodes("n1", "n2")
    nodes[1].status.images.add(names=["registry.example/app:1"], sizeBytes=500 * 1024 * 1024)
    pod = make_pod("p")
    pod.spec.containers.add(name="app", image="registry.example/app:1")
    return Cluster(nodes, pod)


def prefer_avoid() -> Cluster:
    nodes = _nodes("n1", "n2")
    nodes[0].metadata.annotations[PREFER_AVOID_PODS] = json.dumps({"preferAvoidPods": [{"podSignature": {
        "podController": {"kind": "ReplicaSet", "name": "web-1", "uid": "uid-web-1"}}}]})
    return Cluster(nodes, _owned(make_pod("p", labels={"app": "web"})), replica_sets=[_web_rs()])


def soft_spread() -> Cluster:
    pod = make_pod("p", labels={"app": "web"})
    c = pod.spec.topologySpreadConstraints.add(maxSkew=1, topologyKey=HOST, whenUnsatisfiable="ScheduleAnyway")
    c.labelSelector.matchLabels["app"] = "web"
    return Cluster(_nodes("n1", "n2"), pod, [make_pod("web-0", node="n1", labels={"app": "web"})])


def label_preference() -> Cluster:
    return Cluster(_nodes("n1", "n2", labels={"n2": {"fast": "yes"}}), make_pod("p"))


def zone_anti_affinity() -> Cluster:
    labels = {"n1": {"zone": "a"}, "n2": {"zone": "a"}, "n3": {"zone": "b"}}
    return Cluster(_nodes("n1", "n2", "n3", labels=labels), make_pod("p", labels={"app": "web"}),
                   [make_pod("web-0", node="n1", labels={"app": "web"})], [_service({"app": "web"})])


GATE_OFF, GATE_ON = FeatureGates(), FeatureGates(default_pod_topology_spread=True)
RTCR_ARGS = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}

PREDICATE_CASES = [
    # (Policy predicates, the profile upstream's table gives, the cluster, the node(s) it may pick)
    ([{"name": "PodFitsResources"}],
     _profile(filters=["NodeUnschedulable", "NodeResourcesFit", "TaintToleration"], pre_filters=["NodeResourcesFit"]),
     fits_resources, {"n3"}),
    ([{"name": "HostName"}], _profile(filters=["NodeUnschedulable", "NodeName", "TaintToleration"]),
     host_name, {"n2"}),
    ([{"name": "PodFitsHostPorts"}],
     _profile(filters=["NodeUnschedulable", "NodePorts", "TaintToleration"], pre_filters=["NodePorts"]),
     host_ports, {"n2"}),
    ([{"name": "PodFitsPorts"}],  # its older name
     _profile(filters=["NodeUnschedulable", "NodePorts", "TaintToleration"], pre_filters=["NodePorts"]),
     host_ports, {"n2"}),
    ([{"name": "MatchNodeSelector"}],
     _profile(filters=["NodeUnschedulable", "NodeAffinity", "TaintToleration"], pre_filters=["NodeAffinity"]),
     node_selector, {"n2"}),
    ([], _profile(), taints, {"n2"}),  # PodToleratesNodeTaints and CheckNodeUnschedulable: always there
    ([{"name": "PodToleratesNodeTaints"}], _profile(), taints, {"n2"}),
    ([{"name": "CheckNodeUnschedulable"}], _profile(), unschedulable, {"n2"}),
    ([{"name": "CheckNodeCondition"}], _profile(), unschedulable, {"n2"}),
    ([{"name": "MatchInterPodAffinity"}],
     _profile(filters=MANDATORY + ["InterPodAffinity"], pre_filters=["InterPodAffinity"]),
     inter_pod_anti_affinity, {"n2"}),
    ([{"name": "EvenPodsSpread"}],
     _profile(filters=MANDATORY + ["PodTopologySpread"], pre_filters=["PodTopologySpread"],
              config={"PodTopologySpread": {"defaultingType": "List"}}),
     even_pods_spread, {"n2"}),
    ([{"name": "RequireSSD", "argument": {"labelsPresence": {"labels": ["ssd"], "presence": True}}}],
     _profile(filters=MANDATORY + ["NodeLabel"], config={"NodeLabel": {"presentLabels": ["ssd"]}}),
     label_presence, {"n2"}),
    ([{"name": "RegionAffinity", "argument": {"serviceAffinity": {"labels": ["region"]}}}],
     _profile(filters=MANDATORY + ["ServiceAffinity"], pre_filters=["ServiceAffinity"],
              config={"ServiceAffinity": {"affinityLabels": ["region"]}}),
     service_affinity, {"n2", "n3"}),
    ([{"name": "GeneralPredicates"}],
     _profile(filters=["NodeUnschedulable", "NodeResourcesFit", "NodeName", "NodePorts", "NodeAffinity",
                       "TaintToleration"], pre_filters=["NodeResourcesFit", "NodePorts", "NodeAffinity"]),
     general, {"n3"}),
    # the volume predicates: VolumeRestrictions, NodeVolumeLimits and VolumeBinding (pods without
    # claims pass them); the zone and cloud-disk ones judge nothing kubeling's pods can have
    ([{"name": "NoDiskConflict"}, {"name": "NoVolumeZoneConflict"}, {"name": "MaxCSIVolumeCountPred"},
      {"name": "CheckVolumeBinding"}, {"name": "MaxEBSVolumeCount"}], _profile(
        filters=["NodeUnschedulable", "VolumeRestrictions", "TaintToleration", "NodeVolumeLimits", "VolumeBinding"],
        pre_filters=["VolumeBinding"], reserve=["VolumeBinding"], pre_bind=["VolumeBinding"]), taints, {"n2"}),
]

PRIORITY_CASES = [
    # (Policy priorities, gates, the profile, the cluster, the node it must pick)
    ([{"name": "LeastRequestedPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("NodeResourcesLeastAllocated", 1)]), busy_and_idle, "n2"),
    ([{"name": "MostRequestedPriority", "weight": 3}], GATE_OFF,
     _profile(scores=[("NodeResourcesMostAllocated", 3)]), busy_and_idle, "n1"),
    ([{"name": "BalancedResourceAllocation", "weight": 1}], GATE_OFF,
     _profile(scores=[("NodeResourcesBalancedAllocation", 1)]), balance, "n2"),
    ([{"name": "SelectorSpreadPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("SelectorSpread", 1)], pre_scores=["SelectorSpread"]), replica_set_spread, "n2"),
    ([{"name": "SelectorSpreadPriority", "weight": 1}], GATE_ON,
     _profile(scores=[("PodTopologySpread", 1)], pre_scores=["PodTopologySpread"],
              config={"PodTopologySpread": {"defaultingType": "System"}}), replica_set_spread, "n2"),
    ([{"name": "ServiceSpreadingPriority", "weight": 2}], GATE_OFF,
     _profile(scores=[("SelectorSpread", 2)], pre_scores=["SelectorSpread"]), service_spread, "n2"),
    ([{"name": "InterPodAffinityPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("InterPodAffinity", 1)], pre_scores=["InterPodAffinity"]), preferred_pod_affinity, "n2"),
    ([{"name": "NodeAffinityPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("NodeAffinity", 1)], pre_scores=["NodeAffinity"]), preferred_node_affinity, "n2"),
    ([{"name": "TaintTolerationPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("TaintToleration", 1)], pre_scores=["TaintToleration"]), prefer_no_schedule, "n2"),
    ([{"name": "ImageLocalityPriority", "weight": 1}], GATE_OFF,
     _profile(scores=[("ImageLocality", 1)]), image_locality, "n2"),
    ([{"name": "NodePreferAvoidPodsPriority", "weight": 10000}], GATE_OFF,
     _profile(scores=[("NodePreferAvoidPods", 10000)]), prefer_avoid, "n2"),
    ([{"name": "BinPacking", "weight": 2, "argument": {"requestedToCapacityRatioArguments": RTCR_ARGS}}], GATE_OFF,
     _profile(scores=[("RequestedToCapacityRatio", 2)], config={"RequestedToCapacityRatio": RTCR_ARGS}),
     busy_and_idle, "n1"),
    ([{"name": "EvenPodsSpreadPriority", "weight": 2}], GATE_OFF,
     _profile(scores=[("PodTopologySpread", 2)], pre_scores=["PodTopologySpread"],
              config={"PodTopologySpread": {"defaultingType": "List"}}), soft_spread, "n2"),
    ([{"name": "PreferFast", "weight": 4, "argument": {"labelPreference": {"label": "fast", "presence": True}}}],
     GATE_OFF, _profile(scores=[("NodeLabel", 4)], config={"NodeLabel": {"presentLabelsPreference": ["fast"]}}),
     label_preference, "n2"),
    ([{"name": "ZoneSpread", "weight": 3, "argument": {"serviceAntiAffinity": {"label": "zone"}}}], GATE_OFF,
     _profile(scores=[("ServiceAffinity", 3)], config={"ServiceAffinity": {"antiAffinityLabelsPreference": ["zone"]}}),
     zone_anti_affinity, "n3"),
]


def _scheduler(cluster: Cluster, config: dict[str, Any] | None = None, policy: dict[str, Any] | None = None,
               gates: FeatureGates | None = None, **kw: Any) -> Scheduler:
    sched = make_scheduler(config, policy=parse_policy(policy) if policy is not None else None, gates=gates,
                           rng=random.Random(7), **kw)
    sched.service_lister = lambda namespace: [s for s in cluster.services if s.metadata.namespace == namespace]
    sched.replica_set_getter = lambda namespace, name: next(
        (rs for rs in cluster.replica_sets if (rs.metadata.namespace, rs.metadata.name) == (namespace, name)), None)
    for node in cluster.nodes:
        sched.on_node_add(node)
    for pod in cluster.pods:
        sched.on_pod_add(pod)
    return sched


async def _decide(sched: Scheduler, pod: core_pb2.Pod) -> dict[str, Any]:
    """One scheduling cycle of `pod`, recorded: its scheduler.kubeling.io/* results, decoded."""
    fwk = sched.frameworks["default-scheduler"]
    state = CycleState(PodInfo.of(pod))
    state.results = CycleResults(1, RecordOptions(enabled=True))
    try:
        result = await sched.schedule_pod(fwk, state, pod)
        state.results.selected = result.node
        state.results.selected_row = sched.snapshot.index[result.node]
    except FitError:
        pass
    return {k.split("/", 1)[1]: v if k.endswith("selected-node") else json.loads(v)
            for k, v in state.results.annotations().items()}


def _points(sched: Scheduler) -> tuple[Any, ...]:
    fwk = sched.frameworks["default-scheduler"]
    return fwk.points.enabled, fwk.weights, fwk.points.args


@pytest.mark.parametrize("predicates,profile,cluster,expected", PREDICATE_CASES,
                         ids=lambda v: v[0]["name"] if isinstance(v, list) and v else None)
async def test_each_predicate_decides_as_its_profile(predicates: list[dict[str, Any]], profile: dict[str, Any],
                                                     cluster: Any, expected: set[str]) -> None:
    c = cluster()
    by_policy = _scheduler(c, policy={"kind": "Policy", "apiVersion": "v1", "predicates": predicates,
                                      "priorities": []})
    by_profile = _scheduler(c, profile)
    assert _points(by_policy) == _points(by_profile)
    got = await _decide(by_policy, c.pod)
    assert got == await _decide(by_profile, c.pod)
    assert got["selected-node"] in expected
    # the cluster is built for it: some node is turned down, and by this predicate's plugin
    assert any(v != "passed" for verdicts in got["filter-result"].values() for v in verdicts.values())


@pytest.mark.parametrize("priorities,gates,profile,cluster,expected", PRIORITY_CASES,
                         ids=lambda v: v[0]["name"] if isinstance(v, list) and v else None)
async def test_each_priority_scores_as_its_profile(priorities: list[dict[str, Any]], gates: FeatureGates,
                                                   profile: dict[str, Any], cluster: Any, expected: str) -> None:
    c = cluster()
    by_policy = _scheduler(c, policy={"kind": "Policy", "apiVersion": "v1", "predicates": [],
                                      "priorities": priorities}, gates=gates)
    by_profile = _scheduler(c, profile)
    assert _points(by_policy) == _points(by_profile)
    got = await _decide(by_policy, c.pod)
    assert got == await _decide(by_profile, c.pod)
    assert got["selected-node"] == expected
    # the priority told the nodes apart (not a tie broken at random)
    assert len(set(got["finalscore-result"].values())) > 1


def _cpu_and_selector() -> Cluster:
    """n1 lacks cpu and the label, n2 only the label: NodeAffinity runs before NodeResourcesFit."""
    pod = make_pod("p", {"cpu": "2"})
    pod.spec.nodeSelector["disk"] = "ssd"
    return Cluster(_nodes("n1", cpu="1") + _nodes("n2", cpu="4"), pod)


@pytest.mark.parametrize("check_all,message", [
    (False, "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    (True, "0/2 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."),
])
async def test_always_check_all_predicates(check_all: bool, message: str) -> None:
    c = _cpu_and_selector()
    log = FailureLog()
    sched = _scheduler(c, policy={"predicates": [{"name": "PodFitsResources"}, {"name": "MatchNodeSelector"}],
                                  "priorities": [], "alwaysCheckAllPredicates": check_all}, recorder=log)
    sched.on_pod_add(c.pod)
    await drain(sched)
    [(reason, got_message, _)] = log.failures
    # then preemption's own words (upstream's, with their double period)
    assert reason == "Unschedulable" and got_message.startswith(message + " preemption: ")
    got = await _decide(sched, c.pod)
    n1 = got["filter-result"]["n1"]
    if check_all:  # every predicate's verdict is recorded
        assert n1["NodeResourcesFit"] == "Unschedulable: Insufficient cpu"
        assert n1["NodeAffinity"].startswith("UnschedulableAndUnresolvable")
        assert got["filter-result"]["n2"]["NodeResourcesFit"] == "passed"
    else:
        assert "NodeResourcesFit" not in n1


@pytest.mark.parametrize("disable,victims", [(False, ["low"]), (True, [])])
async def test_disable_preemption_never_preempts(disable: bool, victims: list[str]) -> None:
    low = make_pod("low", {"cpu": "2"}, node="n1", priority=1)
    urgent = make_pod("urgent", {"cpu": "2"}, priority=100)
    c = Cluster(_nodes("n1", cpu="2"), urgent, [low])
    log = FailureLog()
    sched = _scheduler(c, {"disablePreemption": disable}, policy={"predicates": [{"name": "PodFitsResources"}],
                                                                  "priorities": []}, recorder=log)
    sched.on_pod_add(urgent)
    await drain(sched)
    assert sched.evicted == victims  # type: ignore[attr-defined]
    assert log.failures[0][0] == "Unschedulable"
    assert log.failures[0][2] == ("n1" if victims else None)  # nominated only when a victim went


async def test_a_new_policy_tries_the_waiting_pods_again() -> None:
    """Scheduler.reconfigure: a pod no node fitted under the old profile is tried again at
    once under the new one (no cluster event needed); the profiles' names may not change."""
    c = Cluster(_nodes("n1", "n2", labels={"n1": {"retiring": "soon"}, "n2": {"retiring": "soon"}}), make_pod("p"))
    avoid_retiring = {"predicates": [{"name": "NotRetiring", "argument": {
        "labelsPresence": {"labels": ["retiring"], "presence": False}}}], "priorities": []}
    sched = _scheduler(c, policy=avoid_retiring)
    sched.queue.initial_backoff = sched.queue.max_backoff = 0.0  # tried again at once, not after its back-off
    sched.on_pod_add(c.pod)
    await drain(sched)
    assert sched.bindings == {} and len(sched.queue.unschedulable) == 1  # type: ignore[attr-defined]
    from scheduler.config import parse_config
    from scheduler.plugins import in_tree_registry
    registry = in_tree_registry()
    registry.update(sched.registry)
    source = {"algorithmSource": {"policy": {"file": {"path": "p.json"}}}}
    new = parse_config(source, registry, policy=parse_policy({"predicates": [], "priorities": []}))
    new.profiles[0].points.enabled["bind"] = ["RecordingBinder"]
    await sched.reconfigure(new)
    assert sched.frameworks["default-scheduler"].points.enabled["filter"] == MANDATORY
    await drain(sched)
    assert list(sched.bindings) == ["p"]  # type: ignore[attr-defined]
    renamed = parse_config({**source, "schedulerName": "other"}, registry, policy=parse_policy({}))
    with pytest.raises(ValueError, match="a new configuration cannot change them"):
        await sched.reconfigure(renamed)

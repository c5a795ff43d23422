"""Plugins against upstream's own test cases (same inputs, same expected scores).

Cases come from kubernetes/kubernetes pkg/scheduler/framework/plugins/*/..._test.go;
capacities there are in cores ("4000" = 4000 CPUs) unless written in milli.
"""

from __future__ import annotations

from protos.kubeling.v1 import core_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.status import Code
from scheduler.plugins.imagelocality import calculate_priority
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.noderesources import BalancedAllocation, Fit
from scheduler.plugins.tainttoleration import TaintToleration
from tests.unit.scheduler.builders import make_node, make_pod, node_info


def scores(plugin, pod, infos):
    state = CycleState()
    if hasattr(plugin, "pre_score"):
        s = plugin.pre_score(state, pod, infos)
        if s.code is Code.SKIP:
            return None
    raw = [NodeScore(i.name, plugin.score(state, pod, i)[0]) for i in infos]
    normalized, _ = plugin.normalize_score(state, pod, raw)
    return [s.score for s in normalized]


# ------------------------------------------------------------ LeastAllocated (least_allocated_test.go)

def test_least_allocated_upstream_cases() -> None:
    fit = Fit()
    two = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
    # nothing scheduled, nothing requested
    assert scores(fit, make_pod(), [node_info(make_node("node1", "4000", "10000")),
                                    node_info(make_node("node2", "4000", "10000"))]) == [100, 100]
    # nothing scheduled, resources requested, differently sized nodes
    assert scores(fit, make_pod("p", *two), [node_info(make_node("node1", "4000", "10000")),
                                             node_info(make_node("node2", "6000", "10000"))]) == [37, 50]
    # no resources requested, pods scheduled with resources
    n1 = node_info(make_node("node1", "10000", "20000"),
                   make_pod("", {"cpu": "3000", "memory": "0"}), make_pod("", {"cpu": "3000", "memory": "0"}))
    n2 = node_info(make_node("node2", "10000", "20000"),
                   make_pod("", {"cpu": "3000", "memory": "0"}), make_pod("", {"cpu": "3000", "memory": "5000"}))
    assert scores(fit, make_pod(), [n1, n2]) == [70, 57]
    # resources requested, pods scheduled with resources, differently sized nodes
    n1 = node_info(make_node("node1", "10000", "20000"), make_pod("", {"cpu": "3000", "memory": "0"}))
    n2 = node_info(make_node("node2", "10000", "50000"), make_pod("", {"cpu": "3000", "memory": "5000"}))
    assert scores(fit, make_pod("p", *two), [n1, n2]) == [57, 60]
    # requested resources exceed node capacity
    n1 = node_info(make_node("node1", "4000", "10000"), make_pod("", {"cpu": "3000", "memory": "0"}))
    n2 = node_info(make_node("node2", "4000", "10000"), make_pod("", {"cpu": "3000", "memory": "5000"}))
    assert scores(fit, make_pod("p", {"cpu": "3000", "memory": "0"}), [n1, n2]) == [50, 25]
    # zero node resources
    assert scores(fit, make_pod(), [node_info(make_node("node1")), node_info(make_node("node2"))]) == [0, 0]
    # different weights on CPU and memory
    weighted = Fit({"scoringStrategy": {"resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]}})
    assert scores(weighted, make_pod("p", *two), [node_info(make_node("node1", "4000", "10000")),
                                                  node_info(make_node("node2", "6000", "10000"))]) == [41, 50]
    # extended resources: bypassed when not requested, honoured when requested
    ext = Fit({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                                                 {"name": "example.com/foo", "weight": 1}]}})
    with_foo = node_info(make_node("node2", "6000", "10000", extra={"example.com/foo": "4"}))
    assert scores(ext, make_pod("p", *two), [node_info(make_node("node1", "6000", "10000")), with_foo]) == [50, 50]
    assert scores(ext, make_pod("p", {"cpu": "3000", "memory": "5000", "example.com/foo": "2"}),
                  [node_info(make_node("node1", "6000", "10000", extra={"example.com/foo": "4"})),
                   node_info(make_node("node2", "6000", "10000", extra={"example.com/foo": "10"}))]) == [50, 60]


def test_most_allocated_and_rtcr() -> None:
    most = Fit({"scoringStrategy": {"type": "MostAllocated"}})
    two = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
    # most_allocated_test.go: "nothing scheduled, resources requested, differently sized nodes"
    # node1: cpu 3000*100/4000 = 75, mem 5000*100/10000 = 50 -> 62; node2: 50, 50 -> 50
    assert scores(most, make_pod("p", *two), [node_info(make_node("node1", "4000", "10000")),
                                              node_info(make_node("node2", "6000", "10000"))]) == [62, 50]
    # requested_to_capacity_ratio_test.go shape {0:10, 100:0} behaves like LeastAllocated
    rtcr = Fit({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                           {"utilization": 100, "score": 0}]}}})
    # node1: cpu 75% -> 25, mem 50% -> 50 -> round(37.5)=38; node2: 50,50 -> 50
    assert scores(rtcr, make_pod("p", *two), [node_info(make_node("node1", "4000", "10000")),
                                              node_info(make_node("node2", "6000", "10000"))]) == [38, 50]


def test_fit_filter_reasons() -> None:
    fit = Fit()
    state = CycleState()
    pod = make_pod("p", {"cpu": "2", "memory": "1Gi"})
    fit.pre_filter(state, pod, [])
    full = node_info(make_node("n", "2", "4Gi", "1"), make_pod("", {"cpu": "1"}))
    s = fit.filter(state, pod, full)
    assert s.code is Code.UNSCHEDULABLE and s.reasons == ("Too many pods", "Insufficient cpu")
    roomy = node_info(make_node("n", "4", "4Gi", "110"), make_pod("", {"cpu": "1"}))
    assert fit.filter(state, pod, roomy).ok
    gpu = make_pod("g", {"example.com/gpu": "1"})
    fit.pre_filter(state, gpu, [])
    assert fit.filter(state, gpu, roomy).reasons == ("Insufficient example.com/gpu",)


# ------------------------------------------------------------ BalancedAllocation (balanced_allocation_test.go)

def test_balanced_allocation_upstream_cases() -> None:
    ba = BalancedAllocation()
    cpu_only = ({"cpu": "1000m"}, {"cpu": "2000m"})
    cpu_mem = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    assert scores(ba, make_pod(), [node_info(make_node("node1", "4", "10000"))]) is None  # Skip
    assert scores(ba, make_pod("p", *cpu_mem), [node_info(make_node("node1", "4", "10000")),
                                                node_info(make_node("node2", "6", "10000"))]) == [87, 100]
    n1 = node_info(make_node("node1", "10", "20000"), make_pod("", *cpu_only))
    n2 = node_info(make_node("node2", "10", "20000"), make_pod("", *cpu_mem))
    assert scores(ba, make_pod("p", *cpu_mem), [n1, n2]) == [82, 95]
    n2 = node_info(make_node("node2", "10", "50000"), make_pod("", *cpu_mem))
    assert scores(ba, make_pod("p", *cpu_mem), [n1, n2]) == [82, 80]
    n1 = node_info(make_node("node1", "6", "10000"), make_pod("", *cpu_only))
    n2 = node_info(make_node("node2", "6", "10000"), make_pod("", *cpu_mem))
    assert scores(ba, make_pod("p", *cpu_only), [n1, n2]) == [50, 75]


# ------------------------------------------------------------ TaintToleration (taint_toleration_test.go)

def _taint(key: str, value: str, effect: str) -> core_pb2.Taint:
    return core_pb2.Taint(key=key, value=value, effect=effect)


def _tol(key: str, value: str, effect: str, op: str = "Equal") -> core_pb2.Toleration:
    return core_pb2.Toleration(key=key, value=value, effect=effect, operator=op)


def test_taint_toleration_score_upstream_cases() -> None:
    tt = TaintToleration()
    # "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints"
    pod = make_pod("p", tolerations=[_tol("foo", "bar", "PreferNoSchedule")])
    nodes = [node_info(make_node("nodeA", taints=[_taint("foo", "bar", "PreferNoSchedule")])),
             node_info(make_node("nodeB", taints=[_taint("foo", "blah", "PreferNoSchedule")]))]
    assert scores(tt, pod, nodes) == [100, 0]
    # "the nodes that all of their taints are tolerated by the pod, get the same score"
    pod = make_pod("p", tolerations=[_tol("cpu-type", "arm64", "PreferNoSchedule"),
                                     _tol("disk-type", "ssd", "PreferNoSchedule")])
    nodes = [node_info(make_node("nodeA")),
             node_info(make_node("nodeB", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule")])),
             node_info(make_node("nodeC", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule"),
                                                  _taint("disk-type", "ssd", "PreferNoSchedule")]))]
    assert scores(tt, pod, nodes) == [100, 100, 100]
    # "the more intolerable taints a node has, the lower score it gets"
    pod = make_pod("p", tolerations=[_tol("foo", "bar", "PreferNoSchedule")])
    nodes = [node_info(make_node("nodeA")),
             node_info(make_node("nodeB", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule")])),
             node_info(make_node("nodeC", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule"),
                                                  _taint("disk-type", "ssd", "PreferNoSchedule")]))]
    assert scores(tt, pod, nodes) == [100, 50, 0]
    # "only taints and tolerations that have effect PreferNoSchedule are checked"
    pod = make_pod("p", tolerations=[_tol("cpu-type", "arm64", "NoSchedule"), _tol("disk-type", "ssd", "NoSchedule")])
    nodes = [node_info(make_node("nodeA")),
             node_info(make_node("nodeB", taints=[_taint("cpu-type", "arm64", "NoSchedule")])),
             node_info(make_node("nodeC", taints=[_taint("cpu-type", "arm64", "PreferNoSchedule"),
                                                  _taint("disk-type", "ssd", "PreferNoSchedule")]))]
    assert scores(tt, pod, nodes) == [100, 100, 0]


def test_taint_toleration_filter() -> None:
    tt = TaintToleration()
    node = node_info(make_node("n", taints=[_taint("dedicated", "user1", "NoSchedule")]))
    s = tt.filter(CycleState(), make_pod("p"), node)
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons == ("node(s) had untolerated taint {dedicated: user1}",)
    assert tt.filter(CycleState(), make_pod("p", tolerations=[_tol("dedicated", "user1", "NoSchedule")]), node).ok
    assert tt.filter(CycleState(), make_pod("p", tolerations=[_tol("dedicated", "", "", "Exists")]), node).ok
    assert tt.filter(CycleState(), make_pod("p", tolerations=[_tol("", "", "", "Exists")]), node).ok
    assert not tt.filter(CycleState(), make_pod("p", tolerations=[_tol("dedicated", "user2", "NoSchedule")]), node).ok
    prefer = node_info(make_node("n", taints=[_taint("dedicated", "user1", "PreferNoSchedule")]))
    assert tt.filter(CycleState(), make_pod("p"), prefer).ok


# ------------------------------------------------------------ NodeAffinity (node_affinity_test.go)

def _affinity_pod(required: list[core_pb2.NodeSelectorTerm] | None = None,
                  preferred: list[core_pb2.PreferredSchedulingTerm] | None = None,
                  selector: dict[str, str] | None = None) -> core_pb2.Pod:
    pod = make_pod("p")
    pod.spec.nodeSelector.update(selector or {})
    na = pod.spec.affinity.nodeAffinity
    if required is not None:
        na.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.extend(required)
    na.preferredDuringSchedulingIgnoredDuringExecution.extend(preferred or [])
    return pod


def _req(key: str, op: str, *values: str) -> core_pb2.NodeSelectorRequirement:
    return core_pb2.NodeSelectorRequirement(key=key, operator=op, values=list(values))


def test_node_affinity_filter() -> None:
    na = NodeAffinity()

    def fits(pod: core_pb2.Pod, labels: dict[str, str], name: str = "n") -> bool:
        state = CycleState()
        _, s = na.pre_filter(state, pod, [])
        if not s.ok and not s.is_skip:
            return False
        return na.filter(state, pod, node_info(make_node(name, labels=labels))).ok

    assert fits(_affinity_pod(selector={"foo": "bar"}), {"foo": "bar"})
    assert not fits(_affinity_pod(selector={"foo": "bar"}), {"foo": "baz"})
    term = core_pb2.NodeSelectorTerm(matchExpressions=[_req("foo", "In", "bar", "value2")])
    assert fits(_affinity_pod([term]), {"foo": "bar"})
    assert not fits(_affinity_pod([term]), {"foo": "other"})
    gt = core_pb2.NodeSelectorTerm(matchExpressions=[_req("kernel-version", "Gt", "0204")])
    assert fits(_affinity_pod([gt]), {"kernel-version": "0206"})
    assert not fits(_affinity_pod([gt]), {"kernel-version": "0200"})
    # an empty term matches nothing (upstream)
    assert not fits(_affinity_pod([core_pb2.NodeSelectorTerm()]), {"foo": "bar"})
    # terms are ORed
    assert fits(_affinity_pod([core_pb2.NodeSelectorTerm(matchExpressions=[_req("foo", "In", "x")]), term]),
                {"foo": "bar"})
    # matchFields on the node name, and the PreFilter narrowing
    by_name = core_pb2.NodeSelectorTerm(matchFields=[_req("metadata.name", "In", "node1")])
    pod = _affinity_pod([by_name])
    result, s = na.pre_filter(CycleState(), pod, [])
    assert s.ok and result is not None and result.node_names == {"node1"}
    assert fits(pod, {}, "node1") and not fits(pod, {}, "node2")


def test_node_affinity_score_upstream_cases() -> None:
    na = NodeAffinity()
    pref = [core_pb2.PreferredSchedulingTerm(weight=2, preference=core_pb2.NodeSelectorTerm(
                matchExpressions=[_req("foo", "In", "bar")])),
            core_pb2.PreferredSchedulingTerm(weight=4, preference=core_pb2.NodeSelectorTerm(
                matchExpressions=[_req("key", "In", "value")])),
            core_pb2.PreferredSchedulingTerm(weight=5, preference=core_pb2.NodeSelectorTerm(
                matchExpressions=[_req("foo", "In", "bar"), _req("key", "In", "value"), _req("az", "In", "az1")]))]
    pod = _affinity_pod(preferred=pref)
    nodes = [node_info(make_node("node1", labels={"foo": "bar"})),
             node_info(make_node("node5", labels={"foo": "bar", "key": "value", "az": "az1"})),
             node_info(make_node("node2", labels={"key": "value"}))]
    # "all machines matches the preferred scheduling requirements of pod but with different priorities"
    assert scores(na, pod, nodes) == [18, 100, 36]
    assert scores(na, make_pod("p"), nodes) is None  # no preferred terms: PreScore skips


def test_image_locality_priority() -> None:
    mb = 1024 * 1024
    # image_locality_test.go: two images of 250MB and 10MB present on a node (spread 1/1)
    assert calculate_priority(250 * mb + 10 * mb, 2) == 100 * (260 - 23) * mb // ((2000 - 23) * mb)
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(5000 * mb, 1) == 100

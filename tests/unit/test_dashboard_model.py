"""The dashboard's rows and its why-chart data, from objects and recorded attempts."""

from __future__ import annotations

from cluster.dashboard.model import node_row, pod_row, timeline, trace_id, why_chart
from protos.kubeling.v1 import core_pb2, meta_pb2


def test_why_chart_orders_nodes_and_names_each_rejection() -> None:
    chart = why_chart({
        "attempt": 2, "selected-node": "b",
        "filter-result": {"a": {"NodeResourcesFit": "passed", "TaintToleration": "passed"},
                          "b": {"NodeResourcesFit": "passed", "TaintToleration": "passed"},
                          "c": {"NodeResourcesFit": "Unschedulable: Insufficient cpu"},
                          "(rejected)": {"NodeResourcesFit: Insufficient cpu": 40}},
        "score-result": {"a": {"ImageLocality": {"raw": 1, "normalized": 10, "weighted": 10},
                               "NodeResourcesFit": {"raw": 50, "normalized": 50, "weighted": 50}},
                         "b": {"ImageLocality": {"raw": 9, "normalized": 90, "weighted": 90},
                               "NodeResourcesFit": {"raw": 40, "normalized": 40, "weighted": 40}}},
        "finalscore-result": {"a": 60, "b": 130}})
    assert chart["plugins"] == ["ImageLocality", "NodeResourcesFit"] and chart["attempt"] == 2
    assert [(n["node"], n["selected"], n["total"]) for n in chart["nodes"]] == \
        [("b", True, 130), ("a", False, 60), ("c", False, None)]
    assert chart["nodes"][0]["scores"] == {"ImageLocality": 90, "NodeResourcesFit": 40}
    assert chart["nodes"][2] == {"node": "c", "feasible": False, "filter": "NodeResourcesFit: Insufficient cpu",
                                 "scores": {}, "total": None, "selected": False}
    assert chart["rejected"] == {"NodeResourcesFit: Insufficient cpu": 40}


def test_why_chart_with_no_fit() -> None:
    chart = why_chart({"attempt": 1, "selected-node": "", "filter-result": {"a": {"NodeName": "Unschedulable: no"}},
                       "postfilter-result": {"status": "no victims"}})
    assert chart["selected"] == "" and chart["nodes"][0]["feasible"] is False
    assert chart["postfilter"] == {"status": "no victims"}


def test_rows() -> None:
    node = core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="n", labels={"node-role.kubernetes.io/control-plane": ""}))
    node.spec.taints.add(key="node-role.kubernetes.io/control-plane", effect="NoSchedule")
    node.status.conditions.add(type="Ready", status="True")
    row = node_row(node)
    assert row["ready"] == "True" and row["roles"] == ["control-plane"]
    assert row["taints"] == ["node-role.kubernetes.io/control-plane:NoSchedule"]
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="d"),
                       spec=core_pb2.PodSpec(containers=[core_pb2.Container(name="c")]),
                       status=core_pb2.PodStatus(phase="Running"))
    pod.status.containerStatuses.add(name="c", restartCount=3).state.waiting.reason = "CrashLoopBackOff"
    assert pod_row(pod)["status"] == "CrashLoopBackOff" and pod_row(pod)["restarts"] == 3
    assert pod_row(pod)["ready"] == "0/1" and pod_row(pod)["explained"] is False


def test_timeline_from_a_jaeger_trace() -> None:
    trace = {"spans": [
        {"spanID": "a", "operationName": "POST pods", "startTime": 1_000_000, "duration": 2_000, "processID": "p1",
         "references": []},
        {"spanID": "b", "operationName": "syncPod", "startTime": 1_010_000, "duration": 300_000, "processID": "p2",
         "references": [{"refType": "CHILD_OF", "spanID": "a"}]},
        {"spanID": "c", "operationName": "runc run", "startTime": 1_020_000, "duration": 50_000, "processID": "p2",
         "references": [{"refType": "CHILD_OF", "spanID": "b"}]}],
        "processes": {"p1": {"serviceName": "apiserver"}, "p2": {"serviceName": "kubelet-n1"}}}
    rows = timeline(trace)
    assert [(r["service"], r["name"], r["startMs"], r["durationMs"], r["depth"]) for r in rows] == [
        ("apiserver", "POST pods", 0.0, 2.0, 0), ("kubelet-n1", "syncPod", 10.0, 300.0, 1),
        ("kubelet-n1", "runc run", 20.0, 50.0, 2)]
    assert [r["name"] for r in timeline(trace, limit=2)] == ["syncPod", "runc run"]  # the longest kept
    assert timeline({}) == []


def test_trace_id_from_the_pods_annotation() -> None:
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(annotations={
        "kubeling.io/traceparent": "00-3c30b1899ae5c7a4f761d4fb2519921a-a9222e0a8464de9e-01"}))
    assert trace_id(pod) == "3c30b1899ae5c7a4f761d4fb2519921a"
    assert trace_id(core_pb2.Pod()) == ""

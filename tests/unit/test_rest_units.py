"""The REST facade's pure parts: Kubernetes JSON both ways, the three patch formats,
the table printers (STATUS as kubectl shows it, ages as HumanDuration)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.endpoints.rest.apply import apply, record_update
from apiserver.endpoints.rest.codec import from_json, to_json
from apiserver.endpoints.rest.tables import human_duration, pod_status, table
from kubeling import errors
from kubeling.patches import json_patch, merge_patch, strategic_merge_patch
from protos.kubeling.v1 import core_pb2

# ------------------------------------------------------------------ codec

POD = {
    "metadata": {"name": "p", "namespace": "default", "generation": 3, "labels": {"a": "b"},
                 "creationTimestamp": "2026-01-02T03:04:05Z"},
    "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
        "name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}},
        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
        "readinessProbe": {"tcpSocket": {"port": 8080}}}],
        "volumes": [{"name": "scratch", "emptyDir": {}}]},
}


def test_codec_round_trip_keeps_kubernetes_shapes() -> None:
    decoded = from_json({"kind": "Pod", "apiVersion": "v1", **POD}, core_pb2.Pod)
    assert decoded.unknown == []
    pod = decoded.message
    assert pod.metadata.generation == 3 and pod.metadata.creationTimestamp.seconds == 1767323045
    assert pod.spec.HasField("terminationGracePeriodSeconds") and pod.spec.terminationGracePeriodSeconds == 0
    assert pod.spec.containers[0].livenessProbe.httpGet.port.strVal == "http"
    # int64 as numbers, explicit zero kept, `{}` kept, IntOrString bare; and the status Go
    # always writes (a non-pointer struct), as kube-apiserver answers it
    assert to_json(pod) == {**POD, "status": {}}


def test_codec_names_unknown_fields_and_type_errors() -> None:
    decoded = from_json({"spec": {"containers": [{"name": "c", "colour": 1}], "foo": {}}, "bar": 1}, core_pb2.Pod)
    assert decoded.unknown == ["spec.containers[0].colour", "spec.foo", "bar"]
    with pytest.raises(errors.BadRequest, match=r"spec.containers\[0\].name: expected a string, got a number"):
        from_json({"spec": {"containers": [{"name": 5}]}}, core_pb2.Pod)
    with pytest.raises(errors.BadRequest, match="spec.priority: 4294967296 does not fit in int32"):
        from_json({"spec": {"priority": 1 << 32}}, core_pb2.Pod)
    with pytest.raises(errors.BadRequest, match="metadata.creationTimestamp: invalid time"):
        from_json({"metadata": {"creationTimestamp": "yesterday"}}, core_pb2.Pod)
    with pytest.raises(errors.BadRequest, match="must be a JSON object, not an array"):
        from_json([], core_pb2.Pod)


# ------------------------------------------------------------------ patches

LIVE: dict[str, Any] = {"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
        "spec": {"containers": [{"name": "one", "image": "i1", "env": [{"name": "A", "value": "1"}]},
                                {"name": "two", "image": "i2"}],
                 "tolerations": [{"key": "k1"}]}}


def test_merge_patch_rfc7386() -> None:
    out = merge_patch(LIVE, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"tolerations": [{"key": "k2"}]}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["tolerations"] == [{"key": "k2"}] and LIVE["metadata"]["labels"]["a"] == "1"


def test_json_patch_rfc6902() -> None:
    out = json_patch(LIVE, [{"op": "replace", "path": "/spec/containers/1/image", "value": "i3"},
                            {"op": "add", "path": "/spec/containers/-", "value": {"name": "three"}},
                            {"op": "remove", "path": "/metadata/labels/a"},
                            {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
                            {"op": "test", "path": "/metadata/labels/b", "value": "2"}])
    assert [c.get("image") for c in out["spec"]["containers"]] == ["i1", "i3", None]
    assert out["metadata"]["labels"] == {"b": "2", "name": "p"}
    with pytest.raises(errors.Invalid):
        json_patch(LIVE, [{"op": "test", "path": "/metadata/name", "value": "q"}])
    with pytest.raises(errors.BadRequest, match='path "/nope/x" does not exist'):
        json_patch(LIVE, [{"op": "add", "path": "/nope/x", "value": 1}])


def test_strategic_merge_patch_keys_and_directives() -> None:
    out = strategic_merge_patch(LIVE, {
        "metadata": {"finalizers": ["y"]},
        "spec": {"containers": [{"name": "two", "image": "i2b"}, {"name": "new", "image": "n"},
                                {"name": "one", "env": [{"name": "B", "value": "2"}]}],
                 "$setElementOrder/containers": [{"name": "new"}, {"name": "one"}, {"name": "two"}],
                 "tolerations": [{"key": "k2"}]}})
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["new", "one", "two"]  # merged by name, in the given order
    assert containers[1]["image"] == "i1" and [e["name"] for e in containers[1]["env"]] == ["A", "B"]
    assert containers[2]["image"] == "i2b"
    assert out["spec"]["tolerations"] == [{"key": "k2"}]  # no merge key upstream: replaced
    assert out["metadata"]["finalizers"] == ["x", "y"]  # merged as a set

    out = strategic_merge_patch(LIVE, {"spec": {"containers": [{"name": "one", "$patch": "delete"}]},
                                       "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"],
                                                    "labels": {"$patch": "replace", "z": "9"}}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["two"]
    assert out["metadata"]["finalizers"] == [] and out["metadata"]["labels"] == {"z": "9"}
    out = strategic_merge_patch(LIVE, {"spec": {"$retainKeys": ["containers"], "containers": []}})
    assert out["spec"] == {"containers": LIVE["spec"]["containers"]}


# ------------------------------------------------------------------ tables


def _cs(state: dict, ready: bool = False, restarts: int = 0, last: dict | None = None) -> dict:
    out = {"name": "c", "state": state, "ready": ready, "restartCount": restarts}
    if last:
        out["lastState"] = last
    return out


@pytest.mark.parametrize(("pod", "expected"), [
    ({"status": {"phase": "Pending"}}, ("Pending", 0, 0)),
    ({"status": {"phase": "Pending", "containerStatuses": [_cs({"waiting": {"reason": "ContainerCreating"}})]}},
     ("ContainerCreating", 0, 0)),
    ({"status": {"phase": "Running", "containerStatuses": [_cs({"running": {}}, ready=True)]}}, ("Running", 1, 0)),
    ({"status": {"phase": "Running", "containerStatuses": [_cs({"waiting": {"reason": "CrashLoopBackOff"}},
                                                               restarts=3)]}}, ("CrashLoopBackOff", 0, 3)),
    ({"status": {"phase": "Succeeded", "containerStatuses": [_cs({"terminated": {"reason": "Completed"}})]}},
     ("Completed", 0, 0)),
    ({"status": {"phase": "Failed", "containerStatuses": [_cs({"terminated": {"exitCode": 2}})]}},
     ("ExitCode:2", 0, 0)),
    ({"spec": {"initContainers": [{}, {}]}, "status": {"phase": "Pending", "initContainerStatuses": [
        _cs({"terminated": {"exitCode": 0, "reason": "Completed"}}), _cs({"running": {}})]}}, ("Init:1/2", 0, 0)),
    ({"spec": {"initContainers": [{}]}, "status": {"phase": "Pending", "initContainerStatuses": [
        _cs({"waiting": {"reason": "CrashLoopBackOff"}}, restarts=2)]}}, ("Init:CrashLoopBackOff", 0, 2)),
    ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
      "status": {"phase": "Running", "containerStatuses": [_cs({"running": {}}, ready=True)]}}, ("Terminating", 1, 0)),
])
def test_pod_status_as_kubectl_shows_it(pod: dict, expected: tuple[str, int, int]) -> None:
    reason, ready, restarts, _ = pod_status(pod)
    assert (reason, ready, restarts) == expected


def test_pod_row_and_human_duration() -> None:
    pod = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{}, {}], "nodeName": "n1"},
           "status": {"podIP": "10.0.0.5", "containerStatuses": [
               _cs({"running": {}}, ready=True, restarts=1,
                   last={"terminated": {"finishedAt": "2026-01-01T00:05:00Z"}})]}}
    now = 1767225600 + 3 * 3600 + 600  # 3h10m after creation
    rows = table("pods", [pod], now=now)["rows"]
    assert rows[0]["cells"] == ["p", "1/2", "", "1 (3h5m ago)", "3h10m", "10.0.0.5", "n1", "<none>", "<none>"]
    assert [human_duration(s) for s in (5, 119, 150, 600, 179 * 60, 3 * 3600, 9 * 3600, 50 * 3600, 400 * 86400)] == \
        ["5s", "119s", "2m30s", "10m", "179m", "3h", "9h", "2d2h", "400d"]


# ------------------------------------------------------------------ server-side apply


def _config(labels: dict, image: str = "busybox", env: list | None = None) -> dict:
    container = {"name": "main", "image": image, **({"env": env} if env else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [container]}}


def test_apply_field_sets_are_fieldsv1() -> None:
    created = apply(None, _config({"app": "web"}, env=[{"name": "A", "value": "1"}]), "alice", force=False, now="T1")
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["time"]) == ("alice", "Apply", "T1")
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"main"}': {
            ".": {}, "f:name": {}, "f:image": {},
            "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}}}}}


def test_apply_removes_what_its_manager_stopped_applying_and_keeps_the_rest() -> None:
    live = apply(None, _config({"app": "web", "tier": "fe"}), "alice", force=False, now="T1")
    edited = copy.deepcopy(live)
    record_update(live, edited, "bob", "T2")  # no change: nothing to own
    assert [e["manager"] for e in edited["metadata"]["managedFields"]] == ["alice"]
    edited["metadata"]["labels"]["owner"] = "bob"
    record_update(live, edited, "bob", "T2")
    assert [e["manager"] for e in edited["metadata"]["managedFields"]] == ["alice", "bob"]

    again = apply(edited, _config({"app": "web"}), "alice", force=False, now="T3")
    assert again["metadata"]["labels"] == {"app": "web", "owner": "bob"}  # tier dropped, bob's label kept
    assert again["metadata"]["managedFields"][-1]["time"] == "T3"
    same = apply(again, _config({"app": "web"}), "alice", force=False, now="T4")
    assert same == again  # nothing new: not even the time


def test_apply_conflicts_unless_forced() -> None:
    live = apply(None, _config({"app": "web", "team": "a"}), "alice", force=False, now="T1")
    with pytest.raises(errors.Conflict,
                       match='Apply failed with 2 conflicts: conflicts with "alice":\n- .metadata.labels.app'):
        apply(live, _config({"app": "api"}, image="busybox:2"), "bob", force=False, now="T2")
    shared = apply(live, _config({"app": "web"}), "bob", force=False, now="T2")  # same values: co-owned
    assert {e["manager"] for e in shared["metadata"]["managedFields"]} == {"alice", "bob"}
    forced = apply(shared, _config({"app": "api"}), "bob", force=True, now="T3")
    assert forced["metadata"]["labels"] == {"app": "api", "team": "a"}
    alice = next(e for e in forced["metadata"]["managedFields"] if e["manager"] == "alice")
    assert alice["fieldsV1"]["f:metadata"]["f:labels"] == {"f:team": {}}  # bob took the rest over

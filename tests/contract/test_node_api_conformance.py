"""The sig-node conformance tests that exercise only the API — ConfigMaps, Secrets,
PodTemplates, Leases, Nodes and the pods' collection and status operations — against the
REST API on a real etcd, as upstream's tests drive it (their names in the docstrings).
Those that need a pod to run are tests/e2e/test_node_conformance.py and
tests/e2e/test_pods_conformance.py."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.contract.test_crds import Rest

NS = "/api/v1/namespaces/default"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


async def _lifecycle(http: Rest, collection: str, made: dict[str, Any], patch: dict[str, Any],
                     check: Any) -> None:
    """Create, patch, read back, find by the static label, delete by collection."""
    name = made["metadata"]["name"]
    code, body, _ = await http.call("POST", collection, made)
    assert code == 201, body
    code, patched, _ = await http.call("PATCH", f"{collection}/{name}", patch, content_type=STRATEGIC)
    assert code == 200, patched
    code, got, _ = await http.call("GET", f"{collection}/{name}")
    check(got)
    code, listed, _ = await http.call("GET", collection, query={"labelSelector": "test-static=true"})
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    check(listed["items"][0])
    code, _, _ = await http.call("DELETE", collection, query={"labelSelector": "test-static=true"})
    assert code == 200
    code, listed, _ = await http.call("GET", collection, query={"labelSelector": "test-static=true"})
    assert listed["items"] == []


async def test_configmap_with_empty_key(http: Rest) -> None:
    """ConfigMap, with empty-key ('[sig-node] ConfigMap should fail to create ConfigMap with empty key')."""
    code, body, _ = await http.call("POST", f"{NS}/configmaps", {"metadata": {"name": "configmap-test-emptykey"},
                                                                 "data": {"": "value-1"}})
    assert code == 422, body
    assert body["details"]["causes"][0]["field"] == "data[]", body


async def test_configmap_lifecycle(http: Rest) -> None:
    """ConfigMap lifecycle ('[sig-node] ConfigMap should run through a ConfigMap lifecycle')."""
    def check(cm: dict[str, Any]) -> None:
        assert cm["data"] == {"valueName": "value", "patched": "yes"}
        assert cm["metadata"]["labels"] == {"test-static": "true", "test-configmap": "patched"}
    await _lifecycle(http, f"{NS}/configmaps",
                     {"metadata": {"name": "test-configmap", "labels": {"test-static": "true"}},
                      "data": {"valueName": "value"}},
                     {"metadata": {"labels": {"test-configmap": "patched"}}, "data": {"patched": "yes"}}, check)


async def test_secrets_with_empty_key(http: Rest) -> None:
    """Secrets, with empty-key ('[sig-node] Secrets should fail to create secret due to empty secret key')."""
    code, body, _ = await http.call("POST", f"{NS}/secrets", {"metadata": {"name": "secret-emptykey-test"},
                                                              "data": {"": base64.b64encode(b"value-1").decode()}})
    assert code == 422, body
    assert body["details"]["causes"][0]["field"] == "data[]", body


async def test_secret_patching(http: Rest) -> None:
    """Secret patching ('[sig-node] Secrets should patch a secret')."""
    encoded = base64.b64encode(b"value1").decode()

    def check(secret: dict[str, Any]) -> None:
        assert secret["data"] == {"key": encoded, "patched": base64.b64encode(b"yes").decode()}
        assert secret["metadata"]["labels"]["testsecret"] == "true"
    await _lifecycle(http, f"{NS}/secrets",
                     {"metadata": {"name": "test-secret", "labels": {"test-static": "true"}},
                      "data": {"key": encoded}, "type": "Opaque"},
                     {"metadata": {"labels": {"testsecret": "true"}},
                      "data": {"patched": base64.b64encode(b"yes").decode()}}, check)


def _template(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "token-test", "image": "busybox"}]}}}


async def test_podtemplate_lifecycle(http: Rest) -> None:
    """PodTemplate lifecycle ('[sig-node] PodTemplates should run the lifecycle of PodTemplates')."""
    def check(t: dict[str, Any]) -> None:
        assert t["metadata"]["labels"] == {"test-static": "true", "podtemplate": "patched"}
    await _lifecycle(http, f"{NS}/podtemplates", _template("nginx-pod-template", **{"test-static": "true"}),
                     {"metadata": {"labels": {"podtemplate": "patched"}}}, check)


async def test_podtemplate_delete_a_collection(http: Rest) -> None:
    """PodTemplate, delete a collection ('[sig-node] PodTemplates should delete a collection of pod templates')."""
    for i in range(3):
        made = _template(f"podtemplate-{i}", podtemplate="set")
        assert (await http.call("POST", f"{NS}/podtemplates", made))[0] == 201
    code, listed, _ = await http.call("GET", f"{NS}/podtemplates", query={"labelSelector": "podtemplate=set"})
    assert len(listed["items"]) == 3
    assert (await http.call("DELETE", f"{NS}/podtemplates", query={"labelSelector": "podtemplate=set"}))[0] == 200
    code, listed, _ = await http.call("GET", f"{NS}/podtemplates", query={"labelSelector": "podtemplate=set"})
    assert listed["items"] == []


async def test_podtemplate_replace(http: Rest) -> None:
    """PodTemplate, replace ('[sig-node] PodTemplates should replace a pod template')."""
    code, made, _ = await http.call("POST", f"{NS}/podtemplates", _template("podtemplate-replace"))
    assert code == 201
    made["metadata"]["annotations"] = {"updated": "true"}
    code, replaced, _ = await http.call("PUT", f"{NS}/podtemplates/podtemplate-replace", made)
    assert code == 200 and replaced["metadata"]["annotations"] == {"updated": "true"}


async def test_lease_api_should_be_available(http: Rest) -> None:
    """lease API should be available ('[sig-node] Lease lease API should be available')."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    spec = {"holderIdentity": "holder", "leaseDurationSeconds": 30, "acquireTime": "2026-12-04T00:00:00.000000Z",
            "renewTime": "2026-12-04T00:00:00.000000Z", "leaseTransitions": 0}
    code, made, _ = await http.call("POST", leases, {"metadata": {"name": "lease"}, "spec": spec})
    assert code == 201, made
    code, got, _ = await http.call("GET", f"{leases}/lease")
    assert got["spec"] == spec
    got["spec"] = {**spec, "holderIdentity": "holder2", "leaseTransitions": 1}
    code, updated, _ = await http.call("PUT", f"{leases}/lease", got)
    assert code == 200 and updated["spec"]["holderIdentity"] == "holder2"
    code, patched, _ = await http.call("PATCH", f"{leases}/lease", {"spec": {"holderIdentity": "holder3",
                                                                             "leaseTransitions": 2}},
                                       content_type=STRATEGIC)
    assert code == 200 and patched["spec"]["holderIdentity"] == "holder3" and patched["spec"]["leaseTransitions"] == 2
    second = {"metadata": {"name": "lease2", "labels": {"deletecollection": "true"}}, "spec": spec}
    assert (await http.call("POST", leases, second))[0] == 201
    code, listed, _ = await http.call("GET", leases)
    assert {i["metadata"]["name"] for i in listed["items"]} == {"lease", "lease2"}
    assert (await http.call("DELETE", leases, query={"labelSelector": "deletecollection=true"}))[0] == 200
    code, listed, _ = await http.call("GET", leases)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["lease"]
    assert (await http.call("DELETE", f"{leases}/lease"))[0] == 200
    assert (await http.call("GET", f"{leases}/lease"))[0] == 404


async def test_node_resource_lifecycle(http: Rest) -> None:
    """Node, resource lifecycle ('[sig-node] Node Lifecycle should run through the lifecycle of a node')."""
    nodes = "/api/v1/nodes"
    code, made, _ = await http.call("POST", nodes, {"metadata": {"name": "e2e-fake-node", "labels": {"e2e": "lc"}},
                                                    "spec": {"taints": [{"key": "node.kubernetes.io/not-ready",
                                                                         "effect": "NoSchedule"}]}})
    assert code == 201, made
    code, got, _ = await http.call("GET", f"{nodes}/e2e-fake-node")
    assert got["metadata"]["name"] == "e2e-fake-node"
    code, patched, _ = await http.call("PATCH", f"{nodes}/e2e-fake-node", {"metadata": {"labels": {"patched": "true"}}},
                                       content_type=MERGE)
    assert code == 200 and patched["metadata"]["labels"]["patched"] == "true"
    code, listed, _ = await http.call("GET", nodes, query={"labelSelector": "e2e=lc"})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["e2e-fake-node"]
    patched["metadata"]["labels"]["updated"] = "true"
    code, updated, _ = await http.call("PUT", f"{nodes}/e2e-fake-node", patched)
    assert code == 200 and updated["metadata"]["labels"]["updated"] == "true"
    assert (await http.call("DELETE", f"{nodes}/e2e-fake-node"))[0] == 200
    assert (await http.call("GET", f"{nodes}/e2e-fake-node"))[0] == 404


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def test_pods_delete_a_collection(http: Rest) -> None:
    """Pods, delete a collection ('[sig-node] Pods should delete a collection of pods'): the
    pods are not scheduled here (no node), which the operations do not need."""
    for i in range(3):
        assert (await http.call("POST", f"{NS}/pods", _pod(f"test-pod-{i}", type="Testing")))[0] == 201
    code, listed, _ = await http.call("GET", f"{NS}/pods", query={"labelSelector": "type=Testing"})
    assert len(listed["items"]) == 3
    assert (await http.call("DELETE", f"{NS}/pods", query={"labelSelector": "type=Testing",
                                                           "gracePeriodSeconds": "0"}))[0] == 200
    code, listed, _ = await http.call("GET", f"{NS}/pods", query={"labelSelector": "type=Testing"})
    assert listed["items"] == []


async def test_pods_patching_status_and_the_lifecycle_of_pods_and_podstatus(http: Rest) -> None:
    """Pods, patching status ('[sig-node] Pods should patch a pod status') and Pods,
    completes the lifecycle of a Pod and the PodStatus ('... should run through the
    lifecycle of Pods and PodStatus'): labels and data patched, the status read,
    patched and replaced through /status, the pod deleted. No kubelet runs here, so the
    status written is the test's alone."""
    code, made, _ = await http.call("POST", f"{NS}/pods", _pod("pod-test", **{"test-pod-static": "true"}))
    assert code == 201
    code, patched, _ = await http.call("PATCH", f"{NS}/pods/pod-test",
                                       {"metadata": {"labels": {"test-pod": "patched"}},
                                        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
                                       content_type=STRATEGIC)
    assert code == 200 and patched["metadata"]["labels"]["test-pod"] == "patched"
    assert patched["spec"]["containers"][0]["image"] == "busybox:1.36"
    code, status, _ = await http.call("GET", f"{NS}/pods/pod-test/status")
    assert code == 200 and status["metadata"]["name"] == "pod-test"
    code, patched, _ = await http.call("PATCH", f"{NS}/pods/pod-test/status",
                                       {"status": {"message": "Patched by e2e test", "reason": "E2E",
                                                   "conditions": [{"type": "PodScheduled", "status": "True"}]}},
                                       content_type=STRATEGIC)
    assert code == 200, patched
    assert (patched["status"]["message"], patched["status"]["reason"]) == ("Patched by e2e test", "E2E")
    patched["status"]["conditions"] = [{"type": "Ready", "status": "True"}, {"type": "PodScheduled",
                                                                           "status": "True"}]
    code, replaced, _ = await http.call("PUT", f"{NS}/pods/pod-test/status", patched)
    assert code == 200, replaced
    assert {c["type"]: c["status"] for c in replaced["status"]["conditions"]}["Ready"] == "True"
    code, listed, _ = await http.call("GET", "/api/v1/pods", query={"labelSelector": "test-pod-static=true"})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pod-test"]
    assert (await http.call("DELETE", f"{NS}/pods/pod-test", query={"gracePeriodSeconds": "0"}))[0] == 200
    assert (await http.call("GET", f"{NS}/pods/pod-test"))[0] == 404


@pytest.mark.parametrize("resource", ["configmaps", "secrets"])
async def test_configmap_and_secrets_volume_immutability(http: Rest, resource: str) -> None:
    """ConfigMap Volume, immutability / Secrets Volume, immutability ('[sig-storage]
    ConfigMap|Secrets should be immutable if `immutable` field is set'): data updates
    until marked immutable, then refused, as is marking it mutable again; labels still
    change; deletion works."""
    def value(text: str) -> str:
        return base64.b64encode(text.encode()).decode() if resource == "secrets" else text
    collection = f"{NS}/{resource}"
    code, made, _ = await http.call("POST", collection, {"metadata": {"name": "immutable"},
                                                         "data": {"data-1": value("value-1")}})
    assert code == 201, made
    made["data"]["data-2"] = value("value-2")
    code, updated, _ = await http.call("PUT", f"{collection}/immutable", made)
    assert code == 200, updated
    updated["immutable"] = True
    code, frozen, _ = await http.call("PUT", f"{collection}/immutable", updated)
    assert code == 200 and frozen["immutable"] is True, frozen
    code, body, _ = await http.call("PATCH", f"{collection}/immutable", {"data": {"data-3": value("value-3")}},
                                    content_type=MERGE)
    assert code == 422 and "field is immutable when `immutable` is set" in body["message"], body
    code, body, _ = await http.call("PATCH", f"{collection}/immutable", {"immutable": False}, content_type=MERGE)
    assert code == 422, body
    code, labelled, _ = await http.call("PATCH", f"{collection}/immutable", {"metadata": {"labels": {"a": "b"}}},
                                        content_type=MERGE)
    assert code == 200 and labelled["metadata"]["labels"] == {"a": "b"}
    assert (await http.call("DELETE", f"{collection}/immutable"))[0] == 200

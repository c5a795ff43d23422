"""ResourceQuota and LimitRange: the `[sig-api-machinery] ResourceQuota` conformance tests
(upstream's test/e2e/apimachinery/resource_quota.go) and the two LimitRange ones
(test/e2e/scheduling/limit_range.go) mirrored, each named after its testname, against a
real apiserver (the ResourceQuota and LimitRanger admission plugins) and controller
manager (the quota controller) over REST, as upstream's clientset drives them; then what a
user meets beyond the list: messages, validation, PriorityClass scopes, custom resources,
races for the last unit, kubectl.

No scheduler or kubelet runs: the pods stay Pending, as upstream's quota pods do (they
select an unsatisfiable node)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client
from kubeling.quantity import parse_quantity
from tests.contract.test_crds import Rest, _kubectl
from tests.wait import until

NAMESPACE = "quota-test"  # a namespace of its own, as upstream's framework gives each test
NS = f"/api/v1/namespaces/{NAMESPACE}"
MERGE = "application/merge-patch+json"
EXTENDED = "example.com/dongle"


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Rest]:
    manager = ControllerManager(Client(rest.address), ManagerConfig(leader_elect=False))
    await manager.start()
    try:
        async with aiohttp.ClientSession() as session:
            api = Rest(rest, session)
            await _create(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": NAMESPACE}})
            yield api
    finally:
        await manager.stop()


def _quota(name: str, hard: dict[str, str], scopes: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
                            "spec": {"hard": hard, **spec}}
    if scopes:
        body["spec"]["scopes"] = scopes
    return body


def _test_quota(name: str = "test-quota") -> dict[str, Any]:
    """upstream's newTestResourceQuota"""
    return _quota(name, {
        "pods": "5", "services": "10", "services.nodeports": "1", "services.loadbalancers": "1",
        "replicationcontrollers": "10", "resourcequotas": "1", "cpu": "1", "memory": "500Mi", "configmaps": "2",
        "secrets": "10", "persistentvolumeclaims": "10", "requests.storage": "10Gi", "ephemeral-storage": "50Gi",
        "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "10",
        "gold.storageclass.storage.k8s.io/requests.storage": "10Gi",
        "count/replicasets.apps": "5", f"requests.{EXTENDED}": "3"})


def _scoped_quota(name: str, scope: str) -> dict[str, Any]:
    """upstream's newTestResourceQuotaWithScope"""
    hard = {"pods": "5"}
    if scope in ("Terminating", "NotTerminating"):
        hard |= {"requests.cpu": "1", "requests.memory": "500Mi", "limits.cpu": "2", "limits.memory": "1Gi"}
    return _quota(name, hard, [scope])


def _pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeSelector": {"x-test.k8s.io/unsatisfiable": "not-schedulable"},
        "containers": [{"name": "pause", "image": "pause", "resources": {
            "requests": requests or {}, "limits": limits or {}}}], **spec}}


async def _create(api: Rest, path: str, body: dict[str, Any]) -> dict[str, Any]:
    code, made, _ = await api.call("POST", path, body)
    assert code == 201, made
    return dict(made)


async def _delete(api: Rest, path: str) -> None:
    code, body, _ = await api.call("DELETE", path, query={"gracePeriodSeconds": "0"})
    assert code == 200, body


async def _wait_used(api: Rest, name: str, expected: dict[str, str]) -> dict[str, Any]:
    """upstream's waitForResourceQuota: every expected amount in status.used, compared as quantities."""
    async def probe() -> dict[str, Any]:
        return dict((await api.call("GET", f"{NS}/resourcequotas/{name}"))[1])

    def counted(quota: dict[str, Any]) -> bool:
        used = (quota.get("status") or {}).get("used")
        return used is not None and all(
            k in used and parse_quantity(used[k]).value == parse_quantity(v).value for k, v in expected.items())

    result: dict[str, Any] = await until(probe, timeout=30, what=f"quota {name} used {expected}", check=counted)
    return result


async def _refused(api: Rest, path: str, body: dict[str, Any], method: str = "POST") -> str:
    code, status, _ = await api.call(method, path, body)
    assert code == 403 and status["reason"] == "Forbidden", status
    return str(status["message"])


# ---------------------------------------------------------------- the conformance list


async def test_resourcequota_object_count_quota_resourcequotas(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and ensure its status is promptly calculated."""
    quota = await _create(api, f"{NS}/resourcequotas", _test_quota())
    assert "status" not in quota or not quota["status"].get("used")  # the controller's to count
    counted = await _wait_used(api, "test-quota", {"resourcequotas": "1"})
    assert counted["status"]["hard"] == counted["spec"]["hard"]
    assert set(counted["status"]["used"]) == set(counted["spec"]["hard"])


async def test_resourcequota_object_count_quota_service(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a service."""
    await _create(api, f"{NS}/resourcequotas", _test_quota())
    await _wait_used(api, "test-quota", {"resourcequotas": "1", "services": "0"})

    def service(name: str, kind: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"type": kind, "ports": [{"port": 80, "targetPort": 80}]}}

    await _create(api, f"{NS}/services", service("test-service-clusterip", "ClusterIP"))
    await _create(api, f"{NS}/services", service("test-service-np", "NodePort"))
    message = await _refused(api, f"{NS}/services", service("test-service-np2", "NodePort"))
    assert message == ('services "test-service-np2" is forbidden: exceeded quota: test-quota, requested: '
                       'services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1'), message
    await _wait_used(api, "test-quota", {"services": "2", "services.nodeports": "1", "services.loadbalancers": "0"})
    await _delete(api, f"{NS}/services/test-service-clusterip")
    await _delete(api, f"{NS}/services/test-service-np")
    await _wait_used(api, "test-quota", {"services": "0", "services.nodeports": "0"})


async def test_resourcequota_object_count_quota_secret(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a secret."""
    _, existing, _ = await api.call("GET", f"{NS}/secrets")
    default = len(existing["items"])
    await _create(api, f"{NS}/resourcequotas", _test_quota())
    await _wait_used(api, "test-quota", {"resourcequotas": "1", "secrets": str(default)})
    await _create(api, f"{NS}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "test-secret"},
                                         "data": {"data-1": "dmFsdWUtMQo="}})
    await _wait_used(api, "test-quota", {"secrets": str(default + 1)})
    await _delete(api, f"{NS}/secrets/test-secret")
    await _wait_used(api, "test-quota", {"secrets": str(default)})


async def test_resourcequota_object_count_quota_configmap(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a configMap."""
    _, existing, _ = await api.call("GET", f"{NS}/configmaps")
    default = len(existing["items"])
    hard = _test_quota()
    hard["spec"]["hard"]["configmaps"] = str(default + 1)
    await _create(api, f"{NS}/resourcequotas", hard)
    await _wait_used(api, "test-quota", {"resourcequotas": "1", "configmaps": str(default)})
    await _create(api, f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "test-configmap"}, "data": {"a": "b"}})
    await _wait_used(api, "test-quota", {"configmaps": str(default + 1)})
    message = await _refused(api, f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                       "metadata": {"name": "one-too-many"}})
    assert "exceeded quota: test-quota, requested: configmaps=1" in message
    await _delete(api, f"{NS}/configmaps/test-configmap")
    await _wait_used(api, "test-quota", {"configmaps": str(default)})


async def test_resourcequota_object_count_quota_pod(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a pod."""
    await _create(api, f"{NS}/resourcequotas", _test_quota())
    await _wait_used(api, "test-quota", {"resourcequotas": "1", "pods": "0"})
    requests = {"cpu": "500m", "memory": "252Mi", "ephemeral-storage": "30Gi", EXTENDED: "2"}
    await _create(api, f"{NS}/pods", _pod("test-pod", requests, {EXTENDED: "2"}))
    await _wait_used(api, "test-quota", {"pods": "1", "cpu": "500m", "memory": "252Mi",
                                         "ephemeral-storage": "30Gi", f"requests.{EXTENDED}": "2"})
    message = await _refused(api, f"{NS}/pods", _pod("fail-pod", {"cpu": "600m", "memory": "100Mi"}))
    assert message == ('pods "fail-pod" is forbidden: exceeded quota: test-quota, requested: cpu=600m, '
                       'used: cpu=500m, limited: cpu=1'), message
    message = await _refused(api, f"{NS}/pods", _pod("fail-pod-for-extended-resource",
                                                     {"cpu": "100m", "memory": "10Mi", EXTENDED: "2"},
                                                     {EXTENDED: "2"}))
    assert f"requested: requests.{EXTENDED}=2, used: requests.{EXTENDED}=2, limited: requests.{EXTENDED}=3" \
        in message
    # a pod's resources never change by an update (the pod's validation says so)
    code, pod, _ = await api.call("GET", f"{NS}/pods/test-pod")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    code, status, _ = await api.call("PUT", f"{NS}/pods/test-pod", pod)
    assert code == 422, status
    await _wait_used(api, "test-quota", {"pods": "1", "cpu": "500m"})
    await _delete(api, f"{NS}/pods/test-pod")
    await _wait_used(api, "test-quota", {"pods": "0", "cpu": "0", "memory": "0", "ephemeral-storage": "0",
                                         f"requests.{EXTENDED}": "0"})


async def test_resourcequota_object_count_quota_replicationcontroller(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a replication
    controller."""
    await _create(api, f"{NS}/resourcequotas", _test_quota())
    await _wait_used(api, "test-quota", {"replicationcontrollers": "0"})
    await _create(api, f"{NS}/replicationcontrollers", {
        "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "test-rc"},
        "spec": {"replicas": 0, "selector": {"name": "test-rc"}, "template": {
            "metadata": {"labels": {"name": "test-rc"}},
            "spec": {"containers": [{"name": "test-rc", "image": "busybox"}]}}}})
    await _wait_used(api, "test-quota", {"replicationcontrollers": "1"})
    await _delete(api, f"{NS}/replicationcontrollers/test-rc")
    await _wait_used(api, "test-quota", {"replicationcontrollers": "0"})


async def test_resourcequota_object_count_quota_replicaset(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a replica set."""
    await _create(api, f"{NS}/resourcequotas", _test_quota())
    await _wait_used(api, "test-quota", {"count/replicasets.apps": "0"})
    await _create(api, f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "test-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"name": "test-rs"}}, "template": {
            "metadata": {"labels": {"name": "test-rs"}},
            "spec": {"containers": [{"name": "test-rs", "image": "busybox"}]}}}})
    await _wait_used(api, "test-quota", {"count/replicasets.apps": "1"})
    await _delete(api, f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets/test-rs")
    await _wait_used(api, "test-quota", {"count/replicasets.apps": "0"})


async def test_resourcequota_quota_scope_terminating_and_notterminating_scope(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should verify ResourceQuota with terminating scopes."""
    await _create(api, f"{NS}/resourcequotas", _scoped_quota("quota-terminating", "Terminating"))
    await _create(api, f"{NS}/resourcequotas", _scoped_quota("quota-not-terminating", "NotTerminating"))
    zero = {"pods": "0", "requests.cpu": "0", "requests.memory": "0", "limits.cpu": "0", "limits.memory": "0"}
    await _wait_used(api, "quota-terminating", zero)
    await _wait_used(api, "quota-not-terminating", zero)
    requests, limits = {"cpu": "500m", "memory": "200Mi"}, {"cpu": "1", "memory": "400Mi"}
    charged = {"pods": "1", "requests.cpu": "500m", "requests.memory": "200Mi", "limits.cpu": "1",
               "limits.memory": "400Mi"}
    await _create(api, f"{NS}/pods", _pod("test-pod", requests, limits))
    await _wait_used(api, "quota-not-terminating", charged)
    await _wait_used(api, "quota-terminating", zero)
    await _delete(api, f"{NS}/pods/test-pod")
    await _wait_used(api, "quota-not-terminating", zero)
    await _create(api, f"{NS}/pods", _pod("terminating-pod", requests, limits, activeDeadlineSeconds=3600))
    await _wait_used(api, "quota-terminating", charged)
    await _wait_used(api, "quota-not-terminating", zero)
    await _delete(api, f"{NS}/pods/terminating-pod")
    await _wait_used(api, "quota-terminating", zero)


async def test_resourcequota_quota_scope_besteffort_and_notbesteffort_scope(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should verify ResourceQuota with best effort scope."""
    await _create(api, f"{NS}/resourcequotas", _scoped_quota("quota-besteffort", "BestEffort"))
    await _create(api, f"{NS}/resourcequotas", _scoped_quota("quota-not-besteffort", "NotBestEffort"))
    await _wait_used(api, "quota-besteffort", {"pods": "0"})
    await _wait_used(api, "quota-not-besteffort", {"pods": "0"})
    await _create(api, f"{NS}/pods", _pod("test-pod"))
    await _wait_used(api, "quota-besteffort", {"pods": "1"})
    await _wait_used(api, "quota-not-besteffort", {"pods": "0"})
    await _delete(api, f"{NS}/pods/test-pod")
    await _wait_used(api, "quota-besteffort", {"pods": "0"})
    await _create(api, f"{NS}/pods", _pod("burstable-pod", {"cpu": "500m", "memory": "200Mi"},
                                          {"cpu": "1", "memory": "400Mi"}))
    await _wait_used(api, "quota-not-besteffort", {"pods": "1"})
    await _wait_used(api, "quota-besteffort", {"pods": "0"})
    await _delete(api, f"{NS}/pods/burstable-pod")
    await _wait_used(api, "quota-not-besteffort", {"pods": "0"})


async def test_resourcequota_update_and_delete(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should be able to update and delete ResourceQuota."""
    made = await _create(api, f"{NS}/resourcequotas", _quota("test-quota", {"cpu": "1", "memory": "500Mi"}))
    assert made["spec"]["hard"] == {"cpu": "1", "memory": "500Mi"}
    made["spec"]["hard"] = {"cpu": "2", "memory": "1Gi"}
    del made["metadata"]["resourceVersion"]
    code, updated, _ = await api.call("PUT", f"{NS}/resourcequotas/test-quota", made)
    assert code == 200 and updated["spec"]["hard"] == {"cpu": "2", "memory": "1Gi"}, updated
    _, got, _ = await api.call("GET", f"{NS}/resourcequotas/test-quota")
    assert got["spec"]["hard"] == {"cpu": "2", "memory": "1Gi"}
    await _delete(api, f"{NS}/resourcequotas/test-quota")
    code, status, _ = await api.call("GET", f"{NS}/resourcequotas/test-quota")
    assert code == 404 and status["reason"] == "NotFound"


async def test_resourcequota_manage_lifecycle_of_a_resourcequota(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should manage the lifecycle of a ResourceQuota."""
    body = _quota("e2e-quota-x", {"cpu": "1", "memory": "500Mi"})
    body["metadata"]["labels"] = {"e2e-rq-label": "e2e-quota-x"}
    await _create(api, f"{NS}/resourcequotas", body)
    code, listed, _ = await api.call("GET", "/api/v1/resourcequotas", query={"labelSelector": "e2e-rq-label"})
    assert code == 200 and [q["metadata"]["name"] for q in listed["items"]] == ["e2e-quota-x"]
    patch = {"metadata": {"labels": {"e2e-rq-label": "e2e-quota-x", "rq": "patched"}},
             "spec": {"hard": {"memory": "750Mi"}}}
    code, patched, _ = await api.call("PATCH", f"{NS}/resourcequotas/e2e-quota-x", patch, content_type=MERGE)
    assert code == 200 and patched["spec"]["hard"] == {"cpu": "1", "memory": "750Mi"}, patched
    assert patched["metadata"]["labels"]["rq"] == "patched"
    code, _, _ = await api.call("DELETE", f"{NS}/resourcequotas", query={"labelSelector": "e2e-rq-label=e2e-quota-x"})
    assert code == 200
    _, listed, _ = await api.call("GET", f"{NS}/resourcequotas", query={"labelSelector": "e2e-rq-label"})
    assert listed["items"] == []


async def test_resourcequota_apply_changes_to_a_resourcequota_status(api: Rest) -> None:
    """[sig-api-machinery] ResourceQuota should apply changes to a resourcequota status."""
    await _create(api, f"{NS}/resourcequotas", _quota("e2e-rq-status", {"cpu": "500m", "memory": "500Mi"}))
    counted = await _wait_used(api, "e2e-rq-status", {"cpu": "0", "memory": "0"})
    assert counted["status"]["hard"] == {"cpu": "500m", "memory": "500Mi"}
    # the status written by hand is kept as written...
    counted["status"]["hard"] = {"cpu": "1", "memory": "1Gi"}
    code, written, _ = await api.call("PUT", f"{NS}/resourcequotas/e2e-rq-status/status", counted)
    assert code == 200 and written["status"]["hard"] == {"cpu": "1", "memory": "1Gi"}, written
    assert written["spec"]["hard"] == {"cpu": "500m", "memory": "500Mi"}
    # ... until the controller sets it back to the spec's
    await until(lambda: api.call("GET", f"{NS}/resourcequotas/e2e-rq-status"), timeout=30,
                what="status.hard back to spec.hard",
                check=lambda r: r[1]["status"]["hard"] == {"cpu": "500m", "memory": "500Mi"})
    code, patched, _ = await api.call("PATCH", f"{NS}/resourcequotas/e2e-rq-status",
                                      {"spec": {"hard": {"cpu": "1", "memory": "1Gi"}}}, content_type=MERGE)
    assert code == 200
    code, patched, _ = await api.call("PATCH", f"{NS}/resourcequotas/e2e-rq-status/status",
                                      {"status": {"hard": {"cpu": "1", "memory": "1Gi"}},
                                       "spec": {"hard": {"cpu": "7"}}}, content_type=MERGE)
    assert code == 200 and patched["status"]["hard"] == {"cpu": "1", "memory": "1Gi"}, patched
    assert patched["spec"]["hard"] == {"cpu": "1", "memory": "1Gi"}  # /status never changes the spec
    code, got, _ = await api.call("GET", f"{NS}/resourcequotas/e2e-rq-status/status")
    assert code == 200 and got["status"]["hard"] == got["spec"]["hard"]


async def test_limitrange_resources(api: Rest) -> None:
    """[sig-scheduling] LimitRange should create a LimitRange with defaults and ensure pod has those defaults
    applied."""
    limit_range: dict[str, Any] = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {
        "name": "limit-range", "labels": {"time": "lr"}}, "spec": {"limits": [{
            "type": "Container", "min": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "214748364800m"},
            "max": {"cpu": "500m", "memory": "500Mi", "ephemeral-storage": "1Gi"},
            "defaultRequest": {"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "200Gi"},
            "default": {"cpu": "300m", "memory": "300Mi", "ephemeral-storage": "300Gi"},
            "maxLimitRequestRatio": {"cpu": "4"}}]}}
    code, status, _ = await api.call("POST", f"{NS}/limitranges", limit_range)
    assert code == 422, status  # the ephemeral-storage bounds contradict each other
    assert "spec.limits[0][ephemeral-storage].default" in status["message"], status["message"]
    limit_range["spec"]["limits"][0] |= {
        "min": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "100Gi"},
        "max": {"cpu": "500m", "memory": "500Mi", "ephemeral-storage": "500Gi"}}
    made = await _create(api, f"{NS}/limitranges", limit_range)
    item = made["spec"]["limits"][0]
    assert item["default"] == {"cpu": "300m", "memory": "300Mi", "ephemeral-storage": "300Gi"}
    assert item["defaultRequest"] == {"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "200Gi"}

    # a pod with no resources gets the defaults, noted in its annotation
    pod = await _create(api, f"{NS}/pods", _pod("pod-no-resources"))
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "200m", "memory": "200Mi", "ephemeral-storage": "200Gi"}
    assert resources["limits"] == {"cpu": "300m", "memory": "300Mi", "ephemeral-storage": "300Gi"}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, ephemeral-storage, memory request for container pause; "
        "cpu, ephemeral-storage, memory limit for container pause")
    # a pod with partial resources keeps its own and gets the rest
    pod = await _create(api, f"{NS}/pods", _pod("pod-partial-resources", {"cpu": "300m"}, {"cpu": "300m"}))
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "300m" and resources["requests"]["memory"] == "200Mi"
    assert resources["limits"]["cpu"] == "300m" and resources["limits"]["memory"] == "300Mi"
    # out of bounds: refused
    message = await _refused(api, f"{NS}/pods", _pod("pod-min", {"cpu": "50m", "memory": "100Mi"}, {"cpu": "100m"}))
    assert message == 'pods "pod-min" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'
    message = await _refused(api, f"{NS}/pods", _pod("pod-max", {"cpu": "600m", "memory": "100Mi"},
                                                     {"cpu": "600m"}))
    assert message == 'pods "pod-max" is forbidden: maximum cpu usage per Container is 500m, but limit is 600m', \
        message
    message = await _refused(api, f"{NS}/pods", _pod("pod-ratio", {"cpu": "100m"}, {"cpu": "500m"}))
    assert message == ('pods "pod-ratio" is forbidden: cpu max limit to request ratio per Container is 4, but '
                       'provided ratio is 5.000000'), message
    # the range changed: what it allows changes with it
    limit_range = (await api.call("GET", f"{NS}/limitranges/limit-range"))[1]
    limit_range["spec"]["limits"][0]["min"] = {"cpu": "100m", "memory": "50Mi", "ephemeral-storage": "50Gi"}
    limit_range["spec"]["limits"][0]["defaultRequest"] = {"cpu": "200m", "memory": "80Mi",
                                                          "ephemeral-storage": "80Gi"}
    code, updated, _ = await api.call("PUT", f"{NS}/limitranges/limit-range", limit_range)
    assert code == 200, updated
    # the plugin reads ranges from the watch cache: the update reaches it a moment later
    code, pod, _ = await until(lambda: api.call("POST", f"{NS}/pods", _pod("pod-after-update", {
        "cpu": "200m", "memory": "60Mi"})), timeout=10, what="a pod the updated range allows",
        check=lambda r: r[0] == 201)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == "300Mi"
    await _delete(api, f"{NS}/limitranges/limit-range")
    await until(lambda: api.call("POST", f"{NS}/pods", _pod("pod-after-delete", {"cpu": "50m", "memory": "1Mi"})),
                timeout=10, what="a pod no range bounds", check=lambda r: r[0] == 201)


async def test_limitrange_list_patch_and_delete_a_limitrange_by_collection(api: Rest) -> None:
    """[sig-scheduling] LimitRange should list, patch and delete a LimitRange by collection."""
    for name in ("e2e-limitrange-a", "e2e-limitrange-b"):
        await _create(api, f"{NS}/limitranges", {
            "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "labels": {"e2e-test": "lr"}},
            "spec": {"limits": [{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "500m"}}]}})
    code, listed, _ = await api.call("GET", "/api/v1/limitranges", query={"labelSelector": "e2e-test=lr"})
    assert code == 200 and len(listed["items"]) == 2
    code, patched, _ = await api.call("PATCH", f"{NS}/limitranges/e2e-limitrange-a", {
        "metadata": {"labels": {"e2e-test": "lr", "patched": "true"}},
        "spec": {"limits": [{"type": "Container", "min": {"cpu": "200m"}, "max": {"cpu": "500m"}}]}},
        content_type=MERGE)
    assert code == 200 and patched["spec"]["limits"][0]["min"] == {"cpu": "200m"}, patched
    code, _, _ = await api.call("DELETE", f"{NS}/limitranges", query={"labelSelector": "e2e-test=lr"})
    assert code == 200
    _, listed, _ = await api.call("GET", f"{NS}/limitranges")
    assert listed["items"] == []


# ---------------------------------------------------------------- beyond the list


async def test_quota_validation_messages(api: Rest) -> None:
    code, status, _ = await api.call("POST", f"{NS}/resourcequotas", _quota("bad", {"pods": "-1", "foo": "1",
                                                                                      "services": "1.5"}))
    assert code == 422, status
    message = status["message"]
    assert 'spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0' in message
    assert 'spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota' in message
    assert 'spec.hard[services]: Invalid value: "1500m": must be an integer' in message  # stored form, as upstream
    code, status, _ = await api.call("POST", f"{NS}/resourcequotas",
                                     _quota("scoped", {"cpu": "1"}, ["BestEffort", "NotBestEffort"]))
    assert code == 422 and "unsupported scope applied to resource" in status["message"], status
    assert "conflicting scopes" in status["message"]
    made = await _create(api, f"{NS}/resourcequotas", _quota("fixed", {"pods": "1"}, ["BestEffort"]))
    made["spec"]["scopes"] = ["NotBestEffort"]
    code, status, _ = await api.call("PUT", f"{NS}/resourcequotas/fixed", made)
    assert code == 422 and "spec.scopes: Invalid value" in status["message"] and "field is immutable" in \
        status["message"], status
    code, status, _ = await api.call("POST", f"{NS}/limitranges", {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bad"}, "spec": {"limits": [
            {"type": "Pod", "default": {"cpu": "1"}}, {"type": "Pod"}]}})
    assert code == 422, status
    assert "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'" in status["message"]
    assert 'spec.limits[1].type: Duplicate value: "Pod"' in status["message"]


async def test_quota_on_compute_resources_needs_them_specified(api: Rest) -> None:
    """A quota of cpu and memory makes every container say how much it asks (upstream's
    "must specify"), and a quota not counted yet refuses nothing."""
    await _create(api, f"{NS}/resourcequotas", _quota("compute", {"requests.cpu": "1", "limits.memory": "1Gi"}))
    await _wait_used(api, "compute", {"requests.cpu": "0"})
    message = await _refused(api, f"{NS}/pods", _pod("unspecified", {"memory": "10Mi"}))
    assert message == ('pods "unspecified" is forbidden: failed quota: compute: must specify limits.memory for: '
                       'pause; requests.cpu for: pause'), message


async def test_quota_priority_class_scope_selector(api: Rest) -> None:
    """A scopeSelector on PriorityClass counts only the pods of the classes it names."""
    for name, value in (("high", 1000), ("low", 10)):
        await _create(api, "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value})
    await _create(api, f"{NS}/resourcequotas", _quota("high-only", {"pods": "1"}, scopeSelector={
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}))
    await _wait_used(api, "high-only", {"pods": "0"})
    await _create(api, f"{NS}/pods", _pod("high-1", priorityClassName="high"))
    await _create(api, f"{NS}/pods", _pod("low-1", priorityClassName="low"))
    await _create(api, f"{NS}/pods", _pod("low-2", priorityClassName="low"))
    message = await _refused(api, f"{NS}/pods", _pod("high-2", priorityClassName="high"))
    assert "exceeded quota: high-only, requested: pods=1, used: pods=1, limited: pods=1" in message
    await _wait_used(api, "high-only", {"pods": "1"})


async def test_quota_counts_custom_resources(api: Rest) -> None:
    """count/<plural>.<group> of a custom resource (upstream's quota integration test)."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "foos.quota.example.com"}, "spec": {
               "group": "quota.example.com", "scope": "Namespaced",
               "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
               "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                   "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    await _create(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    path = f"/apis/quota.example.com/v1/namespaces/{NAMESPACE}/foos"
    await until(lambda: api.call("GET", path), timeout=20, what="foos served", check=lambda r: r[0] == 200)
    await _create(api, f"{NS}/resourcequotas", _quota("foos", {"count/foos.quota.example.com": "2"}))
    await _wait_used(api, "foos", {"count/foos.quota.example.com": "0"})
    for i in range(2):
        await _create(api, path, {"apiVersion": "quota.example.com/v1", "kind": "Foo", "metadata": {"name": f"f{i}"}})
    message = await _refused(api, path, {"apiVersion": "quota.example.com/v1", "kind": "Foo",
                                         "metadata": {"name": "f2"}})
    assert message == ('foos.quota.example.com "f2" is forbidden: exceeded quota: foos, requested: '
                       'count/foos.quota.example.com=1, used: count/foos.quota.example.com=2, '
                       'limited: count/foos.quota.example.com=2'), message
    await _delete(api, f"{path}/f0")
    await _wait_used(api, "foos", {"count/foos.quota.example.com": "1"})
    await _create(api, path, {"apiVersion": "quota.example.com/v1", "kind": "Foo", "metadata": {"name": "f2"}})


async def test_quota_concurrent_creates_never_pass_the_limit(api: Rest) -> None:
    """Twenty creates at once against the last five units: exactly five pass."""
    await _create(api, f"{NS}/resourcequotas", _quota("five", {"configmaps": "5"}))
    await _wait_used(api, "five", {"configmaps": "0"})

    async def make(i: int) -> int:
        code, _, _ = await api.call("POST", f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                                 "metadata": {"name": f"cm-{i}"}})
        return code

    codes = await asyncio.gather(*(make(i) for i in range(20)))
    assert sorted(codes).count(201) == 5 and sorted(codes).count(403) == 15, codes
    await _wait_used(api, "five", {"configmaps": "5"})


async def test_kubectl_create_quota_and_describe(api: Rest, rest: APIServer, tmp_path: Path) -> None:
    """`kubectl create quota`, `kubectl get quota` and `kubectl describe quota`, as the
    documentation's "Configure Memory and CPU Quotas for a Namespace" does."""
    kubectl = _kubectl(rest, tmp_path)
    _, out, _ = await kubectl("-n", NAMESPACE, "create", "quota", "mem-cpu-demo",
                              "--hard=requests.cpu=1,requests.memory=1Gi,limits.cpu=2,limits.memory=2Gi,pods=2")
    assert "resourcequota/mem-cpu-demo created" in out
    await _wait_used(api, "mem-cpu-demo", {"pods": "0"})
    await _create(api, f"{NS}/pods", _pod("quota-mem-cpu-demo", {"cpu": "400m", "memory": "600Mi"},
                                          {"cpu": "800m", "memory": "800Mi"}))
    await _wait_used(api, "mem-cpu-demo", {"pods": "1", "requests.memory": "600Mi"})
    _, out, _ = await kubectl("-n", NAMESPACE, "get", "quota", "mem-cpu-demo")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "AGE", "REQUEST", "LIMIT"], out
    assert "pods: 1/2, requests.cpu: 400m/1, requests.memory: 600Mi/1Gi" in row, row
    assert "limits.cpu: 800m/2, limits.memory: 800Mi/2Gi" in row, row
    _, out, _ = await kubectl("-n", NAMESPACE, "describe", "quota", "mem-cpu-demo")
    assert ["requests.memory", "600Mi", "1Gi"] in [line.split() for line in out.splitlines()], out
    _, out, _ = await kubectl("-n", NAMESPACE, "get", "quota", "mem-cpu-demo", "-o", "json")
    assert json.loads(out)["status"]["used"]["pods"] == "1"

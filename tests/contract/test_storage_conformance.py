"""The storage API's conformance tests (sig-storage, test/e2e/storage), mirrored over the REST
API as upstream's client-go calls make them: create, get, list by label, strategic-merge
patch, update, status reads and writes, delete and deletecollection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from controllers.manager import ControllerManager
from kubeling.client import Client
from tests.contract.test_crds import Rest
from tests.wait import until

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
PV, PVC = "/api/v1/persistentvolumes", "/api/v1/namespaces/default/persistentvolumeclaims"
STORAGE = "/apis/storage.k8s.io/v1"


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


@pytest.fixture
async def binder(rest: APIServer) -> AsyncIterator[ControllerManager]:
    """The controller manager on the REST-serving apiserver (the binder binds what the tests make)."""
    from controllers.manager import ManagerConfig
    made = ControllerManager(Client(rest.address), ManagerConfig(leader_elect=False))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


async def ok(http: Rest, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
             query: dict[str, str] | None = None, want: int = 200) -> Any:
    status, answer, _ = await http.call(method, path, body, content_type=content_type, query=query)
    assert status in (want, 201 if want == 200 else want), (method, path, status, answer)
    return answer


async def items(http: Rest, path: str, selector: str = "") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await ok(http, "GET", path, query={"labelSelector": selector} if selector
                                            else None))["items"]
    return found


def _pv(name: str, labels: dict[str, str], driver: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels},
            "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "e2e",
                     "persistentVolumeReclaimPolicy": "Retain",
                     "csi": {"driver": driver, "volumeHandle": "e2e-conformance"}}}


def _pvc(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "e2e",
                     "resources": {"requests": {"storage": "1Gi"}}}}


async def _pv_and_pvc(http: Rest, suffix: str, labels: dict[str, str]) -> tuple[str, str]:
    await ok(http, "POST", PV, _pv(f"e2e-pv-{suffix}", labels, "inline-driver.example.com"))
    await ok(http, "POST", PVC, _pvc(f"pvc-{suffix}"))
    return f"e2e-pv-{suffix}", f"pvc-{suffix}"


async def update(http: Rest, path: str, change: Any) -> Any:
    """GET, change, PUT, again on a conflict (upstream's retry.RetryOnConflict): the binder
    writes the same objects meanwhile."""
    for _ in range(10):
        current = await ok(http, "GET", path)
        change(current)
        status, answer, _ = await http.call("PUT", path, current)
        if status != 409:
            assert status == 200, (path, status, answer)
            return answer
    raise AssertionError(f"PUT {path}: conflicts ten times over")


async def _gone(http: Rest, path: str, selector: str = "") -> None:
    await until(lambda: items(http, path, selector), f"nothing left at {path}?{selector}",
                check=lambda found: not found)


async def test_persistentvolumes_claims_lifecycle(http: Rest, binder: ControllerManager) -> None:
    """PersistentVolumes(Claims), lifecycle — '[sig-storage] PersistentVolumes CSI Conformance
    should run through the lifecycle of a PV and a PVC'."""
    pool = {"e2e-pv-pool": "lifecycle"}
    pv, pvc = await _pv_and_pvc(http, "a", pool)
    [listed_pv] = await items(http, PV, "e2e-pv-pool=lifecycle")
    [listed_pvc] = await items(http, PVC)
    patched_pv = await ok(http, "PATCH", f"{PV}/{pv}", {"metadata": {"labels": {pv: "patched"}}},
                          content_type=STRATEGIC)
    assert patched_pv["metadata"]["labels"][pv] == "patched"
    assert int(patched_pv["metadata"]["resourceVersion"]) > int(listed_pv["metadata"]["resourceVersion"])
    patched_pvc = await ok(http, "PATCH", f"{PVC}/{pvc}", {"metadata": {"labels": {pvc: "patched"}}},
                           content_type=STRATEGIC)
    assert patched_pvc["metadata"]["labels"][pvc] == "patched"
    assert (await ok(http, "GET", f"{PV}/{pv}"))["metadata"]["uid"] == patched_pv["metadata"]["uid"]
    assert (await ok(http, "GET", f"{PVC}/{pvc}"))["metadata"]["uid"] == listed_pvc["metadata"]["uid"]
    await ok(http, "DELETE", f"{PVC}/{pvc}")
    await _gone(http, PVC)
    await ok(http, "DELETE", f"{PV}/{pv}")
    await _gone(http, PV, "e2e-pv-pool=lifecycle")

    pv, pvc = await _pv_and_pvc(http, "b", pool)
    updated = await update(http, f"{PV}/{pv}", lambda o: o["metadata"]["labels"].update({pv: "updated"}))
    assert updated["metadata"]["labels"][pv] == "updated"
    updated = await update(http, f"{PVC}/{pvc}", lambda o: o["metadata"].update(labels={pvc: "updated"}))
    assert updated["metadata"]["labels"] == {pvc: "updated"}
    assert len(await items(http, "/api/v1/persistentvolumeclaims", f"{pvc}=updated")) == 1
    await ok(http, "DELETE", PVC, query={"labelSelector": f"{pvc}=updated"})
    await _gone(http, PVC, f"{pvc}=updated")
    await ok(http, "DELETE", PV, query={"labelSelector": f"{pv}=updated"})
    await _gone(http, PV, f"{pv}=updated")


async def test_persistentvolumes_claims_apply_changes_to_a_pv_pvc_status(http: Rest,
                                                                         binder: ControllerManager) -> None:
    """PersistentVolumes(Claims), apply changes to a pv/pvc status — '[sig-storage]
    PersistentVolumes CSI Conformance should apply changes to a pv/pvc status'."""
    pv, pvc = await _pv_and_pvc(http, "s", {"e2e-pv-pool": "status"})
    claim = await ok(http, "GET", f"{PVC}/{pvc}/status")
    assert claim["status"]["phase"] in ("Pending", "Bound")
    volume = await ok(http, "GET", f"{PV}/{pv}/status")
    assert volume["status"]["phase"] in ("Available", "Bound", "Pending")
    patched = await ok(http, "PATCH", f"{PVC}/{pvc}/status", {"status": {"conditions": [
        {"type": "StatusPatched", "status": "True", "reason": "E2E patchedStatus", "message": "Set from e2e test"}]}},
        content_type=MERGE)
    assert [c["type"] for c in patched["status"]["conditions"]] == ["StatusPatched"]
    patched = await ok(http, "PATCH", f"{PV}/{pv}/status", {"status": {"message": "StatusPatched",
                                                                        "reason": "E2E patchStatus"}},
                       content_type=MERGE)
    assert (patched["status"]["message"], patched["status"]["reason"]) == ("StatusPatched", "E2E patchStatus")
    condition = {"type": "StatusUpdated", "status": "True", "reason": "E2E updateStatus",
                 "message": "Set from e2e test"}
    updated = await update(http, f"{PVC}/{pvc}/status", lambda o: o["status"].update(conditions=[condition]))
    assert [c["type"] for c in updated["status"]["conditions"]] == ["StatusUpdated"]
    updated = await update(http, f"{PV}/{pv}/status",
                           lambda o: o["status"].update(message="StatusUpdated", reason="E2E updateStatus"))
    assert (updated["status"]["message"], updated["status"]["reason"]) == ("StatusUpdated", "E2E updateStatus")


async def _lifecycle(http: Rest, path: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    """Create, get, patch (label found), list by label, delete and confirm; a replacement
    updated (label found), deleted by collection and confirmed: the shape of the
    StorageClass, CSIDriver, CSINode and VolumeAttachment lifecycle tests."""
    name = first["metadata"]["name"]
    await ok(http, "POST", path, first)
    assert (await ok(http, "GET", f"{path}/{name}"))["metadata"]["name"] == name
    patched = await ok(http, "PATCH", f"{path}/{name}", {"metadata": {"labels": {"e2e-patched": "true"}}},
                       content_type=STRATEGIC)
    assert patched["metadata"]["labels"]["e2e-patched"] == "true"
    assert [i["metadata"]["name"] for i in await items(http, path, "e2e-patched=true")] == [name]
    await ok(http, "DELETE", f"{path}/{name}")
    status, _, _ = await http.call("GET", f"{path}/{name}")
    assert status == 404
    other = second["metadata"]["name"]
    await ok(http, "POST", path, second)
    current = await ok(http, "GET", f"{path}/{other}")
    current["metadata"].setdefault("labels", {})["e2e-updated"] = "true"
    assert (await ok(http, "PUT", f"{path}/{other}", current))["metadata"]["labels"]["e2e-updated"] == "true"
    await ok(http, "DELETE", path, query={"labelSelector": "e2e-updated=true"})
    await _gone(http, path, "e2e-updated=true")


def _named(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": kind, "metadata": {"name": name}, **fields}


async def test_storageclass_lifecycle(http: Rest) -> None:
    """StorageClass, lifecycle — '[sig-storage] StorageClasses CSI Conformance should run
    through the lifecycle of a StorageClass'."""
    await _lifecycle(http, f"{STORAGE}/storageclasses", _named("StorageClass", "e2e-sc", provisioner="e2e-fake"),
                     _named("StorageClass", "e2e-sc-2", provisioner="e2e-fake"))


async def test_csidriver_lifecycle(http: Rest) -> None:
    """CSIDriver, lifecycle — '[sig-storage] CSIInlineVolumes should run through the
    lifecycle of a CSIDriver'."""
    spec = {"spec": {"volumeLifecycleModes": ["Persistent", "Ephemeral"]}}
    await _lifecycle(http, f"{STORAGE}/csidrivers", _named("CSIDriver", "inline-driver-1.example.com", **spec),
                     _named("CSIDriver", "inline-driver-2.example.com", **spec))


async def test_csinode_lifecycle(http: Rest) -> None:
    """CSINode, lifecycle — '[sig-storage] CSINodes CSI Conformance should run through the
    lifecycle of a csinode'."""
    await _lifecycle(http, f"{STORAGE}/csinodes", _named("CSINode", "e2e-csinode-1", spec={"drivers": []}),
                     _named("CSINode", "e2e-csinode-2", spec={"drivers": []}))


def _attachment(name: str) -> dict[str, Any]:
    return _named("VolumeAttachment", name, spec={"attacher": "e2e-test.storage.k8s.io", "nodeName": "e2e-node",
                                                  "source": {"persistentVolumeName": f"pv-{name}"}})


async def test_volumeattachment_lifecycle(http: Rest) -> None:
    """VolumeAttachment, lifecycle — '[sig-storage] VolumeAttachment Conformance should run
    through the lifecycle of a VolumeAttachment'."""
    await _lifecycle(http, f"{STORAGE}/volumeattachments", _attachment("va-e2e-1"), _attachment("va-e2e-2"))


async def test_volumeattachment_apply_changes_to_a_volumeattachment_status(http: Rest) -> None:
    """VolumeAttachment, apply changes to a volumeattachment status — '[sig-storage]
    VolumeAttachment Conformance should apply changes to a volumeattachment status'."""
    path = f"{STORAGE}/volumeattachments"
    await ok(http, "POST", path, _attachment("va-status"))
    patched = await ok(http, "PATCH", f"{path}/va-status", {"metadata": {"labels": {"va-status": "patched"}}},
                       content_type=STRATEGIC)
    assert patched["metadata"]["labels"]["va-status"] == "patched"
    assert not (await ok(http, "GET", f"{path}/va-status/status")).get("status", {}).get("attached", False)
    patched = await ok(http, "PATCH", f"{path}/va-status/status", {"status": {"attached": True}},
                       content_type=MERGE)
    assert patched["status"]["attached"] is True
    current = await ok(http, "GET", f"{path}/va-status/status")
    current["status"]["attached"] = False
    assert not (await ok(http, "PUT", f"{path}/va-status/status", current)).get("status", {}).get("attached", False)
    await ok(http, "DELETE", f"{path}/va-status")
    status, _, _ = await http.call("GET", f"{path}/va-status")
    assert status == 404


async def test_csistoragecapacity_api(http: Rest) -> None:
    """CSIStorageCapacity API — '[sig-storage] CSIStorageCapacity should support
    CSIStorageCapacities API operations'."""
    groups = await ok(http, "GET", "/apis")
    assert any(g["name"] == "storage.k8s.io" for g in groups["groups"])
    resources = await ok(http, "GET", STORAGE)
    entry = next(r for r in resources["resources"] if r["name"] == "csistoragecapacities")
    assert set(entry["verbs"]) >= {"create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"}
    path = f"{STORAGE}/namespaces/default/csistoragecapacities"

    def capacity(name: str) -> dict[str, Any]:
        return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                "metadata": {"name": name, "labels": {"test": "csistoragecapacity"}},
                "storageClassName": "e2e", "capacity": "1Gi"}
    for name in ("cap-1", "cap-2", "cap-3"):
        await ok(http, "POST", path, capacity(name))
    assert len(await items(http, path, "test=csistoragecapacity")) == 3
    assert len(await items(http, f"{STORAGE}/csistoragecapacities", "test=csistoragecapacity")) == 3
    watched = await ok(http, "GET", path, query={"watch": "true", "labelSelector": "test=csistoragecapacity",
                                                  "timeoutSeconds": "1"})
    assert "cap-1" in str(watched)
    patched = await ok(http, "PATCH", f"{path}/cap-1", {"metadata": {"annotations": {"patched": "true"}}},
                       content_type=MERGE)
    assert patched["metadata"]["annotations"]["patched"] == "true"
    current = await ok(http, "GET", f"{path}/cap-1")
    current["metadata"]["annotations"]["updated"] = "true"
    assert (await ok(http, "PUT", f"{path}/cap-1", current))["metadata"]["annotations"]["updated"] == "true"
    await ok(http, "DELETE", f"{path}/cap-1")
    status, _, _ = await http.call("GET", f"{path}/cap-1")
    assert status == 404
    await ok(http, "DELETE", path, query={"labelSelector": "test=csistoragecapacity"})
    await _gone(http, path, "test=csistoragecapacity")

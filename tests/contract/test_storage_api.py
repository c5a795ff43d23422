"""The storage API against its contract (issue 36): PersistentVolumes, claims and the
storage.k8s.io kinds with upstream's defaults, validation messages and immutable fields;
the DefaultStorageClass, StorageObjectInUseProtection and PersistentVolumeClaimResize
admission plugins; the columns `kubectl get pv,pvc,sc` shows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Client]:
    async with Client(rest.address) as c:
        yield c


def pv(name: str, size: str = "1Gi", **spec: Any) -> core_pb2.PersistentVolume:
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    spec.setdefault("hostPath", core_pb2.HostPathVolumeSource(path=f"/tmp/{name}"))
    return core_pb2.PersistentVolume(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PersistentVolumeSpec(
        capacity={"storage": size} if size else {}, **spec))


def pvc(name: str, size: str = "1Gi", **spec: Any) -> core_pb2.PersistentVolumeClaim:
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    return core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            resources=core_pb2.VolumeResourceRequirements(requests={"storage": size} if size else {}), **spec))


def storage_class(name: str, default: bool = False, **fields: Any) -> storage_pb2.StorageClass:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    fields.setdefault("provisioner", "hostpath.csi.kubeling.io")
    return storage_pb2.StorageClass(metadata=meta_pb2.ObjectMeta(name=name, annotations=annotations), **fields)


async def invalid(call: Any) -> str:
    with pytest.raises(errors.Invalid) as err:
        await call
    return err.value.message


async def test_persistent_volume_defaults_validation_and_immutable_source(api: Client) -> None:
    made = await api.persistentvolumes.create(pv("pv1", "1024Mi"))
    assert made.spec.persistentVolumeReclaimPolicy == "Retain" and made.spec.volumeMode == "Filesystem"
    assert made.status.phase == "Pending" and made.status.lastPhaseTransitionTime.seconds > 0
    assert made.spec.capacity["storage"] == "1Gi"  # canonical
    assert list(made.metadata.finalizers) == ["kubernetes.io/pv-protection"]

    message = await invalid(api.persistentvolumes.create(pv("bad", "", accessModes=[])))
    assert "spec.accessModes: Required value" in message and "spec.capacity: Required value" in message
    message = await invalid(api.persistentvolumes.create(pv("bad", accessModes=["ReadWriteOncePod", "ReadWriteOnce"],
                                                            persistentVolumeReclaimPolicy="Sometimes")))
    assert "may not use ReadWriteOncePod with other access modes" in message
    assert "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Sometimes\"" in message
    nothing = pv("bad")
    nothing.spec.ClearField("hostPath")
    assert "spec: Required value: must specify a volume type" in await invalid(api.persistentvolumes.create(nothing))
    two = pv("bad", csi=core_pb2.CSIPersistentVolumeSource(driver="d.example.com", volumeHandle="h"))
    assert "spec.csi: Forbidden: may not specify more than 1 volume type" in await invalid(
        api.persistentvolumes.create(two))
    local = pv("bad", local=core_pb2.LocalVolumeSource(path="/mnt/disk"))
    local.spec.ClearField("hostPath")
    assert "spec.nodeAffinity: Required value: Local volume requires node affinity" in await invalid(
        api.persistentvolumes.create(local))
    assert "must be greater than zero" in await invalid(api.persistentvolumes.create(pv("bad", "0")))

    made.spec.hostPath.path = "/elsewhere"
    message = await invalid(api.persistentvolumes.update(made))
    assert "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation" in message
    fresh = await api.persistentvolumes.get("pv1")
    fresh.spec.capacity["storage"] = "2Gi"  # capacity may change (a volume grown)
    assert (await api.persistentvolumes.update(fresh)).spec.capacity["storage"] == "2Gi"


async def test_claim_defaults_validation_and_the_default_class(api: Client) -> None:
    plain = await api.persistentvolumeclaims.create(pvc("before-any-class"))
    assert not plain.spec.HasField("storageClassName")  # no default class yet: stays unset
    assert plain.status.phase == "Pending" and plain.spec.volumeMode == "Filesystem"
    assert list(plain.metadata.finalizers) == ["kubernetes.io/pvc-protection"]

    await api.storageclasses.create(storage_class("old-default", default=True))
    await api.storageclasses.create(storage_class("standard", default=True))  # the newest default wins
    await api.storageclasses.create(storage_class("other"))
    claimed = await api.persistentvolumeclaims.create(pvc("c1"))
    assert claimed.spec.storageClassName in ("standard", "old-default")
    none = await api.persistentvolumeclaims.create(pvc("c2", storageClassName=""))
    assert none.spec.HasField("storageClassName") and none.spec.storageClassName == ""
    chosen = await api.persistentvolumeclaims.create(pvc("c3", storageClassName="other"))
    assert chosen.spec.storageClassName == "other"

    message = await invalid(api.persistentvolumeclaims.create(pvc("bad", "", accessModes=[])))
    assert "spec.accessModes: Required value: at least 1 access mode is required" in message
    assert "spec.resources[storage]: Required value" in message
    assert "spec.resources[storage]: Invalid value: \"-1Gi\"" in await invalid(
        api.persistentvolumeclaims.create(pvc("bad", "-1Gi")))
    assert "spec.volumeMode: Unsupported value" in await invalid(
        api.persistentvolumeclaims.create(pvc("bad", volumeMode="Tape")))

    chosen.spec.accessModes[:] = ["ReadWriteMany"]
    assert "spec: Forbidden: spec is immutable after creation except resources.requests and " \
           "volumeAttributesClassName for bound claims" in await invalid(api.persistentvolumeclaims.update(chosen))
    chosen = await api.persistentvolumeclaims.get("c3", "default")
    chosen.spec.volumeName = "pv-x"  # the binder may set it once
    assert (await api.persistentvolumeclaims.update(chosen)).spec.volumeName == "pv-x"


async def test_claim_resize_needs_a_class_that_allows_it(api: Client) -> None:
    await api.storageclasses.create(storage_class("fixed"))
    await api.storageclasses.create(storage_class("growing", allowVolumeExpansion=True))
    for cls in ("fixed", "growing"):
        await api.persistentvolumeclaims.create(pvc(f"on-{cls}", storageClassName=cls))
        claim = await api.persistentvolumeclaims.get(f"on-{cls}", "default")
        claim.status.phase = "Bound"
        claim.status.capacity["storage"] = "1Gi"
        await api.persistentvolumeclaims.update_status(claim)
    fixed = await api.persistentvolumeclaims.get("on-fixed", "default")
    fixed.spec.resources.requests["storage"] = "2Gi"
    with pytest.raises(errors.Forbidden) as err:
        await api.persistentvolumeclaims.update(fixed)
    assert "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must " \
           "support resize" in err.value.message
    growing = await api.persistentvolumeclaims.get("on-growing", "default")
    growing.spec.resources.requests["storage"] = "2Gi"
    assert (await api.persistentvolumeclaims.update(growing)).spec.resources.requests["storage"] == "2Gi"
    growing.spec.resources.requests["storage"] = "512Mi"
    growing = await api.persistentvolumeclaims.get("on-growing", "default")
    growing.spec.resources.requests["storage"] = "512Mi"
    assert "field can not be less than previous value" in await invalid(api.persistentvolumeclaims.update(growing))


async def test_storage_class_defaults_and_immutable_fields(api: Client) -> None:
    sc = await api.storageclasses.create(storage_class("fast", parameters={"tier": "1"}))
    assert (sc.reclaimPolicy, sc.volumeBindingMode) == ("Delete", "Immediate")
    sc.provisioner = "other.example.com"
    sc.parameters["tier"] = "2"
    message = await invalid(api.storageclasses.update(sc))
    assert "provisioner: Forbidden: updates to provisioner are forbidden." in message
    assert "parameters: Forbidden: updates to parameters are forbidden." in message
    assert "provisioner: Required value" in await invalid(api.storageclasses.create(storage_class("x", provisioner="")))
    assert "volumeBindingMode: Unsupported value: \"Later\"" in await invalid(
        api.storageclasses.create(storage_class("x", volumeBindingMode="Later")))


async def test_csi_kinds(api: Client) -> None:
    driver = await api.csidrivers.create(storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="hostpath.csi.x.io"),
                                                               spec=storage_pb2.CSIDriverSpec(attachRequired=False)))
    spec = driver.spec
    assert (spec.attachRequired, spec.podInfoOnMount, spec.fsGroupPolicy, list(spec.volumeLifecycleModes)) == \
        (False, False, "ReadWriteOnceWithFSType", ["Persistent"])
    driver.spec.attachRequired = True
    assert "spec.attachRequired: Invalid value: true: field is immutable" in await invalid(
        api.csidrivers.update(driver))
    node = storage_pb2.CSINode(metadata=meta_pb2.ObjectMeta(name="node-a"), spec=storage_pb2.CSINodeSpec(drivers=[
        storage_pb2.CSINodeDriver(name="hostpath.csi.x.io", nodeID="node-a", topologyKeys=["topology.x.io/node"]),
        storage_pb2.CSINodeDriver(name="hostpath.csi.x.io", nodeID="")]))
    message = await invalid(api.csinodes.create(node))
    assert "spec.drivers[1].name: Duplicate value" in message and "spec.drivers[1].nodeID: Required value" in message
    attachment = storage_pb2.VolumeAttachment(
        metadata=meta_pb2.ObjectMeta(name="va"),
        spec=storage_pb2.VolumeAttachmentSpec(attacher="hostpath.csi.x.io", nodeName="node-a"))
    assert "must specify exactly one of inlineVolumeSpec and persistentVolumeName" in await invalid(
        api.volumeattachments.create(attachment))
    attachment.spec.source.persistentVolumeName = "pv1"
    made = await api.volumeattachments.create(attachment)
    made.spec.nodeName = "node-b"
    assert "spec: Invalid value" in await invalid(api.volumeattachments.update(made))
    capacity = storage_pb2.CSIStorageCapacity(metadata=meta_pb2.ObjectMeta(name="cap", namespace="default"),
                                              storageClassName="standard", capacity="10Gi")
    assert (await api.csistoragecapacities.create(capacity)).capacity == "10Gi"


async def test_kubectl_columns(api: Client, rest: APIServer) -> None:
    await api.storageclasses.create(storage_class("standard", default=True,
                                                  volumeBindingMode="WaitForFirstConsumer"))
    await api.persistentvolumes.create(pv("pv-table", "5Gi", accessModes=["ReadWriteOnce", "ReadOnlyMany"],
                                          storageClassName="standard"))
    await api.persistentvolumeclaims.create(pvc("claim-table"))
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    base = f"http://{rest.rest_address}"
    async with aiohttp.ClientSession() as http:
        async def rows(path: str) -> tuple[list[str], list[list[Any]]]:
            async with http.get(base + path, headers=accept) as r:
                assert r.status == 200, await r.text()
                t = await r.json()
            return [c["name"] for c in t["columnDefinitions"]], [row["cells"] for row in t["rows"]]

        names, cells = await rows("/api/v1/persistentvolumes")
        assert names[:7] == ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass"]
        assert cells[0][:7] == ["pv-table", "5Gi", "RWO,ROX", "Retain", "Pending", "", "standard"]
        names, cells = await rows("/api/v1/namespaces/default/persistentvolumeclaims")
        assert names[:6] == ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass"]
        assert cells[0][:6] == ["claim-table", "Pending", "", "", "", "standard"]
        names, cells = await rows("/apis/storage.k8s.io/v1/storageclasses")
        assert names == ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"]
        assert cells[0][:5] == ["standard (default)", "hostpath.csi.kubeling.io", "Delete", "WaitForFirstConsumer",
                                False]

"""The hostpath driver's sidecars against a real apiserver and controller manager (issue 36):
a claim of the driver's class provisioned over the driver's socket into a volume pre-bound
to it (pvc-<uid>, its node's affinity) and bound by the binder; resized; deleted with its
directory under Delete and kept under Retain; a class the driver cannot serve told on the
claim (ProvisioningFailed) and retried, not looped on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controllers.manager import ControllerManager
from csi.hostpath import TOPOLOGY_KEY
from csi.service import HostpathService, ServiceConfig, bytes_arg
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from tests.wait import gone, until


@pytest.fixture
async def hostpath(client: Client, manager: ControllerManager, tmp_path: Path) -> AsyncIterator[HostpathService]:
    service = HostpathService(ServiceConfig(node_id="node-a", state_dir=tmp_path / "csi", capacity=bytes_arg("20Gi"),
                                            max_volume_size=bytes_arg("10Gi")), Client(client.address))
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def storage_class(client: Client, name: str, **fields: Any) -> None:
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name=name), provisioner="hostpath.csi.kubeling.io", **fields))


def pvc(name: str, cls: str, size: str = "1Gi") -> core_pb2.PersistentVolumeClaim:
    return core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            accessModes=["ReadWriteOnce"], storageClassName=cls,
            resources=core_pb2.VolumeResourceRequirements(requests={"storage": size})))


async def bound(client: Client, name: str) -> core_pb2.PersistentVolumeClaim:
    return await until(lambda: client.persistentvolumeclaims.get(name, "default"), f"{name} Bound",
                       check=lambda c: c.status.phase == "Bound", timeout=60)



async def test_provision_resize_and_delete(client: Client, hostpath: HostpathService, tmp_path: Path) -> None:
    driver = await until(lambda: client.csidrivers.get("hostpath.csi.kubeling.io"), "the CSIDriver object",
                         retry_on=(errors.NotFound,))
    assert not driver.spec.attachRequired and driver.spec.fsGroupPolicy == "File"
    await storage_class(client, "now", allowVolumeExpansion=True)
    await client.persistentvolumeclaims.create(pvc("data", "now"))
    claim = await bound(client, "data")
    assert claim.spec.volumeName == f"pvc-{claim.metadata.uid}"
    assert claim.metadata.annotations["volume.kubernetes.io/selected-node"] == "node-a"
    volume = await client.persistentvolumes.get(claim.spec.volumeName)
    assert volume.spec.csi.driver == "hostpath.csi.kubeling.io"
    assert volume.spec.persistentVolumeReclaimPolicy == "Delete"
    assert volume.metadata.annotations["pv.kubernetes.io/provisioned-by"] == "hostpath.csi.kubeling.io"
    term = volume.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]
    assert (term.key, term.operator, list(term.values)) == (TOPOLOGY_KEY, "In", ["node-a"])
    directory = tmp_path / "csi" / "volumes" / volume.spec.csi.volumeHandle
    assert directory.is_dir()

    claim.spec.resources.requests["storage"] = "3Gi"
    await client.persistentvolumeclaims.update(claim)
    grown = await until(lambda: client.persistentvolumeclaims.get("data", "default"), "the claim grown",
                        check=lambda c: c.status.capacity.get("storage") == "3Gi" and not c.status.conditions)
    assert (await client.persistentvolumes.get(grown.spec.volumeName)).spec.capacity["storage"] == "3Gi"
    assert not grown.status.conditions and "storage" not in grown.status.allocatedResourceStatuses
    assert grown.status.allocatedResources["storage"] == "3Gi"
    grown.spec.resources.requests["storage"] = "50Gi"  # past the driver's largest volume
    await client.persistentvolumeclaims.update(grown)
    refused = await until(lambda: client.persistentvolumeclaims.get("data", "default"), "the resize infeasible",
                          check=lambda c: c.status.allocatedResourceStatuses.get("storage") ==
                          "ControllerResizeInfeasible")
    assert refused.status.capacity["storage"] == "3Gi"

    await client.persistentvolumeclaims.delete("data", "default")
    await until(lambda: gone(lambda: client.persistentvolumes.get(volume.metadata.name)), "the volume deleted",
                timeout=60)
    assert not directory.exists()


async def test_retain_keeps_the_directory(client: Client, hostpath: HostpathService, tmp_path: Path) -> None:
    await storage_class(client, "keep", reclaimPolicy="Retain")
    await client.persistentvolumeclaims.create(pvc("kept", "keep"))
    claim = await bound(client, "kept")
    volume = await client.persistentvolumes.get(claim.spec.volumeName)
    await client.persistentvolumeclaims.delete("kept", "default")
    await until(lambda: client.persistentvolumes.get(volume.metadata.name), "the volume Released",
                check=lambda v: v.status.phase == "Released")
    assert (tmp_path / "csi" / "volumes" / volume.spec.csi.volumeHandle).is_dir()
    await client.persistentvolumes.delete(volume.metadata.name)  # the object may go; the directory stays
    await until(lambda: gone(lambda: client.persistentvolumes.get(volume.metadata.name)), "the object gone")
    assert (tmp_path / "csi" / "volumes" / volume.spec.csi.volumeHandle).is_dir()


async def test_waiting_for_a_node_and_failing_loudly(client: Client, hostpath: HostpathService) -> None:
    await storage_class(client, "later", volumeBindingMode="WaitForFirstConsumer")
    await client.persistentvolumeclaims.create(pvc("waits", "later"))
    claim = await until(lambda: client.persistentvolumeclaims.get("waits", "default"), "the claim Pending",
                        check=lambda c: c.status.phase == "Pending")
    assert "volume.kubernetes.io/storage-provisioner" not in claim.metadata.annotations  # not before a node
    claim.metadata.annotations["volume.kubernetes.io/selected-node"] = "node-a"  # as the scheduler does
    await client.persistentvolumeclaims.update(claim)
    await bound(client, "waits")

    await storage_class(client, "huge")
    await client.persistentvolumeclaims.create(pvc("too-big", "huge", size="50Gi"))

    async def failures() -> list[core_pb2.Event]:
        events = (await client.events.list_all("default"))[0]
        return [e for e in events if e.involvedObject.name == "too-big" and e.reason == "ProvisioningFailed"]
    told = await until(failures, "ProvisioningFailed on the claim")
    assert 'failed to provision volume with StorageClass "huge": rpc error: code = OutOfRange' in told[0].message
    assert (await client.persistentvolumeclaims.get("too-big", "default")).status.phase == "Pending"
    # retried with backoff, not in a loop: a handful of attempts in a few seconds
    await until(failures, "a retry", check=lambda f: len(f) >= 2)
    assert len(await failures()) < 20

"""The persistent volume binder and the protection controllers against a real apiserver
(issue 36), as upstream's pv_controller: static binding (smallest fit, class, access
modes, selector, volumeName, claimRef), phases on both sides, Retain and Delete reclaim,
WaitForFirstConsumer, hand-off to an external provisioner, Lost claims, and the
pvc-/pv-protection finalizers."""

from __future__ import annotations

from typing import Any

from controllers.manager import ControllerManager
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from tests.objects import pod
from tests.wait import gone, until


def pv(name: str, size: str = "1Gi", cls: str = "", labels: dict[str, str] | None = None,
       **spec: Any) -> core_pb2.PersistentVolume:
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    return core_pb2.PersistentVolume(
        metadata=meta_pb2.ObjectMeta(name=name, labels=labels or {}), spec=core_pb2.PersistentVolumeSpec(
            capacity={"storage": size}, hostPath=core_pb2.HostPathVolumeSource(path=f"/tmp/kubeling-pv/{name}"),
            storageClassName=cls, **spec))


def pvc(name: str, size: str = "1Gi", cls: str | None = "", **spec: Any) -> core_pb2.PersistentVolumeClaim:
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    claim = core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            resources=core_pb2.VolumeResourceRequirements(requests={"storage": size}), **spec))
    if cls is not None:
        claim.spec.storageClassName = cls
    return claim


async def bound(client: Client, claim: str) -> core_pb2.PersistentVolumeClaim:
    return await until(lambda: client.persistentvolumeclaims.get(claim, "default"), f"claim {claim} Bound",
                       check=lambda c: c.status.phase == "Bound")


async def create_bound(client: Client, claim: core_pb2.PersistentVolumeClaim) -> core_pb2.PersistentVolumeClaim:
    await client.persistentvolumeclaims.create(claim)
    return await bound(client, claim.metadata.name)


async def phase(client: Client, volume: str, want: str) -> core_pb2.PersistentVolume:
    return await until(lambda: client.persistentvolumes.get(volume), f"volume {volume} {want}",
                       check=lambda v: v.status.phase == want)


async def reasons(client: Client, name: str) -> set[str]:
    events = (await client.events.list_all("default"))[0]
    return {e.reason for e in events if e.involvedObject.name == name}



async def test_a_claim_binds_the_smallest_volume_that_fits(client: Client, manager: ControllerManager) -> None:
    for name, size in (("small", "1Gi"), ("big", "10Gi"), ("medium", "5Gi")):
        await client.persistentvolumes.create(pv(name, size))
    await client.persistentvolumes.create(pv("other-class", "2Gi", cls="gold"))
    await client.persistentvolumes.create(pv("rwx", "3Gi", accessModes=["ReadWriteMany", "ReadWriteOnce"]))
    for name in ("small", "big", "medium", "other-class", "rwx"):
        await phase(client, name, "Available")
    claim = await create_bound(client, pvc("two-gig", "2Gi"))
    assert claim.spec.volumeName == "rwx"  # 3Gi: the smallest of class "" with ReadWriteOnce
    assert claim.status.capacity["storage"] == "3Gi" and list(claim.status.accessModes) == ["ReadWriteMany",
                                                                                            "ReadWriteOnce"]
    assert claim.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    volume = await phase(client, "rwx", "Bound")
    assert (volume.spec.claimRef.name, volume.spec.claimRef.uid) == ("two-gig", claim.metadata.uid)
    assert volume.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"

    # ReadWriteMany: no free volume has it now (rwx is taken), so the claim waits
    await client.persistentvolumeclaims.create(pvc("many", "1Gi", accessModes=["ReadWriteMany"]))
    await until(lambda: reasons(client, "many"), "FailedBinding", check=lambda r: "FailedBinding" in r)
    gold = await create_bound(client, pvc("gold", "1Gi", cls="gold"))
    assert gold.spec.volumeName == "other-class"


async def test_pre_binding_by_volume_name_claim_ref_and_selector(client: Client, manager: ControllerManager) -> None:
    await client.persistentvolumes.create(pv("wanted", "5Gi"))
    await client.persistentvolumes.create(pv("smaller", "1Gi"))
    claim = await create_bound(client, pvc("named", volumeName="wanted"))
    assert claim.spec.volumeName == "wanted"
    reserved = pv("reserved", "1Gi", claimRef=meta_pb2.ObjectReference(namespace="default", name="for-me"))
    await client.persistentvolumes.create(reserved)
    await client.persistentvolumes.create(pv("labelled", "8Gi", labels={"tier": "fast"}))
    mine = await create_bound(client, pvc("for-me"))
    assert mine.spec.volumeName == "reserved"
    picky = await create_bound(client, pvc(
        "picky", selector=meta_pb2.LabelSelector(matchLabels={"tier": "fast"})))
    assert picky.spec.volumeName == "labelled"
    await client.persistentvolumeclaims.create(pvc("taken", volumeName="wanted"))
    await until(lambda: reasons(client, "taken"), "FailedBinding for a volume bound elsewhere",
                check=lambda r: "FailedBinding" in r)
    assert (await client.persistentvolumeclaims.get("taken", "default")).status.phase == "Pending"


async def test_reclaim_retain_and_delete(client: Client, manager: ControllerManager) -> None:
    await client.persistentvolumes.create(pv("kept", "1Gi", persistentVolumeReclaimPolicy="Retain", cls="a"))
    await client.persistentvolumes.create(pv("dropped", "1Gi", persistentVolumeReclaimPolicy="Delete", cls="b"))
    await create_bound(client, pvc("ca", cls="a"))
    await create_bound(client, pvc("cb", cls="b"))
    for name in ("ca", "cb"):
        await client.persistentvolumeclaims.delete(name, "default")
    await until(lambda: gone(lambda: client.persistentvolumeclaims.get("ca", "default")), "ca gone")
    await until(lambda: gone(lambda: client.persistentvolumeclaims.get("cb", "default")), "cb gone")
    await phase(client, "kept", "Released")
    failed = await phase(client, "dropped", "Failed")
    assert "no deletable volume plugin matched" in failed.status.message
    await until(lambda: reasons(client, "dropped"), "VolumeFailedDelete", check=lambda r: "VolumeFailedDelete" in r)
    # a Released volume is not bound again (and class "a" has no StorageClass to provision one)
    await client.persistentvolumeclaims.create(pvc("again", cls="a"))
    await until(lambda: reasons(client, "again"), "the new claim told", check=lambda r: "ProvisioningFailed" in r)
    assert (await client.persistentvolumeclaims.get("again", "default")).status.phase == "Pending"


async def test_waiting_for_the_first_consumer_and_the_provisioner(client: Client, manager: ControllerManager) -> None:
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name="later"), provisioner="hostpath.csi.kubeling.io",
        volumeBindingMode="WaitForFirstConsumer"))
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name="now"), provisioner="hostpath.csi.kubeling.io"))
    await client.persistentvolumes.create(pv("static-later", "1Gi", cls="later"))
    await client.persistentvolumeclaims.create(pvc("waits", cls="later"))
    await until(lambda: reasons(client, "waits"), "WaitForFirstConsumer", check=lambda r: "WaitForFirstConsumer" in r)
    assert (await client.persistentvolumeclaims.get("waits", "default")).status.phase == "Pending"
    assert not (await client.persistentvolumes.get("static-later")).spec.HasField("claimRef")  # the scheduler's

    await client.persistentvolumeclaims.create(pvc("provisioned", cls="now"))
    claim = await until(lambda: client.persistentvolumeclaims.get("provisioned", "default"),
                        "the claim handed to its provisioner",
                        check=lambda c: "volume.kubernetes.io/storage-provisioner" in c.metadata.annotations)
    assert claim.metadata.annotations["volume.kubernetes.io/storage-provisioner"] == "hostpath.csi.kubeling.io"
    await until(lambda: reasons(client, "provisioned"), "ExternalProvisioning",
                check=lambda r: "ExternalProvisioning" in r)
    # the provisioner's volume, made pre-bound to the claim, is bound
    made = pv("pvc-made", "1Gi", cls="now", claimRef=meta_pb2.ObjectReference(
        namespace="default", name="provisioned", uid=claim.metadata.uid))
    made.metadata.annotations["pv.kubernetes.io/provisioned-by"] = "hostpath.csi.kubeling.io"
    await client.persistentvolumes.create(made)
    assert (await bound(client, "provisioned")).spec.volumeName == "pvc-made"


async def test_protection_and_lost_claims(client: Client, manager: ControllerManager) -> None:
    await client.persistentvolumes.create(pv("guarded", "1Gi"))
    await create_bound(client, pvc("in-use"))
    user = pod("user")
    user.spec.volumes.add(name="data", persistentVolumeClaim=core_pb2.PersistentVolumeClaimVolumeSource(
        claimName="in-use"))
    await client.pods.create(user)
    await client.persistentvolumeclaims.delete("in-use", "default")
    await client.persistentvolumes.delete("guarded")
    claim = await client.persistentvolumeclaims.get("in-use", "default")
    assert claim.metadata.HasField("deletionTimestamp") and "kubernetes.io/pvc-protection" in claim.metadata.finalizers
    await manager.pvc_protection.sync("default/in-use")  # a pod uses it: the claim stays
    assert not await gone(lambda: client.persistentvolumeclaims.get("in-use", "default"))
    assert not await gone(lambda: client.persistentvolumes.get("guarded"))  # Bound: protected too
    await client.pods.delete("user", "default", grace_period_seconds=0)
    await until(lambda: gone(lambda: client.persistentvolumeclaims.get("in-use", "default")),
                "the claim gone once its pod is")
    await until(lambda: gone(lambda: client.persistentvolumes.get("guarded")), "the volume gone once released")

    await client.persistentvolumes.create(pv("vanishing", "1Gi", cls="v"))
    await create_bound(client, pvc("loses", cls="v"))
    held = await client.persistentvolumes.get("vanishing")
    held.metadata.ClearField("finalizers")
    await client.persistentvolumes.update(held)
    await client.persistentvolumes.delete("vanishing")
    lost = await until(lambda: client.persistentvolumeclaims.get("loses", "default"), "the claim Lost",
                       check=lambda c: c.status.phase == "Lost")
    assert lost.spec.volumeName == "vanishing"
    await until(lambda: reasons(client, "loses"), "ClaimLost", check=lambda r: "ClaimLost" in r)

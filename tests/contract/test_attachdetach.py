"""The attach/detach controller against a real apiserver (issue 36): a VolumeAttachment per
(CSI volume, node) a pod needs when the volume's driver needs attaching, none when its
CSIDriver says attachRequired false, FailedAttachVolume told on the pod from the attacher's
attachError, detached (deleted) once no pod needs it; VolumeAttachments it did not make are
left alone."""

from __future__ import annotations

from controllers.manager import ControllerManager
from kubeling import errors
from kubeling.client import Client
from kubeling.volumeutil import attachment_name
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from tests.objects import pod
from tests.wait import gone, until


async def _bound_csi_claim(client: Client, name: str, driver: str) -> None:
    await client.persistentvolumes.create(core_pb2.PersistentVolume(
        metadata=meta_pb2.ObjectMeta(name=f"pv-{name}"), spec=core_pb2.PersistentVolumeSpec(
            capacity={"storage": "1Gi"}, accessModes=["ReadWriteOnce"], storageClassName="",
            csi=core_pb2.CSIPersistentVolumeSource(driver=driver, volumeHandle=f"handle-{name}"))))
    await client.persistentvolumeclaims.create(core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            accessModes=["ReadWriteOnce"], storageClassName="", volumeName=f"pv-{name}",
            resources=core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    await until(lambda: client.persistentvolumeclaims.get(name, "default"), f"{name} Bound",
                check=lambda c: c.status.phase == "Bound")


def _user(name: str, claim: str) -> core_pb2.Pod:
    p = pod(name, node="node-a")
    p.spec.volumes.add(name="data", persistentVolumeClaim=core_pb2.PersistentVolumeClaimVolumeSource(claimName=claim))
    return p


async def test_attach_detach_and_failed_attach(client: Client, manager: ControllerManager) -> None:
    await client.csidrivers.create(storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="attach.example.com")))
    await client.csidrivers.create(storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="plain.example.com"),
                                                         spec=storage_pb2.CSIDriverSpec(attachRequired=False)))
    await _bound_csi_claim(client, "needs", "attach.example.com")
    await _bound_csi_claim(client, "plain", "plain.example.com")
    stranger = storage_pb2.VolumeAttachment(metadata=meta_pb2.ObjectMeta(name="someone-elses"),
                                            spec=storage_pb2.VolumeAttachmentSpec(
                                                attacher="attach.example.com", nodeName="node-a",
                                                source=storage_pb2.VolumeAttachmentSource(persistentVolumeName="x")))
    await client.volumeattachments.create(stranger)
    await client.pods.create(_user("user", "needs"))
    await client.pods.create(_user("plain-user", "plain"))
    name = attachment_name("pv-needs", "attach.example.com", "node-a")
    va = await until(lambda: client.volumeattachments.get(name), "the VolumeAttachment made",
                     retry_on=(errors.NotFound,))
    assert (va.spec.attacher, va.spec.nodeName, va.spec.source.persistentVolumeName) == (
        "attach.example.com", "node-a", "pv-needs")
    names = {v.metadata.name for v in (await client.volumeattachments.list_all())[0]}
    assert names == {name, "someone-elses"}  # none for the driver without an attach step

    va.status.attachError.message = "rpc error: code = Internal desc = the array is on fire"
    await client.volumeattachments.update_status(va)

    async def failed() -> list[str]:
        events = (await client.events.list_all("default"))[0]
        return [e.message for e in events if e.involvedObject.name == "user" and e.reason == "FailedAttachVolume"]
    told = await until(failed, "FailedAttachVolume on the pod")
    assert told == ['AttachVolume.Attach failed for volume "pv-needs" : rpc error: code = Internal desc = the array '
                    'is on fire']

    await client.pods.delete("user", "default", grace_period_seconds=0)

    await until(lambda: gone(lambda: client.volumeattachments.get(name)),
                "the VolumeAttachment deleted once no pod needs it")
    assert (await client.volumeattachments.get("someone-elses")).spec.nodeName == "node-a"


async def test_only_pods_with_claims_make_it_look_again(client: Client, manager: ControllerManager) -> None:
    """It recomputes what should be attached over the pods with claims, and only their
    changes make it do so: in a cluster of thousands of pods a hundred change a second,
    few of them with claims (it took half the controller manager's CPU at 3,000 nodes)."""
    await client.csidrivers.create(storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="attach.example.com")))
    await _bound_csi_claim(client, "needs", "attach.example.com")
    controller = manager.attach_detach
    looks = 0
    sync = controller.workers.sync

    async def counted(key: str) -> None:
        nonlocal looks
        looks += 1
        await sync(key)
    controller.workers.sync = counted
    for i in range(20):  # pods without claims, made, bound, deleted
        await client.pods.create(pod(f"plain-{i}", node="node-a"))
    await client.pods.create(_user("user", "needs"))  # the last pod: its look sees every other first
    name = attachment_name("pv-needs", "attach.example.com", "node-a")
    await until(lambda: client.volumeattachments.get(name), "the VolumeAttachment made", retry_on=(errors.NotFound,))
    assert looks <= 2, looks  # the claim pod's (and perhaps one for the claim's own events)
    for i in range(20):
        await client.pods.delete(f"plain-{i}", "default", grace_period_seconds=0)
    await client.pods.delete("user", "default", grace_period_seconds=0)
    await until(lambda: gone(lambda: client.volumeattachments.get(name)), "detached once its pod is gone")

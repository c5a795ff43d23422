"""The attach/detach controller for CSI volumes, as upstream's pkg/controller/volume/attachdetach
with its csi attacher: every claim of a pod scheduled to a node, bound to a CSI volume whose
driver needs attaching (its CSIDriver's attachRequired, true when it has no CSIDriver object,
as upstream), gets a VolumeAttachment `csi-<sha256(volume, driver, node)>` for the driver's
attacher to attach; one no pod on the node needs any more is deleted (detached). A
VolumeAttachment whose attacher reports an attachError is told on the pods waiting for it
(FailedAttachVolume, upstream's words). VolumeAttachments made by anyone else (another name)
are left alone."""

from __future__ import annotations

import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.events import WARNING, EventRecorder
from kubeling.informer import Informer, object_key
from kubeling.volumeutil import attachment_name
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2

__all__ = ["AttachDetachController", "attach_required"]

log = logging.getLogger(__name__)

_KEY = "all"  # the desired attachments are recomputed whole (a cluster's worth is small)
_TERMINAL = ("Succeeded", "Failed")


def _claims(pod: core_pb2.Pod) -> bool:
    return any(v.HasField("persistentVolumeClaim") for v in pod.spec.volumes)


def attach_required(driver: storage_pb2.CSIDriver | None) -> bool:
    return driver is None or not driver.spec.HasField("attachRequired") or driver.spec.attachRequired


class AttachDetachController:
    def __init__(self, client: Client, pods: Informer[core_pb2.Pod], claims: Informer[core_pb2.PersistentVolumeClaim],
                 volumes: Informer[core_pb2.PersistentVolume], drivers: Informer[storage_pb2.CSIDriver],
                 attachments: Informer[storage_pb2.VolumeAttachment], recorder: EventRecorder) -> None:
        self.client = client
        self.pods = pods
        self.claims = claims
        self.volumes = volumes
        self.drivers = drivers
        self.attachments = attachments
        self.recorder = recorder
        self.queue = WorkQueue("attachdetach")
        self.workers = Workers(self.queue, self.sync, 1)
        self._told: dict[str, str] = {}  # attachment -> the attachError last told
        # The pods with a claim among their volumes: only they can need an attachment, and
        # only their changes are a reason to look again (a cluster of 150,000 pods changes
        # a hundred times a second; its pods with claims are few).
        self._claimants: dict[str, core_pb2.Pod] = {}
        for pod in pods.store.list():
            self._pod(pod)
        pods.add_handler(on_add=self._pod, on_update=lambda old, new: self._pod(new, old), on_delete=self._gone)
        for informer in (claims, volumes, drivers, attachments):
            informer.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                 on_delete=self._changed)

    def _changed(self, _: object) -> None:
        self.queue.add(_KEY)

    def _pod(self, pod: core_pb2.Pod, old: core_pb2.Pod | None = None) -> None:
        key = object_key(pod)
        if _claims(pod):
            self._claimants[key] = pod
        elif self._claimants.pop(key, None) is None and (old is None or not _claims(old)):
            return
        self.queue.add(_KEY)

    def _gone(self, pod: core_pb2.Pod) -> None:
        if self._claimants.pop(object_key(pod), None) is not None:
            self.queue.add(_KEY)

    def desired(self) -> dict[str, tuple[storage_pb2.VolumeAttachmentSpec, list[core_pb2.Pod]]]:
        """attachment name -> (its spec, the pods that need it)."""
        out: dict[str, tuple[storage_pb2.VolumeAttachmentSpec, list[core_pb2.Pod]]] = {}
        for pod in self._claimants.values():
            node = pod.spec.nodeName
            if not node or pod.status.phase in _TERMINAL:
                continue
            for v in pod.spec.volumes:
                if not v.HasField("persistentVolumeClaim"):
                    continue
                claim = self.claims.store.get(f"{pod.metadata.namespace}/{v.persistentVolumeClaim.claimName}")
                volume = self.volumes.store.get(claim.spec.volumeName) if claim is not None and \
                    claim.spec.volumeName else None
                if volume is None or not volume.spec.HasField("csi"):
                    continue
                driver = volume.spec.csi.driver
                if not attach_required(self.drivers.store.get(driver)):
                    continue
                name = attachment_name(volume.metadata.name, driver, node)
                spec = storage_pb2.VolumeAttachmentSpec(attacher=driver, nodeName=node, source=(
                    storage_pb2.VolumeAttachmentSource(persistentVolumeName=volume.metadata.name)))
                out.setdefault(name, (spec, []))[1].append(pod)
        return out

    async def sync(self, key: str) -> None:
        desired = self.desired()
        for name, (spec, pods) in desired.items():
            found = self.attachments.store.get(name)
            if found is None:
                try:
                    await self.client.volumeattachments.create(storage_pb2.VolumeAttachment(
                        metadata=meta_pb2.ObjectMeta(name=name), spec=spec))
                    log.info("attaching volume %s to node %s (%s)", spec.source.persistentVolumeName, spec.nodeName,
                             name)
                except errors.AlreadyExists:
                    pass
                continue
            error = found.status.attachError.message
            if error and self._told.get(name) != error:
                self._told[name] = error
                volume = spec.source.persistentVolumeName
                for pod in pods:
                    self.recorder.pod_event(pod, WARNING, "FailedAttachVolume",
                                            f'AttachVolume.Attach failed for volume "{volume}" : {error}')
        for attachment in self.attachments.store.list():
            name = attachment.metadata.name
            spec = attachment.spec
            ours = name == attachment_name(spec.source.persistentVolumeName, spec.attacher, spec.nodeName)
            if ours and name not in desired and not attachment.metadata.HasField("deletionTimestamp"):
                try:
                    await self.client.volumeattachments.delete(name)
                    log.info("detaching volume %s from node %s", spec.source.persistentVolumeName, spec.nodeName)
                except errors.NotFound:
                    pass
                self._told.pop(name, None)

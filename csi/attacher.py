"""What upstream's external-attacher sidecar does for one node's driver: a VolumeAttachment of
this driver for this node is attached — ControllerPublishVolume over the driver's socket when
the driver has that capability, nothing to call when it has not (then attaching is only the
record) — and `status.attached` says so, with the publish context as `attachmentMetadata`;
an error goes to `status.attachError` and is retried with backoff. A VolumeAttachment being
deleted is detached (ControllerUnpublishVolume) before its finalizer goes."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from kubeling import errors, scheme
from kubeling.client import Client
from kubeling.errors import rpc_error_text
from kubeling.informer import SharedInformers
from kubeling.timestamps import now
from kubeling.workqueue import Workers, WorkQueue
from protos.csi.v1 import csi_pb2, csi_pb2_grpc
from protos.kubeling.v1 import storage_pb2

__all__ = ["Attacher", "AttacherConfig"]

log = logging.getLogger(__name__)

_RPC = csi_pb2.ControllerServiceCapability.RPC
_Mode = csi_pb2.VolumeCapability.AccessMode



@dataclass(frozen=True)
class AttacherConfig:
    driver: str
    node: str  # this driver's node: it attaches only there (the driver runs per node)
    timeout: float = 30.0

    @property
    def finalizer(self) -> str:
        return f"external-attacher/{self.driver.replace('/', '-')}"


class Attacher:
    def __init__(self, client: Client, channel: grpc.aio.Channel, config: AttacherConfig) -> None:
        self.client = client
        self.config = config
        self.controller = csi_pb2_grpc.ControllerStub(channel)
        self.informers = SharedInformers(client)
        self.attachments = self.informers.get(scheme.VOLUMEATTACHMENTS)
        self.queue = WorkQueue(f"attach-{config.node}", max_delay=60.0)
        self.workers = Workers(self.queue, self.sync, 1)
        self._publishes: bool | None = None  # PUBLISH_UNPUBLISH_VOLUME, asked once
        self.attachments.add_handler(on_add=self._add, on_update=lambda old, new: self._add(new))

    def _add(self, va: storage_pb2.VolumeAttachment) -> None:
        if va.spec.attacher == self.config.driver and va.spec.nodeName == self.config.node:
            self.queue.add(va.metadata.name)

    async def start(self) -> None:
        await self.informers.start(60.0)
        self.workers.start()

    async def stop(self) -> None:
        await self.workers.stop()
        await self.informers.stop()

    async def _can_publish(self) -> bool:
        if self._publishes is None:
            caps = await self.controller.ControllerGetCapabilities(csi_pb2.ControllerGetCapabilitiesRequest(),
                                                                   timeout=self.config.timeout)
            self._publishes = any(c.rpc.type == _RPC.PUBLISH_UNPUBLISH_VOLUME for c in caps.capabilities)
        return self._publishes

    async def sync(self, name: str) -> None:
        va = self.attachments.store.get(name)
        if va is None:
            return
        if va.metadata.HasField("deletionTimestamp"):
            await self._detach(va)
        elif not va.status.attached:
            await self._attach(va)

    async def _attach(self, va: storage_pb2.VolumeAttachment) -> None:
        fresh = await self.client.volumeattachments.get(va.metadata.name)
        if self.config.finalizer not in fresh.metadata.finalizers:
            fresh.metadata.finalizers.append(self.config.finalizer)
            fresh = await self.client.volumeattachments.update(fresh)
        context: dict[str, str] = {}
        try:
            if await self._can_publish():
                pv = await self.client.persistentvolumes.get(fresh.spec.source.persistentVolumeName)
                answer = await self.controller.ControllerPublishVolume(csi_pb2.ControllerPublishVolumeRequest(
                    volume_id=pv.spec.csi.volumeHandle, node_id=self.config.node, readonly=pv.spec.csi.readOnly,
                    volume_context=dict(pv.spec.csi.volumeAttributes),
                    volume_capability=csi_pb2.VolumeCapability(
                        mount=csi_pb2.VolumeCapability.MountVolume(fs_type=pv.spec.csi.fsType),
                        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=_Mode.SINGLE_NODE_WRITER))),
                    timeout=self.config.timeout)
                context = dict(answer.publish_context)
        except grpc.aio.AioRpcError as err:
            fresh.status.attachError.CopyFrom(storage_pb2.VolumeError(time=now(), message=rpc_error_text(err)))
            await self.client.volumeattachments.update_status(fresh)
            raise RuntimeError(f"attach {va.metadata.name}: {err.details()}") from None
        fresh.status.attached = True
        fresh.status.attachmentMetadata.clear()
        fresh.status.attachmentMetadata.update(context)
        fresh.status.ClearField("attachError")
        await self.client.volumeattachments.update_status(fresh)
        log.info("attached volume %s to node %s", fresh.spec.source.persistentVolumeName, self.config.node)

    async def _detach(self, va: storage_pb2.VolumeAttachment) -> None:
        if self.config.finalizer not in va.metadata.finalizers:
            return
        try:
            if await self._can_publish():
                pv = await self.client.persistentvolumes.get(va.spec.source.persistentVolumeName)
                await self.controller.ControllerUnpublishVolume(csi_pb2.ControllerUnpublishVolumeRequest(
                    volume_id=pv.spec.csi.volumeHandle, node_id=self.config.node), timeout=self.config.timeout)
        except errors.NotFound:
            pass  # the volume is gone: nothing is attached any more
        except grpc.aio.AioRpcError as err:
            fresh = await self.client.volumeattachments.get(va.metadata.name)
            fresh.status.detachError.CopyFrom(storage_pb2.VolumeError(time=now(), message=rpc_error_text(err)))
            await self.client.volumeattachments.update_status(fresh)
            raise RuntimeError(f"detach {va.metadata.name}: {err.details()}") from None
        try:
            fresh = await self.client.volumeattachments.get(va.metadata.name)
        except errors.NotFound:
            return
        if self.config.finalizer in fresh.metadata.finalizers:
            fresh.metadata.finalizers.remove(self.config.finalizer)
            await self.client.volumeattachments.update(fresh)

"""csi.v1.Node: a volume's directory staged (bind-mounted at the staging path the kubelet
gives, once per node) and published (the staging path bind-mounted at each pod's target
path, read-only where asked), and taken down again in reverse."""

from __future__ import annotations

import os
from pathlib import Path

import grpc

from csi.hostpath.controller import abort, require, supported
from csi.hostpath.driver import Driver
from csi.hostpath.state import Volume
from kubeling import mounts
from protos.csi.v1 import csi_pb2, csi_pb2_grpc

__all__ = ["NodeServicer"]

_RPC = csi_pb2.NodeServiceCapability.RPC
_Mode = csi_pb2.VolumeCapability.AccessMode


class NodeServicer(csi_pb2_grpc.NodeServicer):
    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.state = driver.state

    async def _volume(self, volume_id: str, context: grpc.aio.ServicerContext) -> Volume:
        volume = self.state.volumes.get(volume_id)
        if volume is None:
            await abort(context, grpc.StatusCode.NOT_FOUND, f"volume {volume_id} not found")
        if volume.node != self.driver.config.node_id:
            await abort(context, grpc.StatusCode.NOT_FOUND,
                        f"volume {volume_id} is on node {volume.node}, not on {self.driver.config.node_id}")
        return volume

    async def NodeStageVolume(self, request: csi_pb2.NodeStageVolumeRequest,
                              context: grpc.aio.ServicerContext) -> csi_pb2.NodeStageVolumeResponse:
        await require(context, request, "volume_id", "staging_target_path", "volume_capability")
        if why := supported([request.volume_capability]):
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, why)
        staging = Path(request.staging_target_path)
        async with self.driver.lock:
            volume = await self._volume(request.volume_id, context)
            staging.mkdir(parents=True, exist_ok=True)
            if not mounts.is_mount_point(staging):
                try:
                    mounts.bind(self.state.volume_path(volume.id), staging)
                except mounts.MountError as exc:
                    await abort(context, grpc.StatusCode.INTERNAL, str(exc))
            if str(staging) not in volume.staged:
                volume.staged.append(str(staging))
                self.state.save()
        return csi_pb2.NodeStageVolumeResponse()

    async def NodeUnstageVolume(self, request: csi_pb2.NodeUnstageVolumeRequest,
                                context: grpc.aio.ServicerContext) -> csi_pb2.NodeUnstageVolumeResponse:
        await require(context, request, "volume_id", "staging_target_path")
        staging = Path(request.staging_target_path)
        async with self.driver.lock:
            volume = await self._volume(request.volume_id, context)
            try:
                mounts.unmount(staging)
            except mounts.MountError as exc:
                await abort(context, grpc.StatusCode.INTERNAL, str(exc))
            if str(staging) in volume.staged:
                volume.staged.remove(str(staging))
                self.state.save()
        return csi_pb2.NodeUnstageVolumeResponse()

    async def NodePublishVolume(self, request: csi_pb2.NodePublishVolumeRequest,
                                context: grpc.aio.ServicerContext) -> csi_pb2.NodePublishVolumeResponse:
        await require(context, request, "volume_id", "target_path", "volume_capability")
        if not request.staging_target_path:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                        "staging target path missing in request (the driver stages volumes)")
        if why := supported([request.volume_capability]):
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, why)
        target, staging = Path(request.target_path), Path(request.staging_target_path)
        mode = request.volume_capability.access_mode.mode
        readonly = request.readonly or mode == _Mode.SINGLE_NODE_READER_ONLY
        async with self.driver.lock:
            volume = await self._volume(request.volume_id, context)
            if str(staging) not in volume.staged:
                await abort(context, grpc.StatusCode.FAILED_PRECONDITION,
                            f"volume {volume.id} is not staged at {staging}")
            elsewhere = [t for t in volume.published if t != str(target)]
            if elsewhere and _Mode.SINGLE_NODE_SINGLE_WRITER in (mode, volume.access_mode):
                await abort(context, grpc.StatusCode.FAILED_PRECONDITION,
                            f"volume {volume.id} is single-writer and published at {elsewhere[0]} already")
            if str(target) in volume.published and mounts.is_mount_point(target):
                if volume.published[str(target)] != readonly:
                    await abort(context, grpc.StatusCode.ALREADY_EXISTS,
                                f"volume {volume.id} is published at {target} with another read-only flag")
                return csi_pb2.NodePublishVolumeResponse()
            target.mkdir(parents=True, exist_ok=True)
            try:
                mounts.bind(staging, target, readonly=readonly)
            except mounts.MountError as exc:
                await abort(context, grpc.StatusCode.INTERNAL, str(exc))
            volume.published[str(target)] = readonly
            self.state.save()
        return csi_pb2.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(self, request: csi_pb2.NodeUnpublishVolumeRequest,
                                  context: grpc.aio.ServicerContext) -> csi_pb2.NodeUnpublishVolumeResponse:
        await require(context, request, "volume_id", "target_path")
        target = Path(request.target_path)
        async with self.driver.lock:
            volume = await self._volume(request.volume_id, context)
            try:
                while mounts.is_mount_point(target):  # a target mounted twice over is taken down whole
                    mounts.unmount(target)
                if target.is_dir():
                    target.rmdir()  # the spec: the driver removes what it created
                elif target.exists():
                    target.unlink()
            except OSError as exc:
                await abort(context, grpc.StatusCode.INTERNAL, f"unpublish {target}: {exc}")
            if volume.published.pop(str(target), None) is not None:
                self.state.save()
        return csi_pb2.NodeUnpublishVolumeResponse()

    async def NodeGetVolumeStats(self, request: csi_pb2.NodeGetVolumeStatsRequest,
                                 context: grpc.aio.ServicerContext) -> csi_pb2.NodeGetVolumeStatsResponse:
        await require(context, request, "volume_id", "volume_path")
        volume = await self._volume(request.volume_id, context)
        path = Path(request.volume_path)
        if not path.exists():
            await abort(context, grpc.StatusCode.NOT_FOUND, f"volume path {path} does not exist")
        fs = os.statvfs(path)
        total, free, available = fs.f_blocks * fs.f_frsize, fs.f_bfree * fs.f_frsize, fs.f_bavail * fs.f_frsize
        usage = [
            csi_pb2.VolumeUsage(unit=csi_pb2.VolumeUsage.BYTES, total=min(total, volume.capacity),
                                used=total - free, available=min(available, volume.capacity)),
            csi_pb2.VolumeUsage(unit=csi_pb2.VolumeUsage.INODES, total=fs.f_files, used=fs.f_files - fs.f_ffree,
                                available=fs.f_favail),
        ]
        return csi_pb2.NodeGetVolumeStatsResponse(usage=usage)

    async def NodeExpandVolume(self, request: csi_pb2.NodeExpandVolumeRequest,
                               context: grpc.aio.ServicerContext) -> csi_pb2.NodeExpandVolumeResponse:
        await require(context, request, "volume_id", "volume_path")
        volume = await self._volume(request.volume_id, context)
        if not Path(request.volume_path).exists():
            await abort(context, grpc.StatusCode.NOT_FOUND, f"volume path {request.volume_path} does not exist")
        # The controller grew the volume's bookkeeping; a directory has nothing more to grow.
        return csi_pb2.NodeExpandVolumeResponse(capacity_bytes=max(volume.capacity,
                                                                   request.capacity_range.required_bytes))

    async def NodeGetCapabilities(self, request: csi_pb2.NodeGetCapabilitiesRequest,
                                  context: grpc.aio.ServicerContext) -> csi_pb2.NodeGetCapabilitiesResponse:
        kinds = (_RPC.STAGE_UNSTAGE_VOLUME, _RPC.GET_VOLUME_STATS, _RPC.EXPAND_VOLUME, _RPC.SINGLE_NODE_MULTI_WRITER)
        return csi_pb2.NodeGetCapabilitiesResponse(
            capabilities=[csi_pb2.NodeServiceCapability(rpc=_RPC(type=k)) for k in kinds])

    async def NodeGetInfo(self, request: csi_pb2.NodeGetInfoRequest,
                          context: grpc.aio.ServicerContext) -> csi_pb2.NodeGetInfoResponse:
        config = self.driver.config
        return csi_pb2.NodeGetInfoResponse(node_id=config.node_id, max_volumes_per_node=config.max_volumes_per_node,
                                           accessible_topology=self.driver.topology(config.node_id))

"""csi.v1.Controller: volumes (a directory each) and snapshots (a copy of one) on this node.

Sizes are bookkeeping, as in upstream's hostpath driver for directories: a volume's
capacity counts against the driver's `--capacity`, but writes into the directory are not
limited by it (no quota on a plain directory).
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Sequence
from typing import NoReturn

import grpc
from google.protobuf import timestamp_pb2, wrappers_pb2
from google.protobuf.message import Message

from csi.hostpath.driver import Driver, GiB
from csi.hostpath.state import Snapshot, Volume
from protos.csi.v1 import csi_pb2, csi_pb2_grpc

__all__ = ["ControllerServicer", "supported", "abort", "require"]

_RPC = csi_pb2.ControllerServiceCapability.RPC
_Mode = csi_pb2.VolumeCapability.AccessMode
# A directory is on one node: what one node can share.
_SINGLE_NODE = frozenset({_Mode.SINGLE_NODE_WRITER, _Mode.SINGLE_NODE_READER_ONLY, _Mode.SINGLE_NODE_SINGLE_WRITER,
                          _Mode.SINGLE_NODE_MULTI_WRITER})


async def abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("unreachable: abort raises")


async def require(context: grpc.aio.ServicerContext, request: Message, *fields: str) -> None:
    """INVALID_ARGUMENT naming the first of `fields` the request lacks (a message field: not
    set; any other: empty), as the spec asks of every call."""
    for name in fields:
        try:
            given = request.HasField(name)  # a message field: set or not
        except ValueError:
            given = bool(getattr(request, name))  # a string, or a list: empty or not
        if not given:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{name.replace('_', ' ')} missing in request")


def supported(caps: Sequence[csi_pb2.VolumeCapability]) -> str:
    """Why these capabilities cannot be had ("": they can)."""
    for cap in caps:
        if cap.HasField("block"):
            return "access type block is not supported: volumes are directories"
        if not cap.HasField("mount"):
            return "a volume capability needs an access type (mount)"
        if cap.access_mode.mode not in _SINGLE_NODE:
            return f"access mode {_Mode.Mode.Name(cap.access_mode.mode)} is not supported: a volume is on one node"
    return ""


def _timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def _page(ids: list[str], token: str, max_entries: int) -> tuple[list[str], str] | None:
    """The page of ids starting at token (an index) and the next token; None: a bad token."""
    start = 0
    if token:
        if not token.isdigit() or int(token) > len(ids):
            return None
        start = int(token)
    end = len(ids) if max_entries <= 0 else min(len(ids), start + max_entries)
    return ids[start:end], str(end) if end < len(ids) else ""


class ControllerServicer(csi_pb2_grpc.ControllerServicer):
    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.state = driver.state

    def volume_message(self, volume: Volume) -> csi_pb2.Volume:
        out = csi_pb2.Volume(volume_id=volume.id, capacity_bytes=volume.capacity,
                             accessible_topology=[self.driver.topology(volume.node)])
        if volume.source_snapshot:
            out.content_source.snapshot.snapshot_id = volume.source_snapshot
        elif volume.source_volume:
            out.content_source.volume.volume_id = volume.source_volume
        return out

    def snapshot_message(self, snap: Snapshot) -> csi_pb2.Snapshot:
        return csi_pb2.Snapshot(snapshot_id=snap.id, source_volume_id=snap.source_volume, size_bytes=snap.size,
                                creation_time=_timestamp(snap.created), ready_to_use=True)

    # ------------------------------------------------------------ volumes

    async def CreateVolume(self, request: csi_pb2.CreateVolumeRequest,
                           context: grpc.aio.ServicerContext) -> csi_pb2.CreateVolumeResponse:
        await require(context, request, "name", "volume_capabilities")
        if why := supported(request.volume_capabilities):
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, why)
        required, limit = request.capacity_range.required_bytes, request.capacity_range.limit_bytes
        if required < 0 or limit < 0 or (limit and required > limit):
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                        f"capacity range: required_bytes {required} and limit_bytes {limit} do not make a range")
        size = required or (min(GiB, limit) if limit else GiB)
        if size > self.driver.config.max_volume_size:
            await abort(context, grpc.StatusCode.OUT_OF_RANGE,
                        f"requested capacity {size} exceeds the maximum volume size "
                        f"{self.driver.config.max_volume_size}")
        if not self.driver.serves_topology(request.accessibility_requirements):
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"no requisite topology includes this driver's node {self.driver.config.node_id}")
        source = request.volume_content_source
        async with self.driver.lock:
            existing = self.state.volume_by_name(request.name)
            if existing is not None:
                if existing.capacity < required or (limit and existing.capacity > limit):
                    await abort(context, grpc.StatusCode.ALREADY_EXISTS,
                                f"volume {request.name} exists with capacity {existing.capacity}, "
                                f"outside the range asked for")
                if (source.snapshot.snapshot_id != existing.source_snapshot
                        or source.volume.volume_id != existing.source_volume):
                    await abort(context, grpc.StatusCode.ALREADY_EXISTS,
                                f"volume {request.name} exists with another content source")
                return csi_pb2.CreateVolumeResponse(volume=self.volume_message(existing))
            available = self.driver.config.capacity - self.state.allocated()
            if size > available:
                await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"insufficient capacity: {size} bytes asked, {available} available")
            copy_from = None
            if source.HasField("snapshot"):
                snap = self.state.snapshots.get(source.snapshot.snapshot_id)
                if snap is None:
                    await abort(context, grpc.StatusCode.NOT_FOUND,
                                f"source snapshot {source.snapshot.snapshot_id} not found")
                copy_from = self.state.snapshot_path(snap.id)
            elif source.HasField("volume"):
                parent = self.state.volumes.get(source.volume.volume_id)
                if parent is None:
                    await abort(context, grpc.StatusCode.NOT_FOUND,
                                f"source volume {source.volume.volume_id} not found")
                copy_from = self.state.volume_path(parent.id)
            volume = Volume(id=str(uuid.uuid4()), name=request.name, capacity=size, node=self.driver.config.node_id,
                            parameters=dict(request.parameters), source_snapshot=source.snapshot.snapshot_id,
                            source_volume=source.volume.volume_id,
                            access_mode=request.volume_capabilities[0].access_mode.mode)
            path = self.state.volume_path(volume.id)
            if copy_from is not None:
                await asyncio.to_thread(shutil.copytree, copy_from, path, symlinks=True)
            else:
                path.mkdir(mode=0o777)
                path.chmod(0o777)  # any pod's user may write, as upstream's hostpath volumes
            self.state.volumes[volume.id] = volume
            self.state.save()
        self.driver.log.info("created volume %s (%s, %d bytes)", volume.id, volume.name, volume.capacity)
        return csi_pb2.CreateVolumeResponse(volume=self.volume_message(volume))

    async def DeleteVolume(self, request: csi_pb2.DeleteVolumeRequest,
                           context: grpc.aio.ServicerContext) -> csi_pb2.DeleteVolumeResponse:
        await require(context, request, "volume_id")
        async with self.driver.lock:
            volume = self.state.volumes.get(request.volume_id)
            if volume is None:
                return csi_pb2.DeleteVolumeResponse()  # gone already: deleting is idempotent
            if volume.staged or volume.published:
                await abort(context, grpc.StatusCode.FAILED_PRECONDITION,
                            f"volume {volume.id} is still staged or published on node {volume.node}")
            await asyncio.to_thread(shutil.rmtree, self.state.volume_path(volume.id), True)
            del self.state.volumes[volume.id]
            self.state.save()
        self.driver.log.info("deleted volume %s (%s)", volume.id, volume.name)
        return csi_pb2.DeleteVolumeResponse()

    async def ValidateVolumeCapabilities(
            self, request: csi_pb2.ValidateVolumeCapabilitiesRequest,
            context: grpc.aio.ServicerContext) -> csi_pb2.ValidateVolumeCapabilitiesResponse:
        await require(context, request, "volume_id", "volume_capabilities")
        if request.volume_id not in self.state.volumes:
            await abort(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        if why := supported(request.volume_capabilities):
            return csi_pb2.ValidateVolumeCapabilitiesResponse(message=why)
        confirmed = csi_pb2.ValidateVolumeCapabilitiesResponse.Confirmed(
            volume_context=request.volume_context, volume_capabilities=request.volume_capabilities,
            parameters=request.parameters)
        return csi_pb2.ValidateVolumeCapabilitiesResponse(confirmed=confirmed)

    async def ListVolumes(self, request: csi_pb2.ListVolumesRequest,
                          context: grpc.aio.ServicerContext) -> csi_pb2.ListVolumesResponse:
        if request.max_entries < 0:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "max_entries must not be negative")
        page = _page(sorted(self.state.volumes), request.starting_token, request.max_entries)
        if page is None:
            await abort(context, grpc.StatusCode.ABORTED, f"starting_token {request.starting_token!r} is not valid")
        ids, token = page
        return csi_pb2.ListVolumesResponse(
            entries=[csi_pb2.ListVolumesResponse.Entry(volume=self.volume_message(self.state.volumes[i]))
                     for i in ids], next_token=token)

    async def GetCapacity(self, request: csi_pb2.GetCapacityRequest,
                          context: grpc.aio.ServicerContext) -> csi_pb2.GetCapacityResponse:
        config = self.driver.config
        if request.HasField("accessible_topology") and not self.driver.in_topology(request.accessible_topology):
            return csi_pb2.GetCapacityResponse(available_capacity=0)
        available = max(0, config.capacity - self.state.allocated())
        return csi_pb2.GetCapacityResponse(
            available_capacity=available,
            maximum_volume_size=wrappers_pb2.Int64Value(value=min(available, config.max_volume_size)))

    async def ControllerGetCapabilities(
            self, request: csi_pb2.ControllerGetCapabilitiesRequest,
            context: grpc.aio.ServicerContext) -> csi_pb2.ControllerGetCapabilitiesResponse:
        kinds = (_RPC.CREATE_DELETE_VOLUME, _RPC.LIST_VOLUMES, _RPC.GET_CAPACITY, _RPC.CREATE_DELETE_SNAPSHOT,
                 _RPC.LIST_SNAPSHOTS, _RPC.GET_SNAPSHOT, _RPC.CLONE_VOLUME, _RPC.EXPAND_VOLUME, _RPC.GET_VOLUME,
                 _RPC.SINGLE_NODE_MULTI_WRITER)
        return csi_pb2.ControllerGetCapabilitiesResponse(
            capabilities=[csi_pb2.ControllerServiceCapability(rpc=_RPC(type=k)) for k in kinds])

    async def ControllerGetVolume(self, request: csi_pb2.ControllerGetVolumeRequest,
                                  context: grpc.aio.ServicerContext) -> csi_pb2.ControllerGetVolumeResponse:
        await require(context, request, "volume_id")
        volume = self.state.volumes.get(request.volume_id)
        if volume is None:
            await abort(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        status = csi_pb2.ControllerGetVolumeResponse.VolumeStatus(
            published_node_ids=[volume.node] if volume.published else [])
        return csi_pb2.ControllerGetVolumeResponse(volume=self.volume_message(volume), status=status)

    async def ControllerExpandVolume(self, request: csi_pb2.ControllerExpandVolumeRequest,
                                     context: grpc.aio.ServicerContext) -> csi_pb2.ControllerExpandVolumeResponse:
        await require(context, request, "volume_id", "capacity_range")
        required, limit = request.capacity_range.required_bytes, request.capacity_range.limit_bytes
        if limit and required > limit:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                        f"capacity range: required_bytes {required} exceeds limit_bytes {limit}")
        if max(required, limit) > self.driver.config.max_volume_size:
            await abort(context, grpc.StatusCode.OUT_OF_RANGE,
                        f"requested capacity {max(required, limit)} exceeds the maximum volume size "
                        f"{self.driver.config.max_volume_size}")
        async with self.driver.lock:
            volume = self.state.volumes.get(request.volume_id)
            if volume is None:
                await abort(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
            if required > volume.capacity:
                grow = required - volume.capacity
                available = self.driver.config.capacity - self.state.allocated()
                if grow > available:
                    await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"insufficient capacity to grow by {grow} bytes: {available} available")
                volume.capacity = required
                self.state.save()
        # A directory has no filesystem to grow: the node has nothing to do.
        return csi_pb2.ControllerExpandVolumeResponse(capacity_bytes=volume.capacity, node_expansion_required=False)

    # ------------------------------------------------------------ snapshots

    async def CreateSnapshot(self, request: csi_pb2.CreateSnapshotRequest,
                             context: grpc.aio.ServicerContext) -> csi_pb2.CreateSnapshotResponse:
        await require(context, request, "name", "source_volume_id")
        async with self.driver.lock:
            existing = self.state.snapshot_by_name(request.name)
            if existing is not None:
                if existing.source_volume != request.source_volume_id:
                    await abort(context, grpc.StatusCode.ALREADY_EXISTS,
                                f"snapshot {request.name} exists with source volume {existing.source_volume}")
                return csi_pb2.CreateSnapshotResponse(snapshot=self.snapshot_message(existing))
            volume = self.state.volumes.get(request.source_volume_id)
            if volume is None:
                await abort(context, grpc.StatusCode.NOT_FOUND, f"source volume {request.source_volume_id} not found")
            snap = Snapshot(id=str(uuid.uuid4()), name=request.name, source_volume=volume.id, size=volume.capacity,
                            created=time.time())
            await asyncio.to_thread(shutil.copytree, self.state.volume_path(volume.id),
                                    self.state.snapshot_path(snap.id), symlinks=True)
            self.state.snapshots[snap.id] = snap
            self.state.save()
        return csi_pb2.CreateSnapshotResponse(snapshot=self.snapshot_message(snap))

    async def DeleteSnapshot(self, request: csi_pb2.DeleteSnapshotRequest,
                             context: grpc.aio.ServicerContext) -> csi_pb2.DeleteSnapshotResponse:
        await require(context, request, "snapshot_id")
        async with self.driver.lock:
            if self.state.snapshots.pop(request.snapshot_id, None) is not None:
                await asyncio.to_thread(shutil.rmtree, self.state.snapshot_path(request.snapshot_id), True)
                self.state.save()
        return csi_pb2.DeleteSnapshotResponse()

    async def ListSnapshots(self, request: csi_pb2.ListSnapshotsRequest,
                            context: grpc.aio.ServicerContext) -> csi_pb2.ListSnapshotsResponse:
        if request.max_entries < 0:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "max_entries must not be negative")
        snaps = self.state.snapshots
        ids = sorted(i for i, s in snaps.items()
                     if (not request.snapshot_id or i == request.snapshot_id)
                     and (not request.source_volume_id or s.source_volume == request.source_volume_id))
        page = _page(ids, request.starting_token, request.max_entries)
        if page is None:
            await abort(context, grpc.StatusCode.ABORTED, f"starting_token {request.starting_token!r} is not valid")
        chosen, token = page
        return csi_pb2.ListSnapshotsResponse(
            entries=[csi_pb2.ListSnapshotsResponse.Entry(snapshot=self.snapshot_message(snaps[i])) for i in chosen],
            next_token=token)

    async def GetSnapshot(self, request: csi_pb2.GetSnapshotRequest,
                          context: grpc.aio.ServicerContext) -> csi_pb2.GetSnapshotResponse:
        await require(context, request, "snapshot_id")
        snap = self.state.snapshots.get(request.snapshot_id)
        if snap is None:
            await abort(context, grpc.StatusCode.NOT_FOUND, f"snapshot {request.snapshot_id} not found")
        return csi_pb2.GetSnapshotResponse(snapshot=self.snapshot_message(snap))

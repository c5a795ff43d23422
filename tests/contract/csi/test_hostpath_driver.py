"""The hostpath CSI driver against the CSI spec, over its real unix socket: what csi-sanity
checks (`make csi-sanity`), kept here so that `make test` guards it, and what the suite
does not look at (bind mounts that carry data, read-only publishing, state that survives
a restarted driver)."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi.hostpath import TOPOLOGY_KEY, Driver, DriverConfig, GiB, Server
from kubeling import mounts
from protos.csi.v1 import csi_pb2, csi_pb2_grpc

_Mode = csi_pb2.VolumeCapability.AccessMode


def cap(mode: Any = _Mode.SINGLE_NODE_WRITER) -> csi_pb2.VolumeCapability:
    return csi_pb2.VolumeCapability(mount=csi_pb2.VolumeCapability.MountVolume(),
                                    access_mode=_Mode(mode=mode))


class Stubs:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.identity = csi_pb2_grpc.IdentityStub(channel)
        self.controller = csi_pb2_grpc.ControllerStub(channel)
        self.node = csi_pb2_grpc.NodeStub(channel)


async def _serve(tmp_path: Path, capacity: int = 10 * GiB) -> tuple[Server, Path]:
    server = Server(Driver(DriverConfig(node_id="node-a", state_dir=tmp_path / "state", capacity=capacity,
                                        max_volume_size=4 * GiB)))
    socket = tmp_path / "csi.sock"
    await server.start(socket)
    return server, socket


@pytest.fixture
async def csi(tmp_path: Path) -> AsyncIterator[Stubs]:
    driver, socket = await _serve(tmp_path)
    try:
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            yield Stubs(channel)
    finally:
        await driver.stop()
        for m in reversed(mounts.mount_points(tmp_path)):
            mounts.unmount(m, lazy=True)


async def _code(call) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code()


async def test_identity_names_the_driver_and_its_services(csi: Stubs) -> None:
    info = await csi.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest())
    assert info.name == "hostpath.csi.kubeling.io" and info.vendor_version
    caps = await csi.identity.GetPluginCapabilities(csi_pb2.GetPluginCapabilitiesRequest())
    services = {c.service.type for c in caps.capabilities if c.HasField("service")}
    assert services == {csi_pb2.PluginCapability.Service.CONTROLLER_SERVICE,
                        csi_pb2.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS}
    assert (await csi.identity.Probe(csi_pb2.ProbeRequest())).ready.value
    node = await csi.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())
    assert node.node_id == "node-a" and dict(node.accessible_topology.segments) == {TOPOLOGY_KEY: "node-a"}


async def test_create_volume_is_idempotent_by_name_and_checks_its_input(csi: Stubs) -> None:
    ask = csi_pb2.CreateVolumeRequest(name="pvc-1", volume_capabilities=[cap()],
                                      capacity_range=csi_pb2.CapacityRange(required_bytes=GiB))
    first = (await csi.controller.CreateVolume(ask)).volume
    again = (await csi.controller.CreateVolume(ask)).volume
    assert first.volume_id == again.volume_id and first.capacity_bytes == GiB
    assert dict(first.accessible_topology[0].segments) == {TOPOLOGY_KEY: "node-a"}
    bigger = csi_pb2.CreateVolumeRequest(name="pvc-1", volume_capabilities=[cap()],
                                         capacity_range=csi_pb2.CapacityRange(required_bytes=2 * GiB))
    assert await _code(csi.controller.CreateVolume(bigger)) == grpc.StatusCode.ALREADY_EXISTS
    assert await _code(csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(volume_capabilities=[cap()]))) == grpc.StatusCode.INVALID_ARGUMENT
    assert await _code(csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(name="x"))) == grpc.StatusCode.INVALID_ARGUMENT
    multi = csi_pb2.CreateVolumeRequest(name="x", volume_capabilities=[cap(_Mode.MULTI_NODE_MULTI_WRITER)])
    assert await _code(csi.controller.CreateVolume(multi)) == grpc.StatusCode.INVALID_ARGUMENT
    huge = csi_pb2.CreateVolumeRequest(name="x", volume_capabilities=[cap()],
                                       capacity_range=csi_pb2.CapacityRange(required_bytes=5 * GiB))
    assert await _code(csi.controller.CreateVolume(huge)) == grpc.StatusCode.OUT_OF_RANGE
    elsewhere = csi_pb2.CreateVolumeRequest(
        name="x", volume_capabilities=[cap()], accessibility_requirements=csi_pb2.TopologyRequirement(
            requisite=[csi_pb2.Topology(segments={TOPOLOGY_KEY: "node-b"})]))
    assert await _code(csi.controller.CreateVolume(elsewhere)) == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_capacity_is_what_volumes_leave(csi: Stubs) -> None:
    before = await csi.controller.GetCapacity(csi_pb2.GetCapacityRequest())
    assert before.available_capacity == 10 * GiB
    for i in range(3):
        await csi.controller.CreateVolume(csi_pb2.CreateVolumeRequest(
            name=f"v{i}", volume_capabilities=[cap()], capacity_range=csi_pb2.CapacityRange(required_bytes=3 * GiB)))
    after = await csi.controller.GetCapacity(csi_pb2.GetCapacityRequest())
    assert after.available_capacity == GiB
    full = csi_pb2.CreateVolumeRequest(name="v3", volume_capabilities=[cap()],
                                       capacity_range=csi_pb2.CapacityRange(required_bytes=2 * GiB))
    assert await _code(csi.controller.CreateVolume(full)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    other = await csi.controller.GetCapacity(csi_pb2.GetCapacityRequest(
        accessible_topology=csi_pb2.Topology(segments={TOPOLOGY_KEY: "node-b"})))
    assert other.available_capacity == 0


async def test_list_volumes_pages_and_refuses_a_bad_token(csi: Stubs) -> None:
    ids = set()
    for i in range(5):
        made = await csi.controller.CreateVolume(csi_pb2.CreateVolumeRequest(name=f"v{i}", volume_capabilities=[cap()]))
        ids.add(made.volume.volume_id)
    seen, token = set(), ""
    while True:
        page = await csi.controller.ListVolumes(csi_pb2.ListVolumesRequest(max_entries=2, starting_token=token))
        assert len(page.entries) <= 2
        seen |= {e.volume.volume_id for e in page.entries}
        token = page.next_token
        if not token:
            break
    assert seen == ids
    assert await _code(csi.controller.ListVolumes(
        csi_pb2.ListVolumesRequest(starting_token="nonsense"))) == grpc.StatusCode.ABORTED


async def test_stage_and_publish_are_bind_mounts_that_carry_the_data(csi: Stubs, tmp_path: Path) -> None:
    volume = (await csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(name="data", volume_capabilities=[cap()]))).volume
    staging, rw, ro = tmp_path / "staging", tmp_path / "pods" / "a" / "mount", tmp_path / "pods" / "b" / "mount"
    stage = csi_pb2.NodeStageVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                           volume_capability=cap())
    await csi.node.NodeStageVolume(stage)
    await csi.node.NodeStageVolume(stage)  # idempotent: still one mount
    assert mounts.mount_points(staging) == [staging]
    publish = csi_pb2.NodePublishVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                               target_path=str(rw), volume_capability=cap())
    await csi.node.NodePublishVolume(publish)
    await csi.node.NodePublishVolume(publish)
    (rw / "hello").write_text("kept")
    read_only = csi_pb2.NodePublishVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                                 target_path=str(ro), volume_capability=cap(), readonly=True)
    await csi.node.NodePublishVolume(read_only)
    assert (ro / "hello").read_text() == "kept"
    with pytest.raises(OSError) as err:
        (ro / "other").write_text("no")
    assert err.value.errno == errno.EROFS
    # Deleting a volume still in use is refused: the kubelet unpublishes first.
    assert await _code(csi.controller.DeleteVolume(
        csi_pb2.DeleteVolumeRequest(volume_id=volume.volume_id))) == grpc.StatusCode.FAILED_PRECONDITION
    for target in (rw, ro):
        await csi.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume.volume_id,
                                                                             target_path=str(target)))
        assert not target.exists()  # the spec: the driver removes the target it made
    await csi.node.NodeUnstageVolume(csi_pb2.NodeUnstageVolumeRequest(volume_id=volume.volume_id,
                                                                     staging_target_path=str(staging)))
    assert mounts.mount_points(tmp_path) == []
    await csi.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume.volume_id))
    await csi.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume.volume_id))  # gone: still OK
    assert not any((tmp_path / "state" / "volumes").iterdir())


async def test_publish_needs_staging_and_single_writer_stays_single(csi: Stubs, tmp_path: Path) -> None:
    single = cap(_Mode.SINGLE_NODE_SINGLE_WRITER)
    volume = (await csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(name="one", volume_capabilities=[single]))).volume
    staging = tmp_path / "staging"
    publish = csi_pb2.NodePublishVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                               target_path=str(tmp_path / "t1"), volume_capability=single)
    assert await _code(csi.node.NodePublishVolume(publish)) == grpc.StatusCode.FAILED_PRECONDITION  # not staged
    await csi.node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging), volume_capability=single))
    await csi.node.NodePublishVolume(publish)
    second = csi_pb2.NodePublishVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                              target_path=str(tmp_path / "t2"), volume_capability=single)
    assert await _code(csi.node.NodePublishVolume(second)) == grpc.StatusCode.FAILED_PRECONDITION
    unknown = csi_pb2.NodePublishVolumeRequest(volume_id="nope", staging_target_path=str(staging),
                                               target_path=str(tmp_path / "t3"), volume_capability=single)
    assert await _code(csi.node.NodePublishVolume(unknown)) == grpc.StatusCode.NOT_FOUND


async def test_snapshot_and_clone_copy_the_content(csi: Stubs, tmp_path: Path) -> None:
    volume = (await csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(name="src", volume_capabilities=[cap()]))).volume
    (tmp_path / "state" / "volumes" / volume.volume_id / "file").write_text("v1")
    snap = (await csi.controller.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="snap", source_volume_id=volume.volume_id))).snapshot
    assert snap.ready_to_use and snap.source_volume_id == volume.volume_id
    (tmp_path / "state" / "volumes" / volume.volume_id / "file").write_text("v2")
    source = csi_pb2.VolumeContentSource(snapshot=csi_pb2.VolumeContentSource.SnapshotSource(
        snapshot_id=snap.snapshot_id))
    restored = (await csi.controller.CreateVolume(csi_pb2.CreateVolumeRequest(
        name="restored", volume_capabilities=[cap()], volume_content_source=source))).volume
    assert (tmp_path / "state" / "volumes" / restored.volume_id / "file").read_text() == "v1"
    assert restored.content_source.snapshot.snapshot_id == snap.snapshot_id
    clone = csi_pb2.VolumeContentSource(volume=csi_pb2.VolumeContentSource.VolumeSource(volume_id=volume.volume_id))
    cloned = (await csi.controller.CreateVolume(csi_pb2.CreateVolumeRequest(
        name="clone", volume_capabilities=[cap()], volume_content_source=clone))).volume
    assert (tmp_path / "state" / "volumes" / cloned.volume_id / "file").read_text() == "v2"
    missing = csi_pb2.VolumeContentSource(snapshot=csi_pb2.VolumeContentSource.SnapshotSource(snapshot_id="nope"))
    assert await _code(csi.controller.CreateVolume(csi_pb2.CreateVolumeRequest(
        name="x", volume_capabilities=[cap()], volume_content_source=missing))) == grpc.StatusCode.NOT_FOUND
    listed = await csi.controller.ListSnapshots(csi_pb2.ListSnapshotsRequest(source_volume_id=volume.volume_id))
    assert [e.snapshot.snapshot_id for e in listed.entries] == [snap.snapshot_id]


async def test_expansion_grows_the_bookkeeping(csi: Stubs) -> None:
    volume = (await csi.controller.CreateVolume(
        csi_pb2.CreateVolumeRequest(name="grow", volume_capabilities=[cap()]))).volume
    grown = await csi.controller.ControllerExpandVolume(csi_pb2.ControllerExpandVolumeRequest(
        volume_id=volume.volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=3 * GiB)))
    assert grown.capacity_bytes == 3 * GiB and not grown.node_expansion_required
    got = await csi.controller.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=volume.volume_id))
    assert got.volume.capacity_bytes == 3 * GiB


async def test_a_restarted_driver_knows_its_volumes_and_mounts(tmp_path: Path) -> None:
    driver, socket = await _serve(tmp_path)
    staging = tmp_path / "staging"
    try:
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            stubs = Stubs(channel)
            volume = (await stubs.controller.CreateVolume(
                csi_pb2.CreateVolumeRequest(name="kept", volume_capabilities=[cap()]))).volume
            await stubs.node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest(
                volume_id=volume.volume_id, staging_target_path=str(staging), volume_capability=cap()))
        await driver.stop()
        driver, socket = await _serve(tmp_path)
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            stubs = Stubs(channel)
            again = await stubs.controller.CreateVolume(
                csi_pb2.CreateVolumeRequest(name="kept", volume_capabilities=[cap()]))
            assert again.volume.volume_id == volume.volume_id
            # Still staged: publishing works without staging again, deleting is refused.
            await stubs.node.NodePublishVolume(csi_pb2.NodePublishVolumeRequest(
                volume_id=volume.volume_id, staging_target_path=str(staging), target_path=str(tmp_path / "t"),
                volume_capability=cap()))
            assert await _code(stubs.controller.DeleteVolume(
                csi_pb2.DeleteVolumeRequest(volume_id=volume.volume_id))) == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        await driver.stop()
        for m in reversed(mounts.mount_points(tmp_path)):
            mounts.unmount(m, lazy=True)
    assert os.path.isdir(tmp_path / "state" / "volumes" / volume.volume_id)

"""The kubelet's CSI client (upstream's pkg/volume/csi): the drivers registered on this node,
their node's entry in CSINode (and the Node's topology labels and `csi.volume.kubernetes.io/nodeid`
annotation), and a volume's life on the node:

    stage    NodeStageVolume   <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount
    publish  NodePublishVolume <pods>/<uid>/volumes/kubernetes.io~csi/<pv>/mount
    and back: NodeUnpublishVolume, then NodeUnstageVolume once no pod on the node uses it.

Each step leaves a `vol_data.json` beside the path (the driver, the volume handle, the
volume's name), so that a restarted kubelet finds what it had mounted — for pods deleted
while it was down too — and takes it down through the right driver.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubeling import errors, mounts
from kubeling.client import Client
from kubeling.errors import rpc_error_text
from kubeling.unixsocket import SocketAddress
from kubeling.volumeutil import attachment_name
from protos.csi.v1 import csi_pb2, csi_pb2_grpc
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2

__all__ = ["CSIDrivers", "Driver", "CSIError", "PLUGIN_DIR", "VOL_DATA", "NODE_ID_ANNOTATION"]

log = logging.getLogger(__name__)

PLUGIN_DIR = "kubernetes.io~csi"
VOL_DATA = "vol_data.json"
NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
_Mode = csi_pb2.VolumeCapability.AccessMode
_RPC = csi_pb2.NodeServiceCapability.RPC
# The kubelet's mapping of a claim's access modes to the one CSI mode it asks for
# (upstream's asCSIAccessModeV1, with SINGLE_NODE_MULTI_WRITER support).
_MODES = {"ReadWriteOncePod": _Mode.SINGLE_NODE_SINGLE_WRITER, "ReadWriteOnce": _Mode.SINGLE_NODE_MULTI_WRITER,
          "ReadOnlyMany": _Mode.MULTI_NODE_READER_ONLY, "ReadWriteMany": _Mode.MULTI_NODE_MULTI_WRITER}


class CSIError(Exception):
    """A CSI step failed (the pod waits: FailedMount, retried)."""



@dataclass
class Driver:
    name: str
    endpoint: str
    node_id: str = ""
    topology: dict[str, str] = field(default_factory=dict)
    max_volumes: int = 0
    stage: bool = False  # STAGE_UNSTAGE_VOLUME
    multi_writer: bool = False  # SINGLE_NODE_MULTI_WRITER: the newer single-node access modes
    channel: grpc.aio.Channel | None = None
    address: SocketAddress | None = None  # held while the channel may connect

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        if self.address is not None:
            self.address.close()

    @property
    def node(self) -> csi_pb2_grpc.NodeStub:
        assert self.channel is not None
        return csi_pb2_grpc.NodeStub(self.channel)


def _access_mode(modes: list[str], multi_writer: bool) -> csi_pb2.VolumeCapability.AccessMode.Mode:
    """The mode the kubelet asks for: SINGLE_NODE_MULTI_WRITER for ReadWriteOnce only when the
    driver says it knows the newer single-node modes, as upstream."""
    for mode in ("ReadWriteOncePod", "ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"):
        if mode in modes:
            chosen = _MODES[mode]
            if not multi_writer and chosen in (_Mode.SINGLE_NODE_MULTI_WRITER, _Mode.SINGLE_NODE_SINGLE_WRITER):
                return _Mode.SINGLE_NODE_WRITER
            return chosen
    return _Mode.SINGLE_NODE_WRITER


@dataclass
class CSIDrivers:
    """The drivers registered with this kubelet, and the volume steps through them."""

    client: Client
    node_name: str
    plugins_dir: Path  # <root>/plugins
    pods_dir: Path
    timeout: float = 60.0  # per CSI call (upstream's csiTimeout is 2 minutes)
    drivers: dict[str, Driver] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _objects: dict[str, storage_pb2.CSIDriver] = field(default_factory=dict)  # CSIDriver objects by name

    # ------------------------------------------------------------ registration

    async def register(self, name: str, endpoint: str, versions: list[str]) -> None:
        """A driver the plugin watcher found: validate, ask it who it is on this node, record
        it in CSINode and on the Node (raises CSIError: the registration is refused)."""
        if not any(v.split(".")[0] in ("1", "v1") for v in versions):
            raise CSIError(f"none of the versions {versions} of driver {name} is supported (1.x)")
        address = SocketAddress(endpoint)
        channel = grpc.aio.insecure_channel(address.target())
        driver = Driver(name, str(address.path), channel=channel, address=address)
        try:
            info = await driver.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=self.timeout)
            caps = await driver.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest(), timeout=self.timeout)
        except grpc.aio.AioRpcError as err:
            await driver.close()
            raise CSIError(f"driver {name}: NodeGetInfo: {rpc_error_text(err)}") from None
        driver.node_id = info.node_id
        driver.topology = dict(info.accessible_topology.segments)
        driver.max_volumes = info.max_volumes_per_node
        kinds = {c.rpc.type for c in caps.capabilities}
        driver.stage = _RPC.STAGE_UNSTAGE_VOLUME in kinds
        driver.multi_writer = _RPC.SINGLE_NODE_MULTI_WRITER in kinds
        old = self.drivers.get(name)
        self.drivers[name] = driver
        if old is not None:
            await old.close()
        await self._record(driver)
        log.info("node %s: CSI driver %s registered (node ID %s, topology %s)", self.node_name, name, driver.node_id,
                 driver.topology)

    async def deregister(self, name: str) -> None:
        driver = self.drivers.pop(name, None)
        if driver is None:
            return
        await driver.close()
        try:
            csinode = await self.client.csinodes.get(self.node_name)
            kept = [d for d in csinode.spec.drivers if d.name != name]
            del csinode.spec.drivers[:]
            csinode.spec.drivers.extend(kept)
            await self.client.csinodes.update(csinode)
        except errors.NotFound:
            pass
        log.info("node %s: CSI driver %s deregistered", self.node_name, name)

    async def ensure_csinode(self) -> storage_pb2.CSINode:
        """This node's CSINode, made if missing (owned by the Node, as upstream makes it)."""
        try:
            return await self.client.csinodes.get(self.node_name)
        except errors.NotFound:
            pass
        node = await self.client.nodes.get(self.node_name)
        csinode = storage_pb2.CSINode(metadata=meta_pb2.ObjectMeta(name=self.node_name, ownerReferences=[
            meta_pb2.OwnerReference(apiVersion="v1", kind="Node", name=node.metadata.name, uid=node.metadata.uid)]))
        try:
            return await self.client.csinodes.create(csinode)
        except errors.AlreadyExists:
            return await self.client.csinodes.get(self.node_name)

    async def _record(self, driver: Driver) -> None:
        for _ in range(5):  # conflicts with the node's own status writes: read again
            try:
                node = await self.client.nodes.get(self.node_name)
                ids = json.loads(node.metadata.annotations.get(NODE_ID_ANNOTATION, "{}") or "{}")
                if ids.get(driver.name) != driver.node_id or any(node.metadata.labels.get(k) != v
                                                                 for k, v in driver.topology.items()):
                    ids[driver.name] = driver.node_id
                    node.metadata.annotations[NODE_ID_ANNOTATION] = json.dumps(ids, sort_keys=True)
                    node.metadata.labels.update(driver.topology)
                    await self.client.nodes.update(node)
                csinode = await self.ensure_csinode()
                entry = storage_pb2.CSINodeDriver(name=driver.name, nodeID=driver.node_id,
                                                  topologyKeys=sorted(driver.topology))
                if driver.max_volumes > 0:
                    entry.allocatable.count = driver.max_volumes
                kept = [d for d in csinode.spec.drivers if d.name != driver.name]
                del csinode.spec.drivers[:]
                csinode.spec.drivers.extend([*kept, entry])
                await self.client.csinodes.update(csinode)
                return
            except errors.Conflict:
                continue
        raise CSIError(f"could not record driver {driver.name} in CSINode {self.node_name}: conflicts")

    async def close(self) -> None:
        for driver in self.drivers.values():
            await driver.close()
        self.drivers.clear()

    # ------------------------------------------------------------ volumes

    def _driver(self, name: str) -> Driver:
        driver = self.drivers.get(name)
        if driver is None:
            raise CSIError(f"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name {name} not "
                           "found in the list of registered CSI drivers")
        return driver

    async def driver_object(self, name: str) -> storage_pb2.CSIDriver | None:
        """The driver's CSIDriver object (cached once found: a driver's object rarely changes;
        a missing one is asked again next time)."""
        found = self._objects.get(name)
        if found is None:
            try:
                found = self._objects[name] = await self.client.csidrivers.get(name)
            except errors.NotFound:
                return None
        return found

    async def _attached(self, pv: core_pb2.PersistentVolume) -> dict[str, str]:
        """The publish context of the volume's attachment to this node; raises CSIError while
        its driver needs one that is not attached yet (upstream's WaitForAttach)."""
        obj = await self.driver_object(pv.spec.csi.driver)
        if obj is not None and obj.spec.HasField("attachRequired") and not obj.spec.attachRequired:
            return {}
        name = attachment_name(pv.metadata.name, pv.spec.csi.driver, self.node_name)
        try:
            attachment = await self.client.volumeattachments.get(name)
        except errors.NotFound:
            attachment = None
        if attachment is None or not attachment.status.attached:
            why = f": {attachment.status.attachError.message}" if attachment is not None and \
                attachment.status.attachError.message else ""
            raise CSIError(f'volume "{pv.metadata.name}" is not attached to node {self.node_name} yet (waiting for '
                           f"VolumeAttachment {name}){why}")
        return dict(attachment.status.attachmentMetadata)

    def staging_path(self, driver: str, handle: str) -> Path:
        digest = hashlib.sha256(handle.encode()).hexdigest()
        return self.plugins_dir / "kubernetes.io" / "csi" / driver / digest / "globalmount"

    def target_path(self, uid: str, volume_name: str) -> Path:
        return self.pods_dir / uid / "volumes" / PLUGIN_DIR / volume_name / "mount"

    async def set_up(self, uid: str, pv: core_pb2.PersistentVolume, read_only: bool) -> Path:
        """Stage (once per node) and publish the volume for the pod; the target path."""
        source = pv.spec.csi
        driver = self._driver(source.driver)
        data = {"driverName": source.driver, "volumeHandle": source.volumeHandle, "specVolID": pv.metadata.name,
                "nodeName": self.node_name, "volumeLifecycleMode": "Persistent"}
        capability = csi_pb2.VolumeCapability(
            mount=csi_pb2.VolumeCapability.MountVolume(fs_type=source.fsType, mount_flags=list(pv.spec.mountOptions)),
            access_mode=csi_pb2.VolumeCapability.AccessMode(mode=_access_mode(list(pv.spec.accessModes),
                                                                              driver.multi_writer)))
        target = self.target_path(uid, pv.metadata.name)
        publish_context = await self._attached(pv)
        async with self._lock:
            staging = self.staging_path(source.driver, source.volumeHandle)
            if driver.stage:
                staging.mkdir(parents=True, exist_ok=True)
                (staging.parent / VOL_DATA).write_text(json.dumps(data))
                try:
                    await driver.node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest(
                        volume_id=source.volumeHandle, staging_target_path=str(staging), volume_capability=capability,
                        volume_context=dict(source.volumeAttributes), publish_context=publish_context),
                        timeout=self.timeout)
                except grpc.aio.AioRpcError as err:
                    raise CSIError(f"MountVolume.MountDevice failed for volume \"{pv.metadata.name}\" : "
                                   f"{rpc_error_text(err)}") from None
            target.parent.mkdir(parents=True, exist_ok=True)
            (target.parent / VOL_DATA).write_text(json.dumps(data))
            try:
                await driver.node.NodePublishVolume(csi_pb2.NodePublishVolumeRequest(
                    volume_id=source.volumeHandle, staging_target_path=str(staging) if driver.stage else "",
                    target_path=str(target), volume_capability=capability, readonly=read_only or source.readOnly,
                    volume_context=dict(source.volumeAttributes), publish_context=publish_context),
                    timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                raise CSIError(f"MountVolume.SetUp failed for volume \"{pv.metadata.name}\" : "
                               f"{rpc_error_text(err)}") from None
        return target

    def published(self, uid: str | None = None) -> list[tuple[str, Path, dict[str, str]]]:
        """(pod uid, volume dir, vol_data) of every CSI volume published here (of one pod)."""
        out = []
        pods = [self.pods_dir / uid] if uid is not None else \
            (sorted(self.pods_dir.iterdir()) if self.pods_dir.is_dir() else [])
        for pod_dir in pods:
            base = pod_dir / "volumes" / PLUGIN_DIR
            if not base.is_dir():
                continue
            for volume_dir in sorted(base.iterdir()):
                try:
                    data = json.loads((volume_dir / VOL_DATA).read_text())
                except (OSError, ValueError):
                    data = {}
                out.append((pod_dir.name, volume_dir, data))
        return out

    async def tear_down(self, uid: str) -> None:
        """Unpublish every CSI volume of the pod, and unstage those no other pod here uses
        (raises CSIError: what is left is retried; nothing is deleted under a mount)."""
        async with self._lock:
            for _, volume_dir, data in self.published(uid):
                target = volume_dir / "mount"
                if data:
                    driver = self._driver(data["driverName"])
                    try:
                        await driver.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
                            volume_id=data["volumeHandle"], target_path=str(target)), timeout=self.timeout)
                    except grpc.aio.AioRpcError as err:
                        if err.code() != grpc.StatusCode.NOT_FOUND:  # a volume the driver no longer has
                            raise CSIError(f"UnmountVolume.TearDown failed for volume \"{data['specVolID']}\" : "
                                           f"{rpc_error_text(err)}") from None
                if mounts.is_mount_point(target):
                    mounts.unmount(target)  # a driver that answered but left it mounted
                if target.exists() and not mounts.mount_points(target):
                    shutil.rmtree(target, ignore_errors=True)
                (volume_dir / VOL_DATA).unlink(missing_ok=True)
                if volume_dir.is_dir() and not any(volume_dir.iterdir()):
                    volume_dir.rmdir()
                if data:
                    await self._unstage_unused(data)

    async def _unstage_unused(self, data: dict[str, str]) -> None:
        handle = data["volumeHandle"]
        if any(d.get("volumeHandle") == handle for _, _, d in self.published()):
            return  # another pod on this node still uses it
        driver = self._driver(data["driverName"])
        staging = self.staging_path(data["driverName"], handle)
        if not driver.stage or not staging.parent.exists():
            return
        try:
            await driver.node.NodeUnstageVolume(csi_pb2.NodeUnstageVolumeRequest(
                volume_id=handle, staging_target_path=str(staging)), timeout=self.timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.NOT_FOUND:
                raise CSIError(f"UnmountDevice failed for volume \"{data['specVolID']}\" : "
                               f"{rpc_error_text(err)}") from None
        if not mounts.mount_points(staging.parent):
            shutil.rmtree(staging.parent, ignore_errors=True)

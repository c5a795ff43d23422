"""What upstream's external-provisioner (with `--node-deployment`) and external-resizer
sidecars do for one node's driver, over the driver's own CSI socket:

- provision: a claim handed to this driver (the binder's `volume.kubernetes.io/storage-provisioner`
  annotation) and meant for this node (`volume.kubernetes.io/selected-node`, which the
  scheduler sets for WaitForFirstConsumer; for an Immediate class the first node's
  provisioner to write it takes the claim) becomes CreateVolume and a PersistentVolume
  `pvc-<claim uid>` pre-bound to the claim, with the node's topology as its node affinity;
- delete: a Released volume this driver made on this node, reclaim policy Delete, becomes
  DeleteVolume and then the PersistentVolume's deletion;
- resize: a bound claim asking more than its capacity, of a class that allows expansion,
  becomes ControllerExpandVolume, the volume's new capacity and the claim's.

A driver that answers an error or does not answer within `timeout` is told on the claim
(ProvisioningFailed, VolumeResizeFailed) or volume (VolumeFailedDelete) and retried with a
per-object backoff (5 ms doubling, at most a minute), as the sidecars do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from kubeling import errors, scheme
from kubeling.client import Client
from kubeling.errors import rpc_error_text
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import SharedInformers
from kubeling.quantity import Format, Quantity
from kubeling.timestamps import now
from kubeling.volumeutil import PROVISIONED_BY, SELECTED_NODE, STORAGE_PROVISIONER, storage_bytes
from kubeling.workqueue import Workers, WorkQueue
from protos.csi.v1 import csi_pb2, csi_pb2_grpc
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2

__all__ = ["Provisioner", "ProvisionerConfig", "access_mode", "quantity"]

log = logging.getLogger(__name__)

_Mode = csi_pb2.VolumeCapability.AccessMode
# upstream's external-provisioner: the Kubernetes access modes as CSI's
_ACCESS_MODES = {"ReadWriteOnce": _Mode.SINGLE_NODE_WRITER, "ReadWriteOncePod": _Mode.SINGLE_NODE_SINGLE_WRITER,
                 "ReadOnlyMany": _Mode.MULTI_NODE_READER_ONLY, "ReadWriteMany": _Mode.MULTI_NODE_MULTI_WRITER}
# StorageClass parameters for the sidecars themselves, not passed to the driver.
_RESERVED_PREFIX = "csi.storage.k8s.io/"
_FSTYPE = "csi.storage.k8s.io/fstype"
_FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"


def access_mode(mode: str) -> csi_pb2.VolumeCapability.AccessMode.Mode:
    return _ACCESS_MODES.get(mode, _Mode.UNKNOWN)


def quantity(n: int) -> str:
    """Bytes as a quantity the way upstream writes a provisioned volume's capacity (binary SI)."""
    return str(Quantity.from_int(n, Format.BINARY_SI))



@dataclass(frozen=True)
class ProvisionerConfig:
    driver: str  # the driver's name: a StorageClass's provisioner
    node: str  # the node this driver and its volumes are on
    topology_key: str  # the topology segment that names the node
    timeout: float = 30.0  # per CSI call
    workers: int = 2
    attach_required: bool = False  # what the CSIDriver object this process makes says


class Provisioner:
    def __init__(self, client: Client, channel: grpc.aio.Channel, config: ProvisionerConfig) -> None:
        self.client = client
        self.config = config
        self.controller = csi_pb2_grpc.ControllerStub(channel)
        self.informers = informers = SharedInformers(client)
        self.claims = informers.get(scheme.PERSISTENTVOLUMECLAIMS)
        self.volumes = informers.get(scheme.PERSISTENTVOLUMES)
        self.classes = informers.get(scheme.STORAGECLASSES)
        self.recorder = EventRecorder(client, f"{config.driver}_{config.node}", host=config.node)
        self.claim_queue = WorkQueue(f"provision-{config.node}", max_delay=60.0)
        self.volume_queue = WorkQueue(f"delete-{config.node}", max_delay=60.0)
        self.workers = [Workers(self.claim_queue, self.sync_claim, config.workers),
                        Workers(self.volume_queue, self.sync_volume, config.workers)]
        self.claims.add_handler(on_add=self._claim, on_update=lambda old, new: self._claim(new))
        self.volumes.add_handler(on_add=self._volume, on_update=lambda old, new: self._volume(new))

    def _claim(self, claim: core_pb2.PersistentVolumeClaim) -> None:
        self.claim_queue.add(f"{claim.metadata.namespace}/{claim.metadata.name}")

    def _volume(self, volume: core_pb2.PersistentVolume) -> None:
        if volume.metadata.annotations.get(PROVISIONED_BY) == self.config.driver:
            self.volume_queue.add(volume.metadata.name)

    async def start(self) -> None:
        await self.informers.start(60.0)
        await self._ensure_driver_object()
        for w in self.workers:
            w.start()

    async def stop(self) -> None:
        for w in self.workers:
            await w.stop()
        await self.recorder.flush()
        await self.informers.stop()

    async def _ensure_driver_object(self) -> None:
        """The CSIDriver object a deployment of the driver brings: attach step or not (as
        configured), the kubelet changes a volume's ownership for fsGroup (File), no pod info
        on mount."""
        driver = storage_pb2.CSIDriver(
            metadata=meta_pb2.ObjectMeta(name=self.config.driver), spec=storage_pb2.CSIDriverSpec(
                attachRequired=self.config.attach_required, podInfoOnMount=False, fsGroupPolicy="File",
                volumeLifecycleModes=["Persistent"]))
        try:
            await self.client.csidrivers.create(driver)
        except errors.AlreadyExists:
            pass

    def _ours(self, claim: core_pb2.PersistentVolumeClaim) -> storage_pb2.StorageClass | None:
        """The claim's class when this driver provisions it, else None."""
        if claim.metadata.annotations.get(STORAGE_PROVISIONER) != self.config.driver:
            return None
        sc = self.classes.store.get(claim.spec.storageClassName) if claim.spec.storageClassName else None
        return sc if sc is not None and sc.provisioner == self.config.driver else None

    # ---------------------------------------------------------------- claims

    async def sync_claim(self, key: str) -> None:
        claim = self.claims.store.get(key)
        if claim is None or claim.metadata.HasField("deletionTimestamp"):
            return
        sc = self._ours(claim)
        if sc is None:
            return
        if claim.spec.volumeName:
            if claim.status.phase == "Bound":
                await self._maybe_resize(claim, sc)
            return
        selected = claim.metadata.annotations.get(SELECTED_NODE, "")
        if not selected:
            if sc.volumeBindingMode == "WaitForFirstConsumer":
                return  # the scheduler picks the node
            claim = await self._take(claim)
            if claim is None:
                return
            selected = self.config.node
        if selected != self.config.node:
            return
        await self._provision(claim, sc)

    async def _take(self, claim: core_pb2.PersistentVolumeClaim) -> core_pb2.PersistentVolumeClaim | None:
        """An Immediate claim: this node's, if its write of selected-node is the first."""
        claim = await self.client.persistentvolumeclaims.get(claim.metadata.name, claim.metadata.namespace)
        if SELECTED_NODE in claim.metadata.annotations:
            return None
        claim.metadata.annotations[SELECTED_NODE] = self.config.node
        try:
            return await self.client.persistentvolumeclaims.update(claim)
        except errors.Conflict:
            return None  # another node's provisioner wrote first (or the claim changed: its next sync)

    async def _provision(self, claim: core_pb2.PersistentVolumeClaim, sc: storage_pb2.StorageClass) -> None:
        name = f"pvc-{claim.metadata.uid}"
        if self.volumes.store.get(name) is not None:
            return
        ref = f"{claim.metadata.namespace}/{claim.metadata.name}"
        self.recorder.object_event(claim, "v1", "PersistentVolumeClaim", NORMAL, "Provisioning",
                                   f'External provisioner is provisioning volume for claim "{ref}"')
        request = csi_pb2.CreateVolumeRequest(
            name=name, parameters={k: v for k, v in sc.parameters.items() if not k.startswith(_RESERVED_PREFIX)},
            capacity_range=csi_pb2.CapacityRange(required_bytes=storage_bytes(claim.spec.resources.requests),
                                                 limit_bytes=storage_bytes(claim.spec.resources.limits)))
        fs_type = sc.parameters.get(_FSTYPE, "")
        for mode in claim.spec.accessModes:
            request.volume_capabilities.add(
                mount=csi_pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(sc.mountOptions)),
                access_mode=csi_pb2.VolumeCapability.AccessMode(mode=access_mode(mode)))
        here = csi_pb2.Topology(segments={self.config.topology_key: self.config.node})
        request.accessibility_requirements.requisite.append(here)
        request.accessibility_requirements.preferred.append(here)
        source = await self._content_source(claim)
        if source is not None:
            request.volume_content_source.CopyFrom(source)
        try:
            answer = await self.controller.CreateVolume(request, timeout=self.config.timeout)
        except grpc.aio.AioRpcError as err:
            self.recorder.object_event(
                claim, "v1", "PersistentVolumeClaim", WARNING, "ProvisioningFailed",
                f'failed to provision volume with StorageClass "{sc.metadata.name}": {rpc_error_text(err)}')
            raise RuntimeError(f"CreateVolume for {ref}: {err.code().name}: {err.details()}") from None
        await self._create_volume(claim, sc, name, answer.volume)
        self.recorder.object_event(claim, "v1", "PersistentVolumeClaim", NORMAL, "ProvisioningSucceeded",
                                   f"Successfully provisioned volume {name}")
        log.info("provisioned %s for claim %s on node %s", name, ref, self.config.node)

    async def _content_source(self, claim: core_pb2.PersistentVolumeClaim) -> csi_pb2.VolumeContentSource | None:
        """A clone of another claim of this driver (dataSource kind PersistentVolumeClaim)."""
        ds = claim.spec.dataSource
        if not claim.spec.HasField("dataSource"):
            return None
        if ds.kind != "PersistentVolumeClaim" or ds.apiGroup:
            raise errors.Invalid(f"data source {ds.kind} {ds.name}: only PersistentVolumeClaim clones are supported")
        parent = await self.client.persistentvolumeclaims.get(ds.name, claim.metadata.namespace)
        volume = await self.client.persistentvolumes.get(parent.spec.volumeName) if parent.spec.volumeName else None
        if volume is None or not volume.spec.HasField("csi") or volume.spec.csi.driver != self.config.driver:
            raise errors.Invalid(f"data source claim {ds.name} is not a bound volume of {self.config.driver}")
        return csi_pb2.VolumeContentSource(volume=csi_pb2.VolumeContentSource.VolumeSource(
            volume_id=volume.spec.csi.volumeHandle))

    async def _create_volume(self, claim: core_pb2.PersistentVolumeClaim, sc: storage_pb2.StorageClass, name: str,
                             made: csi_pb2.Volume) -> None:
        volume = core_pb2.PersistentVolume(
            metadata=meta_pb2.ObjectMeta(name=name, annotations={PROVISIONED_BY: self.config.driver}),
            spec=core_pb2.PersistentVolumeSpec(
                capacity={"storage": quantity(made.capacity_bytes or storage_bytes(claim.spec.resources.requests))},
                accessModes=list(claim.spec.accessModes),
                persistentVolumeReclaimPolicy=sc.reclaimPolicy or "Delete", storageClassName=sc.metadata.name,
                mountOptions=list(sc.mountOptions), volumeMode=claim.spec.volumeMode or "Filesystem",
                claimRef=meta_pb2.ObjectReference(kind="PersistentVolumeClaim", apiVersion="v1",
                                                  namespace=claim.metadata.namespace, name=claim.metadata.name,
                                                  uid=claim.metadata.uid,
                                                  resourceVersion=claim.metadata.resourceVersion),
                csi=core_pb2.CSIPersistentVolumeSource(driver=self.config.driver, volumeHandle=made.volume_id,
                                                       fsType=sc.parameters.get(_FSTYPE, ""),
                                                       volumeAttributes=dict(made.volume_context))))
        volume.metadata.finalizers.append(_FINALIZER)
        for topology in made.accessible_topology:
            term = volume.spec.nodeAffinity.required.nodeSelectorTerms.add()
            for key, value in sorted(topology.segments.items()):
                term.matchExpressions.add(key=key, operator="In", values=[value])
        try:
            await self.client.persistentvolumes.create(volume)
        except errors.AlreadyExists:
            pass

    # ---------------------------------------------------------------- resize

    async def _maybe_resize(self, claim: core_pb2.PersistentVolumeClaim, sc: storage_pb2.StorageClass) -> None:
        wanted, have = storage_bytes(claim.spec.resources.requests), storage_bytes(claim.status.capacity)
        if wanted <= have or not sc.allowVolumeExpansion:
            return
        volume = self.volumes.store.get(claim.spec.volumeName)
        if volume is None or not self._here(volume):
            return
        # The informer's copy may predate this resizer's last write: ask the apiserver
        # before resizing (again).
        claim = await self.client.persistentvolumeclaims.get(claim.metadata.name, claim.metadata.namespace)
        wanted, have = storage_bytes(claim.spec.resources.requests), storage_bytes(claim.status.capacity)
        if wanted <= have:
            return
        self.recorder.object_event(claim, "v1", "PersistentVolumeClaim", NORMAL, "Resizing",
                                   f"External resizer is resizing volume {volume.metadata.name}")
        await self._resize_status(claim, quantity(wanted), "ControllerResizeInProgress", resizing=True)
        try:
            answer = await self.controller.ControllerExpandVolume(csi_pb2.ControllerExpandVolumeRequest(
                volume_id=volume.spec.csi.volumeHandle, capacity_range=csi_pb2.CapacityRange(required_bytes=wanted)),
                timeout=self.config.timeout)
        except grpc.aio.AioRpcError as err:
            self.recorder.object_event(
                claim, "v1", "PersistentVolumeClaim", WARNING, "VolumeResizeFailed",
                f'resize volume "{volume.metadata.name}" by resizer "{self.config.driver}" failed: '
                f"{rpc_error_text(err)}")
            # upstream's: a request the driver can never serve is Infeasible (the user may
            # ask for less again); anything else stays in progress and is retried
            if err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE):
                await self._resize_status(claim, quantity(wanted), "ControllerResizeInfeasible", resizing=False)
            raise RuntimeError(f"ControllerExpandVolume {volume.metadata.name}: {err.details()}") from None
        size = quantity(max(answer.capacity_bytes, wanted))
        fresh = await self.client.persistentvolumes.get(volume.metadata.name)
        fresh.spec.capacity["storage"] = size
        await self.client.persistentvolumes.update(fresh)
        claim = await self.client.persistentvolumeclaims.get(claim.metadata.name, claim.metadata.namespace)
        claim.status.capacity["storage"] = size
        claim.status.allocatedResources["storage"] = size
        claim.status.allocatedResourceStatuses.pop("storage", None)
        kept = [c for c in claim.status.conditions if c.type not in ("Resizing", "FileSystemResizePending")]
        del claim.status.conditions[:]  # done: a directory has no node step (no FileSystemResizePending)
        claim.status.conditions.extend(kept)
        await self.client.persistentvolumeclaims.update_status(claim)
        self.recorder.object_event(claim, "v1", "PersistentVolumeClaim", NORMAL, "VolumeResizeSuccessful",
                                   "Resize volume succeeded")

    async def _resize_status(self, claim: core_pb2.PersistentVolumeClaim, size: str, state: str, *,
                             resizing: bool) -> None:
        """allocatedResources and allocatedResourceStatuses, and the Resizing condition, as
        upstream's external-resizer writes them while it works."""
        fresh = await self.client.persistentvolumeclaims.get(claim.metadata.name, claim.metadata.namespace)
        fresh.status.allocatedResources["storage"] = size
        fresh.status.allocatedResourceStatuses["storage"] = state
        kept = [c for c in fresh.status.conditions if c.type != "Resizing"]
        del fresh.status.conditions[:]
        fresh.status.conditions.extend(kept)
        if resizing:
            fresh.status.conditions.add(type="Resizing", status="True", lastTransitionTime=now())
        await self.client.persistentvolumeclaims.update_status(fresh)

    # ---------------------------------------------------------------- volumes

    def _here(self, volume: core_pb2.PersistentVolume) -> bool:
        """Whether the volume's directory is on this node (its node affinity names it)."""
        for term in volume.spec.nodeAffinity.required.nodeSelectorTerms:
            for req in term.matchExpressions:
                if req.key == self.config.topology_key and self.config.node in req.values:
                    return True
        return False

    async def sync_volume(self, key: str) -> None:
        volume = self.volumes.store.get(key)
        if volume is None or volume.metadata.annotations.get(PROVISIONED_BY) != self.config.driver:
            return
        if not self._here(volume) or not volume.spec.HasField("csi"):
            return
        deleting = volume.metadata.HasField("deletionTimestamp")
        released = volume.status.phase in ("Released", "Failed") and \
            volume.spec.persistentVolumeReclaimPolicy == "Delete"
        if not released and not deleting:
            return
        if deleting and volume.spec.persistentVolumeReclaimPolicy != "Delete":
            await self._drop_finalizer(volume)  # Retain: the directory stays, the object may go
            return
        try:
            await self.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume.spec.csi.volumeHandle),
                                               timeout=self.config.timeout)
        except grpc.aio.AioRpcError as err:
            self.recorder.object_event(volume, "v1", "PersistentVolume", WARNING, "VolumeFailedDelete",
                                       rpc_error_text(err))
            raise RuntimeError(f"DeleteVolume {key}: {err.details()}") from None
        await self._drop_finalizer(volume)
        try:
            await self.client.persistentvolumes.delete(key)
        except errors.NotFound:
            pass
        log.info("deleted volume %s (%s) on node %s", key, volume.spec.csi.volumeHandle, self.config.node)

    async def _drop_finalizer(self, volume: core_pb2.PersistentVolume) -> None:
        if _FINALIZER not in volume.metadata.finalizers:
            return
        try:
            fresh = await self.client.persistentvolumes.get(volume.metadata.name)
        except errors.NotFound:
            return
        if _FINALIZER in fresh.metadata.finalizers:
            fresh.metadata.finalizers.remove(_FINALIZER)
            await self.client.persistentvolumes.update(fresh)


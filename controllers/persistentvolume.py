"""The persistent volume binder, as upstream's pkg/controller/volume/persistentvolume
(pv_controller.go): it binds claims to volumes and keeps both sides' phases true.

- A claim without a volume gets the smallest Available volume that satisfies it (same
  class, enough capacity, its access modes, volume mode, selector), or one pre-bound to it
  by `claimRef`; a claim naming `volumeName` gets that volume if it is free.
- A claim whose class binds `WaitForFirstConsumer` waits for the scheduler: the scheduler
  pre-binds a volume (claimRef) or picks a node (`volume.kubernetes.io/selected-node`).
- A claim no volume satisfies and whose class names a provisioner is handed to it (the
  `volume.kubernetes.io/storage-provisioner` annotation); an external provisioner (a CSI
  driver's) creates the volume pre-bound to the claim.
- A volume whose claim is gone is Released, then reclaimed: Retain keeps it; Delete of a
  volume an external provisioner made is that provisioner's; anything else cannot be
  deleted here (Failed, with upstream's event).
- A bound claim whose volume is gone is Lost.

Phases and annotations are upstream's (`pv.kubernetes.io/bind-completed`,
`pv.kubernetes.io/bound-by-controller`, `pv.kubernetes.io/provisioned-by`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import Informer
from kubeling.volumeutil import (
    BETA_STORAGE_PROVISIONER,
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    YES,
    claim_class,
    claimed_by,
    find_best_match,
    satisfies,
)
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2

__all__ = ["PersistentVolumeController", "delayed_binding"]

log = logging.getLogger(__name__)

def delayed_binding(claim: core_pb2.PersistentVolumeClaim, classes: Informer[storage_pb2.StorageClass]) -> bool:
    """Whether the claim's class binds WaitForFirstConsumer (upstream's IsDelayBindingMode)."""
    name = claim_class(claim)
    sc = classes.store.get(name) if name else None
    return sc is not None and sc.volumeBindingMode == "WaitForFirstConsumer"


@dataclass
class _Said:
    """The last event said about an object, so that a claim waiting is told once, not every sync."""

    reason: str = ""
    message: str = ""


class PersistentVolumeController:
    def __init__(self, client: Client, volumes: Informer[core_pb2.PersistentVolume],
                 claims: Informer[core_pb2.PersistentVolumeClaim], classes: Informer[storage_pb2.StorageClass],
                 recorder: EventRecorder, workers: int = 2) -> None:
        self.client = client
        self.volumes = volumes
        self.claims = claims
        self.classes = classes
        self.recorder = recorder
        self.claim_queue = WorkQueue("persistentvolume-claims")
        self.volume_queue = WorkQueue("persistentvolume-volumes")
        self.workers = [Workers(self.claim_queue, self.sync_claim, workers),
                        Workers(self.volume_queue, self.sync_volume, workers)]
        self._said: dict[str, _Said] = {}
        volumes.add_handler(on_add=self._volume_changed, on_update=lambda old, new: self._volume_changed(new),
                            on_delete=self._volume_changed)
        claims.add_handler(on_add=self._claim_changed, on_update=lambda old, new: self._claim_changed(new),
                           on_delete=self._claim_changed)
        classes.add_handler(on_add=lambda sc: self.resync(), on_update=lambda old, new: self.resync())

    def resync(self) -> None:
        """Every object again (upstream resyncs every 15 s: a claim may wait on anything)."""
        for key in self.claims.store.keys():
            self.claim_queue.add(key)
        for key in self.volumes.store.keys():
            self.volume_queue.add(key)

    async def resync_step(self) -> None:
        self.resync()

    def _volume_changed(self, volume: core_pb2.PersistentVolume) -> None:
        self.volume_queue.add(volume.metadata.name)
        if volume.spec.HasField("claimRef"):
            self.claim_queue.add(f"{volume.spec.claimRef.namespace}/{volume.spec.claimRef.name}")
        else:
            # a volume made free: claims still waiting may take it
            for claim in self.claims.store.list():
                if not claim.spec.volumeName:
                    self.claim_queue.add(f"{claim.metadata.namespace}/{claim.metadata.name}")

    def _claim_changed(self, claim: core_pb2.PersistentVolumeClaim) -> None:
        self.claim_queue.add(f"{claim.metadata.namespace}/{claim.metadata.name}")
        if claim.spec.volumeName:
            self.volume_queue.add(claim.spec.volumeName)
        for volume in self.volumes.store.list():
            if claimed_by(volume, claim) or (volume.spec.claimRef.name == claim.metadata.name
                                              and volume.spec.claimRef.namespace == claim.metadata.namespace):
                self.volume_queue.add(volume.metadata.name)

    def _event(self, obj: core_pb2.PersistentVolumeClaim | core_pb2.PersistentVolume, kind: str, reason: str,
               message: str) -> None:
        key = f"{obj.metadata.namespace}/{obj.metadata.name}"
        said = self._said.setdefault(key, _Said())
        if (said.reason, said.message) == (reason, message):
            return
        said.reason, said.message = reason, message
        if isinstance(obj, core_pb2.PersistentVolumeClaim):
            self.recorder.object_event(obj, "v1", "PersistentVolumeClaim", kind, reason, message)
        else:
            self.recorder.object_event(obj, "v1", "PersistentVolume", kind, reason, message)

    # ---------------------------------------------------------------- claims

    async def sync_claim(self, key: str) -> None:
        claim = self.claims.store.get(key)
        if claim is None:
            self._said.pop(key, None)
            return
        if claim.metadata.annotations.get(BIND_COMPLETED) != YES:
            await self._sync_unbound_claim(claim)
        else:
            await self._sync_bound_claim(claim)

    async def _sync_unbound_claim(self, claim: core_pb2.PersistentVolumeClaim) -> None:
        if claim.spec.volumeName:
            volume = self.volumes.store.get(claim.spec.volumeName)
            if volume is None:
                self._event(claim, WARNING, "FailedBinding",
                            f'volume "{claim.spec.volumeName}" requested by claim not found')
                await self._claim_phase(claim, "Pending")
                return
            if volume.spec.HasField("claimRef") and not claimed_by(volume, claim):
                self._event(claim, WARNING, "FailedBinding",
                            f'volume "{volume.metadata.name}" already bound to a different claim.')
                await self._claim_phase(claim, "Pending")
                return
            if not satisfies(volume, claim):
                self._event(claim, WARNING, "VolumeMismatch",
                            "Cannot bind to requested volume \"%s\": requested PV is too small or its class, access "
                            "modes or volume mode differ" % volume.metadata.name)
                await self._claim_phase(claim, "Pending")
                return
            await self._bind(volume, claim)
            return
        delayed = delayed_binding(claim, self.classes)
        # Static volumes for a delayed claim are chosen by the scheduler, which pre-binds
        # one (claimRef) on the node it picks; only those are taken here.
        candidates = self.volumes.store.list()
        volume = find_best_match(claim, candidates)
        if volume is not None and (not delayed or claimed_by(volume, claim)):
            await self._bind(volume, claim)
            return
        if delayed and SELECTED_NODE not in claim.metadata.annotations:
            self._event(claim, NORMAL, "WaitForFirstConsumer", "waiting for first consumer to be created before "
                                                               "binding")
            await self._claim_phase(claim, "Pending")
            return
        class_name = claim_class(claim)
        sc = self.classes.store.get(class_name) if class_name else None
        if not class_name:
            self._event(claim, NORMAL, "FailedBinding", "no persistent volumes available for this claim and no "
                                                        "storage class is set")
        elif sc is None:
            self._event(claim, WARNING, "ProvisioningFailed", f'storageclass.storage.k8s.io "{class_name}" not found')
        elif sc.provisioner == "kubernetes.io/no-provisioner":
            self._event(claim, NORMAL, "FailedBinding", "no persistent volumes available for this claim")
        else:
            await self._hand_to_provisioner(claim, sc)
        await self._claim_phase(claim, "Pending")

    async def _hand_to_provisioner(self, claim: core_pb2.PersistentVolumeClaim, sc: storage_pb2.StorageClass) -> None:
        """Upstream's provisionClaim for an external provisioner: annotate, tell, and wait."""
        if claim.metadata.annotations.get(STORAGE_PROVISIONER) != sc.provisioner:
            def annotate(c: core_pb2.PersistentVolumeClaim) -> None:
                c.metadata.annotations[STORAGE_PROVISIONER] = sc.provisioner
                c.metadata.annotations[BETA_STORAGE_PROVISIONER] = sc.provisioner
            await self._write(self.client.persistentvolumeclaims, claim, annotate)
        self._event(claim, NORMAL, "ExternalProvisioning",
                    f"Waiting for a volume to be created either by the external provisioner '{sc.provisioner}' or "
                    "manually by the system administrator. If volume creation is delayed, please verify that the "
                    "provisioner is running and correctly registered.")

    async def _sync_bound_claim(self, claim: core_pb2.PersistentVolumeClaim) -> None:
        name = claim.spec.volumeName
        volume = self.volumes.store.get(name) if name else None
        if volume is None:
            if claim.status.phase != "Lost":
                self._event(claim, WARNING, "ClaimLost",
                            "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
                await self._claim_phase(claim, "Lost")
            return
        if not volume.spec.HasField("claimRef"):
            await self._bind(volume, claim)  # the volume lost its claimRef: bind it again
            return
        if claimed_by(volume, claim):
            await self._bind(volume, claim)  # both sides say so: make sure the phases do too
            return
        if claim.status.phase != "Lost":
            self._event(claim, WARNING, "ClaimMisbound",
                        "Two claims are bound to the same volume, this one is bound incorrectly")
            await self._claim_phase(claim, "Lost")

    async def _claim_phase(self, claim: core_pb2.PersistentVolumeClaim, phase: str) -> None:
        if claim.status.phase == phase:
            return

        def set_phase(c: core_pb2.PersistentVolumeClaim) -> None:
            c.status.phase = phase
            if phase != "Bound":
                c.status.ClearField("accessModes")
                c.status.ClearField("capacity")
        await self._write(self.client.persistentvolumeclaims, claim, set_phase, status=True)

    async def _bind(self, volume: core_pb2.PersistentVolume, claim: core_pb2.PersistentVolumeClaim) -> None:
        """Upstream's bind: the volume's claimRef, its phase Bound, the claim's volumeName and
        bind-completed, its phase Bound with the volume's access modes and capacity."""
        if not claimed_by(volume, claim) or volume.spec.claimRef.uid != claim.metadata.uid:
            fresh = await self.client.persistentvolumes.get(volume.metadata.name)
            if fresh.spec.HasField("claimRef") and not claimed_by(fresh, claim):
                raise errors.Conflict(f"volume {volume.metadata.name} was bound to another claim meanwhile")
            if not fresh.spec.HasField("claimRef"):
                fresh.metadata.annotations[BOUND_BY_CONTROLLER] = YES
            fresh.spec.claimRef.CopyFrom(meta_pb2.ObjectReference(
                kind="PersistentVolumeClaim", namespace=claim.metadata.namespace, name=claim.metadata.name,
                uid=claim.metadata.uid, apiVersion="v1", resourceVersion=claim.metadata.resourceVersion))
            volume = await self.client.persistentvolumes.update(fresh)
        def bound(v: core_pb2.PersistentVolume) -> None:
            v.status.phase = "Bound"
            v.status.ClearField("message")
            v.status.ClearField("reason")

        name = volume.metadata.name

        def bind_claim(c: core_pb2.PersistentVolumeClaim) -> None:
            if not c.spec.volumeName:
                c.metadata.annotations[BOUND_BY_CONTROLLER] = YES
            c.spec.volumeName = name
            c.metadata.annotations[BIND_COMPLETED] = YES

        # The volume's phase and the claim's volumeName are two objects: written together
        # (the volume's claimRef, already written, is what a restarted binder goes by).
        volume_write = self._write(self.client.persistentvolumes, volume, bound, status=True) \
            if volume.status.phase != "Bound" else None
        claim_write = self._write(self.client.persistentvolumeclaims, claim, bind_claim) \
            if claim.spec.volumeName != name or claim.metadata.annotations.get(BIND_COMPLETED) != YES else None
        written = await asyncio.gather(*(w for w in (volume_write, claim_write) if w is not None))
        if volume_write is not None:
            volume = written[0]
        if claim_write is not None:
            claim = written[-1]
        # The access modes and capacity only as the claim becomes Bound (upstream's
        # updateClaimStatus): later the resizer owns the capacity (a claim's filesystem may
        # differ from its volume's size on purpose).
        if claim.status.phase != "Bound":
            modes, capacity = list(volume.spec.accessModes), dict(volume.spec.capacity)

            def claim_bound(c: core_pb2.PersistentVolumeClaim) -> None:
                c.status.phase = "Bound"
                c.status.accessModes[:] = modes
                c.status.capacity.clear()
                c.status.capacity.update(capacity)
            await self._write(self.client.persistentvolumeclaims, claim, claim_bound, status=True)
            log.info("bound claim %s/%s to volume %s", claim.metadata.namespace, claim.metadata.name,
                     volume.metadata.name)

    async def _write(self, resource: Any, cached: Any, change: Callable[[Any], None], *, status: bool = False) -> Any:
        """Write `change` of a copy of the informer's object (the cache is never changed in
        place); on a conflict (the cache was behind) read the object and write once more."""
        copy = type(cached)()
        copy.CopyFrom(cached)
        change(copy)
        write = resource.update_status if status else resource.update
        try:
            return await write(copy)
        except errors.Conflict:
            fresh = await resource.get(cached.metadata.name, cached.metadata.namespace)
            change(fresh)
            return await write(fresh)

    # ---------------------------------------------------------------- volumes

    async def sync_volume(self, key: str) -> None:
        volume = self.volumes.store.get(key)
        if volume is None:
            self._said.pop(f"/{key}", None)
            return
        if not volume.spec.HasField("claimRef"):
            await self._volume_phase(volume, "Available")
            return
        ref = volume.spec.claimRef
        if not ref.uid:
            await self._volume_phase(volume, "Available")  # pre-bound by a user: the claim's sync binds it
            return
        claim = self.claims.store.get(f"{ref.namespace}/{ref.name}")
        if claim is not None and claim.metadata.uid == ref.uid:
            if not claim.spec.volumeName:
                return  # binding in progress: the claim's sync finishes it
            if claim.spec.volumeName == volume.metadata.name:
                await self._volume_phase(volume, "Bound")
                return
            # the claim went to another volume: free this one if the controller bound it
            if volume.metadata.annotations.get(BOUND_BY_CONTROLLER) == YES:
                fresh = await self.client.persistentvolumes.get(volume.metadata.name)
                fresh.spec.ClearField("claimRef")
                fresh.metadata.annotations.pop(BOUND_BY_CONTROLLER, None)
                volume = await self.client.persistentvolumes.update(fresh)
                await self._volume_phase(volume, "Available")
            return
        if claim is None:
            try:  # the informer may lag: ask the apiserver before declaring the claim gone
                claim = await self.client.persistentvolumeclaims.get(ref.name, ref.namespace)
            except errors.NotFound:
                claim = None
            if claim is not None and claim.metadata.uid == ref.uid:
                return
        await self._reclaim(volume)

    async def _volume_phase(self, volume: core_pb2.PersistentVolume, phase: str, message: str = "") -> None:
        if volume.status.phase == phase:
            return  # upstream's updateVolumePhase: a phase already right is left alone, message and all
        def set_phase(v: core_pb2.PersistentVolume) -> None:
            v.status.phase = phase
            v.status.message = message
        await self._write(self.client.persistentvolumes, volume, set_phase, status=True)

    async def _reclaim(self, volume: core_pb2.PersistentVolume) -> None:
        """The claim is gone: Released, then the reclaim policy (upstream's reclaimVolume)."""
        if volume.status.phase not in ("Released", "Failed"):
            await self._volume_phase(volume, "Released")
            volume = self.volumes.store.get(volume.metadata.name) or volume
        policy = volume.spec.persistentVolumeReclaimPolicy
        if policy == "Retain":
            return  # kept for an administrator
        if policy == "Recycle":
            self._event(volume, WARNING, "VolumeFailedRecycle", "No recycler plugin found for the volume!")
            await self._volume_phase(volume, "Failed", "No recycler plugin found for the volume!")
            return
        provisioner = volume.metadata.annotations.get(PROVISIONED_BY, "")
        if provisioner and volume.spec.HasField("csi"):
            # upstream: "waiting for a volume to be deleted by the external provisioner"
            self._event(volume, NORMAL, "ExternalDeleting",
                        f"waiting for a volume to be deleted by the external provisioner '{provisioner}'")
            return
        message = f'error getting deleter volume plugin for volume "{volume.metadata.name}": no deletable volume ' \
                  "plugin matched"
        self._event(volume, WARNING, "VolumeFailedDelete", message)
        await self._volume_phase(volume, "Failed", message)


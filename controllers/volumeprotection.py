"""The pvc-protection and pv-protection controllers, as upstream's
pkg/controller/volume/pvcprotection and pvprotection: a claim being deleted keeps its
`kubernetes.io/pvc-protection` finalizer while a pod that is not finished uses it, and a
volume being deleted keeps `kubernetes.io/pv-protection` while it is Bound. The
StorageObjectInUseProtection admission plugin adds the finalizers at creation."""

from __future__ import annotations

import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, Informer
from kubeling.volumeutil import PV_PROTECTION, PVC_PROTECTION
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2

__all__ = ["PVCProtectionController", "PVProtectionController", "pod_uses_claim"]

log = logging.getLogger(__name__)



def pod_uses_claim(pod: core_pb2.Pod, claim: str) -> bool:
    """A pod that may still run with the claim mounted (upstream: not Succeeded or Failed)."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    return any(v.HasField("persistentVolumeClaim") and v.persistentVolumeClaim.claimName == claim
               for v in pod.spec.volumes)


class PVCProtectionController:
    def __init__(self, client: Client, claims: Informer[core_pb2.PersistentVolumeClaim],
                 pods: Informer[core_pb2.Pod], workers: int = 1) -> None:
        self.client = client
        self.claims = claims
        self.pods = pods
        self.queue = WorkQueue("pvc-protection")
        self.workers = Workers(self.queue, self.sync, workers)
        claims.add_handler(on_add=self._claim, on_update=lambda old, new: self._claim(new))
        pods.add_handler(on_update=lambda old, new: self._pod(new), on_delete=self._pod)

    def _claim(self, claim: core_pb2.PersistentVolumeClaim) -> None:
        if claim.metadata.HasField("deletionTimestamp") and PVC_PROTECTION in claim.metadata.finalizers:
            self.queue.add(f"{claim.metadata.namespace}/{claim.metadata.name}")

    def _pod(self, pod: core_pb2.Pod) -> None:
        for v in pod.spec.volumes:
            if v.HasField("persistentVolumeClaim"):
                claim = self.claims.store.get(f"{pod.metadata.namespace}/{v.persistentVolumeClaim.claimName}")
                if claim is not None:
                    self._claim(claim)

    async def sync(self, key: str) -> None:
        claim = self.claims.store.get(key)
        if claim is None or not claim.metadata.HasField("deletionTimestamp") \
                or PVC_PROTECTION not in claim.metadata.finalizers:
            return
        namespace, name = claim.metadata.namespace, claim.metadata.name
        if any(pod_uses_claim(p, name) for p in self.pods.store.by_index(INDEX_NAMESPACE, namespace)):
            return  # a pod's change or deletion brings the claim back
        # The informer may lag behind a pod just created: ask the apiserver, as upstream does.
        pods, _ = await self.client.pods.list_all(namespace)
        if any(pod_uses_claim(p, name) for p in pods):
            return
        try:
            fresh = await self.client.persistentvolumeclaims.get(name, namespace)
        except errors.NotFound:
            return
        if PVC_PROTECTION in fresh.metadata.finalizers:
            fresh.metadata.finalizers.remove(PVC_PROTECTION)
            await self.client.persistentvolumeclaims.update(fresh)
            log.info("claim %s/%s is no longer used: its protection finalizer is removed", namespace, name)


class PVProtectionController:
    def __init__(self, client: Client, volumes: Informer[core_pb2.PersistentVolume], workers: int = 1) -> None:
        self.client = client
        self.volumes = volumes
        self.queue = WorkQueue("pv-protection")
        self.workers = Workers(self.queue, self.sync, workers)
        volumes.add_handler(on_add=self._volume, on_update=lambda old, new: self._volume(new))

    def _volume(self, volume: core_pb2.PersistentVolume) -> None:
        if volume.metadata.HasField("deletionTimestamp") and PV_PROTECTION in volume.metadata.finalizers:
            self.queue.add(volume.metadata.name)

    async def sync(self, key: str) -> None:
        volume = self.volumes.store.get(key)
        if volume is None or not volume.metadata.HasField("deletionTimestamp") \
                or PV_PROTECTION not in volume.metadata.finalizers or volume.status.phase == "Bound":
            return
        try:
            fresh = await self.client.persistentvolumes.get(key)
        except errors.NotFound:
            return
        if PV_PROTECTION in fresh.metadata.finalizers and fresh.status.phase != "Bound":
            fresh.metadata.finalizers.remove(PV_PROTECTION)
            await self.client.persistentvolumes.update(fresh)

"""The storage admission plugins, as upstream's (plugin/pkg/admission/storage):

- DefaultStorageClass: a new claim that names no class (storageClassName unset, not "")
  gets the default StorageClass (annotated `storageclass.kubernetes.io/is-default-class:
  "true"`; of several, the newest, as upstream since 1.26).
- StorageObjectInUseProtection: new claims and volumes get the `kubernetes.io/pvc-protection`
  and `kubernetes.io/pv-protection` finalizers, which the controller manager removes once
  no pod uses the claim (no claim is bound to the volume).
- PersistentVolumeClaimResize: a bound claim grows only when its class allows expansion.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver.admission.chain import CREATE, UPDATE, AdmissionAttributes, forbidden
from apiserver.registry.storage import is_default_class
from kubeling.volumeutil import PV_PROTECTION, PVC_PROTECTION, storage_bytes
from protos.kubeling.v1 import core_pb2, storage_pb2

__all__ = ["DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize"]



@dataclass
class DefaultStorageClass:
    classes: Callable[[], Awaitable[list[storage_pb2.StorageClass]]]  # every StorageClass, from the watch cache
    resources: frozenset[str] = frozenset({"persistentvolumeclaims"})

    async def default_class(self) -> storage_pb2.StorageClass | None:
        defaults = [sc for sc in await self.classes() if is_default_class(sc)]
        if not defaults:
            return None
        return max(defaults, key=lambda sc: (sc.metadata.creationTimestamp.ToNanoseconds(), sc.metadata.name))

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        claim = attrs.obj
        assert isinstance(claim, core_pb2.PersistentVolumeClaim)
        if claim.spec.HasField("storageClassName"):
            return  # a class, or "" (no class): the user's choice
        found = await self.default_class()
        if found is not None:
            claim.spec.storageClassName = found.metadata.name


@dataclass
class StorageObjectInUseProtection:
    resources: frozenset[str] = frozenset({"persistentvolumeclaims", "persistentvolumes"})

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        finalizer = PVC_PROTECTION if attrs.resource == "persistentvolumeclaims" else PV_PROTECTION
        meta = attrs.obj.metadata  # type: ignore[union-attr]
        if finalizer not in meta.finalizers:
            meta.finalizers.append(finalizer)


@dataclass
class PersistentVolumeClaimResize:
    storage_class: Callable[[str], storage_pb2.StorageClass | None]  # by name, from the watch cache
    resources: frozenset[str] = frozenset({"persistentvolumeclaims"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != UPDATE or attrs.subresource:
            return
        new, old = attrs.obj, attrs.old
        assert isinstance(new, core_pb2.PersistentVolumeClaim) and isinstance(old, core_pb2.PersistentVolumeClaim)
        grown, before = storage_bytes(new.spec.resources.requests), storage_bytes(old.spec.resources.requests)
        if grown <= before or old.status.phase != "Bound":
            return
        sc = self.storage_class(old.spec.storageClassName) if old.spec.storageClassName else None
        if sc is None or not sc.allowVolumeExpansion:
            raise forbidden(attrs, "persistentvolumeclaims", "only dynamically provisioned pvc can be resized and "
                                                             "the storageclass that provisions the pvc must support "
                                                             "resize")

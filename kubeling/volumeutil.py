"""What the persistent volume binder, the scheduler's VolumeBinding, the provisioner and the
kubelet agree on about claims and volumes (upstream's pkg/controller/volume/persistentvolume/util
and storage helpers): the annotations, sizes, and which volume satisfies which claim."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

from kubeling.quantity import QuantityError, parse_quantity
from kubeling.selectors import SelectorError, from_label_selector_proto
from protos.kubeling.v1 import core_pb2

__all__ = ["BIND_COMPLETED", "BOUND_BY_CONTROLLER", "PROVISIONED_BY", "STORAGE_PROVISIONER", "BETA_STORAGE_PROVISIONER",
           "SELECTED_NODE", "YES", "storage_bytes", "claim_class", "claimed_by", "satisfies", "find_best_match",
           "attachment_name", "PVC_PROTECTION", "PV_PROTECTION", "DEFAULT_CLASS_ANNOTATIONS"]

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
YES = "yes"
# The finalizers StorageObjectInUseProtection adds and the protection controllers remove.
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
# A StorageClass is the default with either annotation "true" (the beta one still counts).
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


def attachment_name(volume: str, driver: str, node: str) -> str:
    """A CSI volume's VolumeAttachment to a node (upstream's getAttachmentName): the
    attach/detach controller makes it, the kubelet waits for it."""
    return "csi-" + hashlib.sha256(f"{volume}{driver}{node}".encode()).hexdigest()


def claim_class(claim: core_pb2.PersistentVolumeClaim) -> str:
    return claim.spec.storageClassName


def storage_bytes(resources: Mapping[str, str]) -> int:
    """resources["storage"] in bytes (0: absent or not a quantity)."""
    try:
        return parse_quantity(resources.get("storage", "0")).int_value()
    except QuantityError:
        return 0


def claimed_by(volume: core_pb2.PersistentVolume, claim: core_pb2.PersistentVolumeClaim) -> bool:
    ref = volume.spec.claimRef
    return (volume.spec.HasField("claimRef") and ref.namespace == claim.metadata.namespace
            and ref.name == claim.metadata.name and (not ref.uid or ref.uid == claim.metadata.uid))


def satisfies(volume: core_pb2.PersistentVolume, claim: core_pb2.PersistentVolumeClaim) -> bool:
    """Class, size, access modes, volume mode and selector (upstream's checkVolumeSatisfyClaim
    plus findMatchingVolume's selector), without node affinity."""
    if volume.spec.storageClassName != claim_class(claim):
        return False
    if storage_bytes(volume.spec.capacity) < storage_bytes(claim.spec.resources.requests):
        return False
    if not set(claim.spec.accessModes) <= set(volume.spec.accessModes):
        return False
    if (volume.spec.volumeMode or "Filesystem") != (claim.spec.volumeMode or "Filesystem"):
        return False
    if claim.spec.HasField("selector"):
        try:
            selector = from_label_selector_proto(claim.spec.selector)
        except SelectorError:
            return False
        if selector is None or not selector.matches(volume.metadata.labels):
            return False
    return True


def find_best_match(claim: core_pb2.PersistentVolumeClaim, volumes: Sequence[core_pb2.PersistentVolume],
                    node_fits: Callable[[core_pb2.PersistentVolume], bool] | None = None,
                    ) -> core_pb2.PersistentVolume | None:
    """The volume a claim should bind: one pre-bound to it if it satisfies the claim, else
    the smallest free one that does. `node_fits(volume) -> bool`, when given, also requires
    the volume's node affinity to admit a node (the scheduler's delayed binding)."""
    best: core_pb2.PersistentVolume | None = None
    for volume in volumes:
        if volume.metadata.HasField("deletionTimestamp") or not satisfies(volume, claim):
            continue
        if node_fits is not None and not node_fits(volume):
            continue
        if volume.spec.HasField("claimRef"):
            if claimed_by(volume, claim):
                return volume  # pre-bound (by a user, the scheduler, or a provisioner)
            continue
        if volume.status.phase not in ("Available", "Pending", ""):
            continue  # Released or Failed volumes are not reused
        if best is None or storage_bytes(volume.spec.capacity) < storage_bytes(best.spec.capacity):
            best = volume
    return best



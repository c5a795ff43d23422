"""storage.k8s.io/v1: StorageClasses, CSIDrivers, CSINodes, VolumeAttachments and
CSIStorageCapacities, with upstream's defaults (pkg/apis/storage/v1/defaults.go) and
validation (pkg/apis/storage/validation)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.storage import (
    validate_csi_driver,
    validate_csi_driver_update,
    validate_csi_node,
    validate_storage_capacity,
    validate_storage_class,
    validate_storage_class_update,
    validate_volume_attachment,
    validate_volume_attachment_update,
)
from kubeling import scheme
from kubeling.volumeutil import DEFAULT_CLASS_ANNOTATIONS
from protos.kubeling.v1 import storage_pb2

__all__ = ["STRATEGIES", "StorageClassStrategy", "CSIDriverStrategy", "CSINodeStrategy", "VolumeAttachmentStrategy",
           "CSIStorageCapacityStrategy", "is_default_class"]



def is_default_class(sc: storage_pb2.StorageClass) -> bool:
    """Upstream's IsDefaultAnnotation: either annotation, "true"."""
    return any(sc.metadata.annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)


class StorageClassStrategy(Strategy[storage_pb2.StorageClass]):
    resource = scheme.STORAGECLASSES

    def default(self, obj: storage_pb2.StorageClass) -> None:
        if not obj.HasField("reclaimPolicy"):
            obj.reclaimPolicy = "Delete"
        if not obj.HasField("volumeBindingMode"):
            obj.volumeBindingMode = "Immediate"

    def validate(self, obj: storage_pb2.StorageClass, check: Checker) -> None:
        validate_storage_class(obj, check)

    def validate_update(self, new: storage_pb2.StorageClass, old: storage_pb2.StorageClass, check: Checker) -> None:
        validate_storage_class_update(new, old, check)


class CSIDriverStrategy(Strategy[storage_pb2.CSIDriver]):
    resource = scheme.CSIDRIVERS

    def default(self, obj: storage_pb2.CSIDriver) -> None:
        spec = obj.spec
        for name, value in (("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
                            ("requiresRepublish", False), ("seLinuxMount", False)):
            if not spec.HasField(name):
                setattr(spec, name, value)
        if not spec.HasField("fsGroupPolicy"):
            spec.fsGroupPolicy = "ReadWriteOnceWithFSType"
        if not spec.volumeLifecycleModes:
            spec.volumeLifecycleModes.append("Persistent")

    def validate(self, obj: storage_pb2.CSIDriver, check: Checker) -> None:
        validate_csi_driver(obj, check)

    def validate_update(self, new: storage_pb2.CSIDriver, old: storage_pb2.CSIDriver, check: Checker) -> None:
        validate_csi_driver_update(new, old, check)


class CSINodeStrategy(Strategy[storage_pb2.CSINode]):
    resource = scheme.CSINODES

    def validate(self, obj: storage_pb2.CSINode, check: Checker) -> None:
        validate_csi_node(obj, check)


class VolumeAttachmentStrategy(Strategy[storage_pb2.VolumeAttachment]):
    resource = scheme.VOLUMEATTACHMENTS

    def prepare_for_create(self, obj: storage_pb2.VolumeAttachment) -> None:
        obj.ClearField("status")

    def validate(self, obj: storage_pb2.VolumeAttachment, check: Checker) -> None:
        validate_volume_attachment(obj, check)

    def validate_update(self, new: storage_pb2.VolumeAttachment, old: storage_pb2.VolumeAttachment,
                        check: Checker) -> None:
        validate_volume_attachment_update(new, old, check)


class CSIStorageCapacityStrategy(Strategy[storage_pb2.CSIStorageCapacity]):
    resource = scheme.CSISTORAGECAPACITIES

    def validate(self, obj: storage_pb2.CSIStorageCapacity, check: Checker) -> None:
        validate_storage_capacity(obj, check)


# This group's resources, for the registry's table.
STRATEGIES = (StorageClassStrategy, CSIDriverStrategy, CSINodeStrategy, VolumeAttachmentStrategy,
              CSIStorageCapacityStrategy)

"""v1 PersistentVolumes and PersistentVolumeClaims (upstream's pkg/registry/core/persistentvolume
and persistentvolumeclaim): defaults, validation, a Pending phase at creation, and the time
of each phase change (status.lastPhaseTransitionTime)."""

from __future__ import annotations

from collections.abc import MutableMapping

from apiserver.registry.generic.strategy import Strategy, now
from apiserver.validation import Checker
from apiserver.validation.storage import validate_pv, validate_pv_update, validate_pvc, validate_pvc_update
from kubeling import scheme
from kubeling.quantity import QuantityError, canonical
from protos.kubeling.v1 import core_pb2

__all__ = ["PersistentVolumeStrategy", "PersistentVolumeClaimStrategy", "PV_PHASES", "PVC_PHASES"]

PV_PHASES = ("Available", "Bound", "Failed", "Pending", "Released")
PVC_PHASES = ("Bound", "Lost", "Pending")
_RESIZE_STATUSES = ("ControllerResizeInProgress", "ControllerResizeInfeasible", "NodeResizePending",
                    "NodeResizeInProgress", "NodeResizeInfeasible")


def _canonical(resources: MutableMapping[str, str]) -> None:
    """Quantities in their canonical form, as upstream stores them (bad ones stay for validation)."""
    for key, text in list(resources.items()):
        try:
            resources[key] = canonical(text)
        except QuantityError:
            pass


class PersistentVolumeStrategy(Strategy[core_pb2.PersistentVolume]):
    resource = scheme.PERSISTENTVOLUMES

    def prepare_for_create(self, obj: core_pb2.PersistentVolume) -> None:
        obj.status.CopyFrom(core_pb2.PersistentVolumeStatus(phase="Pending"))
        obj.status.lastPhaseTransitionTime.CopyFrom(now())

    def default(self, obj: core_pb2.PersistentVolume) -> None:
        spec = obj.spec
        if not spec.persistentVolumeReclaimPolicy:
            spec.persistentVolumeReclaimPolicy = "Retain"
        if not spec.HasField("volumeMode"):
            spec.volumeMode = "Filesystem"
        if not obj.status.phase:
            obj.status.phase = "Pending"
        _canonical(spec.capacity)

    def validate(self, obj: core_pb2.PersistentVolume, check: Checker) -> None:
        validate_pv(obj, check)

    def validate_update(self, new: core_pb2.PersistentVolume, old: core_pb2.PersistentVolume,
                        check: Checker) -> None:
        validate_pv_update(new, old, check)

    def prepare_for_status_update(self, new: core_pb2.PersistentVolume, old: core_pb2.PersistentVolume) -> None:
        super().prepare_for_status_update(new, old)
        if new.status.phase != old.status.phase:
            new.status.lastPhaseTransitionTime.CopyFrom(now())

    def validate_status(self, new: core_pb2.PersistentVolume, check: Checker) -> None:
        if new.status.phase:
            check.unsupported("status.phase", new.status.phase, PV_PHASES)


class PersistentVolumeClaimStrategy(Strategy[core_pb2.PersistentVolumeClaim]):
    resource = scheme.PERSISTENTVOLUMECLAIMS

    def prepare_for_create(self, obj: core_pb2.PersistentVolumeClaim) -> None:
        obj.status.CopyFrom(core_pb2.PersistentVolumeClaimStatus(phase="Pending"))

    def default(self, obj: core_pb2.PersistentVolumeClaim) -> None:
        spec = obj.spec
        if not spec.HasField("volumeMode"):
            spec.volumeMode = "Filesystem"
        # dataSource and dataSourceRef say the same when one is given (upstream's
        # EnsureDataSourceConsistency): a claim written with either reads the same.
        if spec.HasField("dataSource") and not spec.HasField("dataSourceRef"):
            ref = spec.dataSourceRef
            ref.kind, ref.name = spec.dataSource.kind, spec.dataSource.name
            if spec.dataSource.HasField("apiGroup"):
                ref.apiGroup = spec.dataSource.apiGroup
        elif spec.HasField("dataSourceRef") and not spec.HasField("dataSource") \
                and not spec.dataSourceRef.HasField("namespace"):
            ds = spec.dataSource
            ds.kind, ds.name = spec.dataSourceRef.kind, spec.dataSourceRef.name
            if spec.dataSourceRef.HasField("apiGroup"):
                ds.apiGroup = spec.dataSourceRef.apiGroup
        _canonical(spec.resources.requests)
        _canonical(spec.resources.limits)

    def validate(self, obj: core_pb2.PersistentVolumeClaim, check: Checker) -> None:
        validate_pvc(obj, check)

    def validate_update(self, new: core_pb2.PersistentVolumeClaim, old: core_pb2.PersistentVolumeClaim,
                        check: Checker) -> None:
        validate_pvc_update(new, old, check)

    def validate_status(self, new: core_pb2.PersistentVolumeClaim, check: Checker) -> None:
        if new.status.phase:
            check.unsupported("status.phase", new.status.phase, PVC_PHASES)
        for key, text in new.status.capacity.items():
            check.quantity(f"status.capacity[{key}]", text)
        for key, state in new.status.allocatedResourceStatuses.items():
            check.unsupported(f"status.allocatedResourceStatuses[{key}]", state, _RESIZE_STATUSES)
        _canonical(new.status.capacity)

"""What the volume plugins read of the cluster's storage (upstream's informer listers for
claims, volumes, classes, CSINodes, CSIDrivers and CSIStorageCapacities), as the
scheduler's informers hold it: a Handle gives it to plugins (`handle.storage()`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protos.kubeling.v1 import core_pb2, storage_pb2

__all__ = ["StorageListers"]


def _none(*_: str) -> None:
    return None


def _empty() -> Sequence[object]:
    return ()


@dataclass
class StorageListers:
    claim: Callable[[str, str], core_pb2.PersistentVolumeClaim | None] = _none  # (namespace, name)
    volume: Callable[[str], core_pb2.PersistentVolume | None] = _none
    volumes: Callable[[], Sequence[core_pb2.PersistentVolume]] = _empty  # type: ignore[assignment]
    storage_class: Callable[[str], storage_pb2.StorageClass | None] = _none
    csi_node: Callable[[str], storage_pb2.CSINode | None] = _none
    csi_driver: Callable[[str], storage_pb2.CSIDriver | None] = _none
    capacities: Callable[[], Sequence[storage_pb2.CSIStorageCapacity]] = _empty  # type: ignore[assignment]

"""The default StorageClass `kubeling up` installs, as k3s ships local-path and kind ships
standard: `standard`, the hostpath driver's, WaitForFirstConsumer (a volume is made on the
node its first pod lands on), Delete, expandable, annotated as the default, so that a claim
without a class just works."""

from __future__ import annotations

from kubeling import errors
from kubeling.client import Client
from kubeling.volumeutil import DEFAULT_CLASS_ANNOTATIONS
from protos.kubeling.v1 import meta_pb2, storage_pb2

__all__ = ["install_default_class", "DEFAULT_CLASS"]

DEFAULT_CLASS = "standard"


async def install_default_class(client: Client, driver: str, name: str = DEFAULT_CLASS) -> storage_pb2.StorageClass:
    """Create the class if missing (idempotent; an existing one is left as it is)."""
    try:
        return await client.storageclasses.get(name)
    except errors.NotFound:
        pass
    made = storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name=name, annotations={DEFAULT_CLASS_ANNOTATIONS[0]: "true"},
                                     labels={"addonmanager.kubernetes.io/mode": "EnsureExists"}),
        provisioner=driver, reclaimPolicy="Delete", volumeBindingMode="WaitForFirstConsumer",
        allowVolumeExpansion=True)
    try:
        return await client.storageclasses.create(made)
    except errors.AlreadyExists:
        return await client.storageclasses.get(name)

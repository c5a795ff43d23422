"""A CustomResourceDefinition being deleted takes its custom resources with it (upstream's
apiextensions-apiserver finalizer controller): Terminating True, every custom resource
deleted (those with finalizers of their own are waited for), then the
customresourcecleanup finalizer removed, and the definition goes."""

from __future__ import annotations

import logging

from apiserver.controllers.crd_naming import set_condition
from apiserver.registry.apiextensions.definition import FINALIZER
from apiserver.registry.apiextensions.serving import CustomResourceServing
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.periodic import Periodic
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["CRDFinalizer"]

log = logging.getLogger(__name__)

CRD = custom_pb2.CustomResource


class CRDFinalizer:
    def __init__(self, definitions: Registry[CRD], serving: CustomResourceServing, interval: float = 0.5) -> None:
        self.definitions = definitions
        self.serving = serving
        self._loop = Periodic("crd-finalizer", interval, self._pass)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        cache = self.definitions.watch_cache
        if not cache.ready.is_set():
            return
        for entry in list(cache.store.values()):
            crd = entry.obj
            if crd.metadata.HasField("deletionTimestamp") and FINALIZER in crd.metadata.finalizers:
                try:
                    await self.finalize(crd)
                except errors.ApiError as err:
                    log.warning("customresourcedefinition %s: cleanup: %s", crd.metadata.name, err.message)

    async def finalize(self, crd: CRD) -> bool:
        """One pass; True once the finalizer is off."""
        name = crd.metadata.name
        crd = await self._terminating(crd)
        registry = self.serving.registry_of(name)
        if registry is not None:
            items, _ = await registry.list(meta_pb2.ListRequest())
            for obj in items:
                if not obj.metadata.HasField("deletionTimestamp"):
                    try:
                        await registry.delete(obj.metadata.namespace, obj.metadata.name)
                    except errors.NotFound:
                        pass
            remaining, _ = await registry.list(meta_pb2.ListRequest(limit=1))
            if remaining:
                return False  # some have finalizers of their own: their owners finish them
        updated = CRD()
        updated.CopyFrom(crd)
        updated.metadata.finalizers.remove(FINALIZER)
        try:
            await self.definitions.update(updated)
        except (errors.Conflict, errors.NotFound):
            return False
        log.info("customresourcedefinition %s: custom resources deleted, finalizer removed", name)
        return True

    async def _terminating(self, crd: CRD) -> CRD:
        content = content_of(crd)
        status = content.setdefault("status", {})
        if not set_condition(status, "Terminating", "True", "InstanceDeletionInProgress",
                             "CustomResource deletion is in progress"):
            return crd
        updated = CRD()
        updated.CopyFrom(crd)
        set_content(updated, content)
        return await self.definitions.update(updated, status=True)

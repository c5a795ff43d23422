"""Empties namespaces being deleted, then removes them (kube-controller-manager's
namespace controller, folded into the apiserver since kubeling has no controller manager)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from apiserver.registry.core.namespaces import FINALIZER
from apiserver.registry.generic.store import Registry
from apiserver.storage.etcd import StaleRevision
from kubeling import errors
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2

__all__ = ["NamespaceFinalizer"]

log = logging.getLogger(__name__)


class NamespaceFinalizer:
    def __init__(self, namespaces: Registry[core_pb2.Namespace],
                 namespaced: Callable[[], Iterable[Registry[Any]]], interval: float = 1.0) -> None:
        self.namespaces = namespaces
        self.namespaced = namespaced  # asked each pass: custom resources come and go
        self._loop = Periodic("namespace-finalizer", interval, self._pass)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> None:
        cache = self.namespaces.watch_cache
        if not cache.ready.is_set():
            return
        for entry in [e for e in cache.store.values() if e.obj.metadata.HasField("deletionTimestamp")]:
            name = entry.obj.metadata.name
            try:
                await self.finalize(name)
            except errors.ApiError as err:
                log.warning("namespace %s: finalizing failed: %s", name, err.message)

    async def finalize(self, name: str) -> bool:
        """One pass: delete what is left in the namespace; remove it once empty."""
        remaining = 0
        for registry in self.namespaced():
            for obj in await registry.in_namespace(name):
                remaining += 1
                if obj.metadata.HasField("deletionTimestamp"):
                    continue  # already going (pods wait for their kubelet)
                try:
                    await registry.delete(name, obj.metadata.name)
                except errors.NotFound:
                    pass
        if remaining:
            return False
        key = self.namespaces.key("", name)
        kv, _ = await self.namespaces.storage.get(key)
        if kv is None:
            return True
        ns = self.namespaces.decode(kv)
        if FINALIZER in ns.spec.finalizers:
            ns.spec.finalizers.remove(FINALIZER)
        try:
            if ns.spec.finalizers or ns.metadata.finalizers:
                await self.namespaces.storage.update(key, self.namespaces.encode(ns), kv.mod_revision)
                return False
            await self.namespaces.storage.delete(key, kv.mod_revision)
        except StaleRevision:
            return False
        log.info("namespace %s: empty, removed", name)
        return True

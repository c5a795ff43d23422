"""Empties namespaces being deleted, then removes them (kube-controller-manager's
namespace controller, folded into the apiserver: it deletes from every registry, custom
resources' included, without asking discovery). Each pass reports on the namespace's
status what is left, as upstream's conditions: NamespaceContentRemaining (the resources
still there and how many), NamespaceFinalizersRemaining (their finalizers),
NamespaceDeletionContentFailure (deletes that failed), and the discovery conditions, which
never fail here."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from apiserver.registry.core.namespaces import FINALIZER
from apiserver.registry.generic.store import Registry
from apiserver.storage.etcd import StaleRevision
from kubeling import errors
from kubeling.periodic import Periodic
from kubeling.timestamps import now
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
        remaining: Counter[str] = Counter()  # by plural.group
        finalizers: Counter[str] = Counter()
        failures: list[str] = []
        for registry in self.namespaced():
            resource = registry.strategy.resource.group_resource
            for obj in await registry.in_namespace(name):
                remaining[resource] += 1
                finalizers.update(obj.metadata.finalizers)
                if obj.metadata.HasField("deletionTimestamp"):
                    continue  # already going (pods wait for their kubelet)
                try:
                    await registry.delete(name, obj.metadata.name)
                except errors.NotFound:
                    pass
                except errors.ApiError as err:
                    failures.append(f"{resource}: {err.message}")
        await self._report(name, remaining, finalizers, failures)
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

    async def _report(self, name: str, remaining: Counter[str], finalizers: Counter[str],
                      failures: list[str]) -> None:
        """The deletion's conditions on the namespace's status, written when they change."""
        wanted = _conditions(remaining, finalizers, failures)
        try:
            ns = await self.namespaces.get("", name)
        except errors.NotFound:
            return
        current = {c.type: c for c in ns.status.conditions}
        if all(t in current and (current[t].status, current[t].reason, current[t].message) == v
               for t, v in wanted.items()):
            return
        ns.status.ClearField("conditions")
        for type_, (status, reason, message) in wanted.items():
            old = current.get(type_)
            cond = ns.status.conditions.add(type=type_, status=status, reason=reason, message=message)
            if old is not None and old.status == status:
                cond.lastTransitionTime.CopyFrom(old.lastTransitionTime)
            else:
                cond.lastTransitionTime.CopyFrom(now())
        try:
            await self.namespaces.update(ns, status=True)
        except (errors.Conflict, errors.NotFound):
            pass  # the next pass writes them


def _conditions(remaining: Counter[str], finalizers: Counter[str],
                failures: list[str]) -> dict[str, tuple[str, str, str]]:
    """type -> (status, reason, message), worded as upstream's namespace controller."""
    out = {"NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered",
                                                 "All resources successfully discovered"),
           "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions",
                                                           "All legacy kube types successfully parsed")}
    out["NamespaceDeletionContentFailure"] = (
        ("True", "ContentDeletionFailed", f"Failed to delete all resource types, {len(failures)} remaining: "
                                          + ", ".join(sorted(failures)))
        if failures else
        ("False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"))
    out["NamespaceContentRemaining"] = (
        ("True", "SomeResourcesRemain", "Some resources are remaining: " + ", ".join(
            sorted(f"{resource} has {count} resource instances" for resource, count in remaining.items())))
        if remaining else ("False", "ContentRemoved", "All content successfully removed"))
    out["NamespaceFinalizersRemaining"] = (
        ("True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: " + ", ".join(
            sorted(f"{finalizer} in {count} resource instances" for finalizer, count in finalizers.items())))
        if finalizers else ("False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"))
    return out

"""The storage version migrator: a StorageVersionMigration names a resource, and every
object of it stored in etcd is written again in the current storage format — what a
message that changed (a field dropped, a storage version moved), a JSON kind's new
defaults or a rotated encryption key leave behind. Upstream's migrator (in the controller
manager) sends a no-op write of each object through the API and the apiserver writes what
it encodes differently from what is stored; here the apiserver that runs its controllers
does the same at its storage layer: each key read, decoded, encoded again, and written
back (compare-and-swap on its revision, its lease kept) only when the bytes differ or were
read with an old key. A write that loses the compare-and-swap needs nothing: the winner
wrote the current format. Status: Running (with the revision it started at), then
Succeeded ("N of M objects written again") or Failed (a resource not served, or custom
resources whose stored versions need a conversion webhook: not migrated here)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apiserver.controllers.crd_naming import set_condition
from apiserver.registry.apiextensions.definition import condition
from apiserver.registry.generic.store import Registry
from apiserver.storage.etcd import KV, StaleRevision, Storage, prefix_end
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.periodic import Periodic

__all__ = ["StorageVersionMigrator"]

log = logging.getLogger(__name__)

PAGE = 500


class StorageVersionMigrator:
    def __init__(self, migrations: Registry[Any], storage: Storage,
                 registry_for: Callable[[str, str], Registry[Any] | None], interval: float = 1.0) -> None:
        """`registry_for(group, resource)`: the registry that stores it, None when not served."""
        self.migrations = migrations
        self.storage = storage
        self.registry_for = registry_for
        self._loop = Periodic("storage-version-migrator", interval, self.sync)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        cache = self.migrations.watch_cache
        if not cache.ready.is_set():
            return
        for entry in list(cache.store.values()):
            status = content_of(entry.obj).get("status") or {}
            if not any((condition(status, kind) or {}).get("status") == "True" for kind in ("Succeeded", "Failed")):
                await self._migrate(entry.obj)

    async def _set(self, migration: Any, kind: str, reason: str, message: str, **status: str) -> Any:
        updated = type(migration)()
        updated.CopyFrom(migration)
        content = content_of(updated)
        state = content.setdefault("status", {})
        state.update(status)
        if kind != "Running":
            set_condition(state, "Running", "False", reason, message)
        set_condition(state, kind, "True", reason, message)
        set_content(updated, content)
        return await self.migrations.update(updated, status=True)

    async def _migrate(self, migration: Any) -> None:
        resource = (content_of(migration).get("spec") or {}).get("resource") or {}
        group, plural = resource.get("group", ""), resource.get("resource", "")
        shown = f"{plural}.{group}" if group else plural
        name = migration.metadata.name
        registry = self.registry_for(group, plural)
        try:
            if registry is None:
                await self._set(migration, "Failed", "ResourceNotFound", f'the resource "{shown}" is not served')
                return
            if registry.strategy.stored_versions_vary:
                await self._set(migration, "Failed", "ConversionNeeded",
                                f'"{shown}" is converted by a webhook: write its objects through the API to '
                                "migrate them")
                return
            started = await self.storage.revision()
            migration = await self._set(migration, "Running", "Migrating", f'writing every "{shown}" again',
                                        resourceVersion=str(started))
            total = written = 0
            start, end = registry.prefix, prefix_end(registry.prefix)
            while True:
                kvs, _, more, _ = await self.storage.range(start, end, limit=PAGE, what=f"migrate {shown}")
                for kv in kvs:
                    if kv.key == registry.prefix:
                        continue  # the watch cache's progress marker, no object
                    total += 1
                    written += await self._rewrite(registry, kv)
                if not more or not kvs:
                    break
                start = kvs[-1].key + b"\0"
            await self._set(migration, "Succeeded", "Migrated",
                            f"{written} of {total} objects written again in the current storage format")
            log.info("storage version migration %s: %s, %d of %d objects written again", name, shown, written, total)
        except (errors.Conflict, errors.NotFound):
            return  # changed or deleted meanwhile: the next pass sees it again

    async def _rewrite(self, registry: Registry[Any], kv: KV) -> int:
        codec = registry.codec
        try:
            stored = codec.plaintext(kv)  # (a value read with an old key is marked stale)
            obj = codec.decode(kv)
        except errors.ApiError as err:
            log.warning("storage version migration: %s not read: %s", kv.key.decode(errors="replace"), err.message)
            return 0
        obj.metadata.resourceVersion = ""
        obj.DiscardUnknownFields()  # fields the message no longer has go, as Go's decoding drops them
        if stored == codec.serialize(obj) and not codec.stale(kv.key, kv.mod_revision):
            return 0
        try:
            await self.storage.update(kv.key, registry.encode(obj), kv.mod_revision, lease=kv.lease)
        except StaleRevision:
            return 0  # written meanwhile, by a writer that encodes as this one does
        return 1

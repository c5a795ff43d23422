"""Informer: a local, indexed copy of one resource kept current by list + watch.

    pods = Informer(client.pods, field_selector="spec.nodeName=node-1")
    pods.add_handler(on_add=..., on_update=..., on_delete=...)
    await pods.start(); await pods.wait_synced()

It lists, then watches from the list's resourceVersion. A dropped stream is resumed
from the last resourceVersion seen (bookmarks keep it fresh); Expired triggers a
relist, and handlers then receive only the difference (adds, updates, deletes).
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic

from kubeling import errors
from kubeling.client import Client, ResourceClient
from kubeling.periodic import cancel_and_wait
from kubeling.scheme import ObjectT, ResourceType

__all__ = ["Informer", "SharedInformers", "Store", "object_key", "INDEX_NAMESPACE", "INDEX_NODE_NAME"]

log = logging.getLogger(__name__)

IndexFunc = Callable[[Any], Iterable[str]]
INDEX_NAMESPACE = "namespace"
INDEX_NODE_NAME = "nodeName"


def object_key(obj: Any) -> str:
    """namespace/name, or name for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _node_name(obj: Any) -> Iterable[str]:
    spec = getattr(obj, "spec", None)
    name = getattr(spec, "nodeName", "") if spec is not None else ""
    return [name] if name else []


DEFAULT_INDEXERS: dict[str, IndexFunc] = {
    INDEX_NAMESPACE: lambda obj: [obj.metadata.namespace] if obj.metadata.namespace else [],
    INDEX_NODE_NAME: _node_name,
}


@dataclass
class Store(Generic[ObjectT]):
    """Objects by key with secondary indexes (client-go's thread-safe store, minus threads)."""

    indexers: dict[str, IndexFunc] = field(default_factory=lambda: dict(DEFAULT_INDEXERS))
    items: dict[str, ObjectT] = field(default_factory=dict)
    _indexes: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def get(self, key: str) -> ObjectT | None:
        return self.items.get(key)

    def list(self) -> builtins.list[ObjectT]:
        return [*self.items.values()]

    def keys(self) -> builtins.list[str]:
        return [*self.items]

    def by_index(self, index: str, value: str) -> builtins.list[ObjectT]:
        return [self.items[k] for k in sorted(self._indexes.get(index, {}).get(value, ()))]

    def put(self, obj: ObjectT) -> ObjectT | None:
        key = object_key(obj)
        old = self.items.get(key)
        if old is not None:
            self._unindex(key, old)
        self.items[key] = obj
        for name, fn in self.indexers.items():
            for value in fn(obj):
                self._indexes.setdefault(name, {}).setdefault(value, set()).add(key)
        return old

    def remove(self, key: str) -> ObjectT | None:
        old = self.items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: ObjectT) -> None:
        for name, fn in self.indexers.items():
            idx = self._indexes.get(name, {})
            for value in fn(obj):
                keys = idx.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del idx[value]


Handler = Callable[..., Any]


@dataclass
class _Handlers:
    on_add: Handler | None = None
    on_update: Handler | None = None
    on_delete: Handler | None = None


class Informer(Generic[ObjectT]):
    def __init__(self, resource: ResourceClient[ObjectT], *, namespace: str = "", label_selector: str = "",
                 field_selector: str = "", indexers: dict[str, IndexFunc] | None = None,
                 page_size: int = 500, max_backoff: float = 5.0) -> None:
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store: Store[ObjectT] = Store(indexers=indexers or dict(DEFAULT_INDEXERS))
        self.page_size = page_size
        self.max_backoff = max_backoff
        self.last_resource_version = ""
        self.relists = 0  # how many times it had to list (1 + one per Expired / reset)
        self._handlers: list[_Handlers] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add_handler(self, *, on_add: Handler | None = None, on_update: Handler | None = None,
                    on_delete: Handler | None = None) -> None:
        """Callbacks (sync or async): on_add(obj), on_update(old, new), on_delete(obj).
        Add handlers before start(): they see events from then on."""
        h = _Handlers(on_add, on_update, on_delete)
        self._handlers.append(h)

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"informer-{self.resource.kind}")

    async def wait_synced(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self._synced.wait()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    # ------------------------------------------------------------ loop

    async def _run(self) -> None:
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch()
                backoff = 0.1  # the stream ended cleanly (timeout): watch again at once
                continue
            except asyncio.CancelledError:
                raise
            except errors.Expired:
                log.info("informer %s: resourceVersion %s expired; relisting", self.resource.kind,
                         self.last_resource_version)
                need_list = True
                continue
            except errors.ApiError as err:
                log.info("informer %s: watch ended (%s: %s); resuming from %s", self.resource.kind,
                         err.reason, err.message, self.last_resource_version or "a new list")
            except Exception as err:
                log.warning("informer %s: %s: %s", self.resource.kind, type(err).__name__, err)
            if not self.last_resource_version:
                need_list = True
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, self.max_backoff)

    async def _relist(self) -> None:
        items, rv = await self.resource.list_all(self.namespace, label_selector=self.label_selector,
                                                 field_selector=self.field_selector, page_size=self.page_size)
        self.relists += 1
        fresh = {object_key(o): o for o in items}
        # Deliver only the difference against what handlers already saw.
        for key in [k for k in self.store.keys() if k not in fresh]:
            old = self.store.remove(key)
            await self._notify("on_delete", old)
        for key, obj in fresh.items():
            old = self.store.get(key)
            if old is None:
                self.store.put(obj)
                await self._notify("on_add", obj)
            elif old.metadata.resourceVersion != obj.metadata.resourceVersion:
                self.store.put(obj)
                await self._notify("on_update", old, obj)
        self.last_resource_version = rv
        self._synced.set()

    async def _watch(self) -> None:
        async for ev in self.resource.watch(self.namespace, label_selector=self.label_selector,
                                            field_selector=self.field_selector,
                                            resource_version=self.last_resource_version,
                                            allow_bookmarks=True):
            obj = ev.object
            rv = obj.metadata.resourceVersion
            if ev.type == "BOOKMARK":
                self.last_resource_version = rv
                continue
            key = object_key(obj)
            if ev.type == "DELETED":
                old = self.store.remove(key)
                self.last_resource_version = rv
                await self._notify("on_delete", old if old is not None else obj)
                continue
            old = self.store.put(obj)
            self.last_resource_version = rv
            if old is None:
                await self._notify("on_add", obj)
            else:
                await self._notify("on_update", old, obj)

    async def _notify(self, which: str, *args: Any) -> None:
        for h in self._handlers:
            fn = getattr(h, which)
            if fn is None:
                continue
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("informer %s: %s handler failed", self.resource.kind, which)


class SharedInformers:
    """One informer per resource (and namespace) for everything in a process that watches
    it (client-go's SharedInformerFactory): asked for by scheme entry, made on first ask,
    started and stopped together."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._informers: dict[tuple[ResourceType[Any], str, str], Informer[Any]] = {}

    def get(self, resource: ResourceType[ObjectT], namespace: str = "", *,
            field_selector: str = "") -> Informer[ObjectT]:
        """`field_selector`: only the objects it selects (one name in every namespace, say)."""
        key = (resource, namespace, field_selector)
        found = self._informers.get(key)
        if found is None:
            found = self._informers[key] = Informer(self.client.resource(resource), namespace=namespace,
                                                    field_selector=field_selector)
        return found

    def __iter__(self) -> Iterator[Informer[Any]]:
        return iter(list(self._informers.values()))

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self._informers.values())

    async def start(self, sync_timeout: float | None = None) -> None:
        """Start every informer asked for so far, and wait for each to have listed."""
        for informer in self:
            await informer.start()
        for informer in self:
            await informer.wait_synced(sync_timeout)

    async def stop(self) -> None:
        for informer in self:
            await informer.stop()

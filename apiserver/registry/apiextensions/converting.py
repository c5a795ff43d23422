"""A served version of a custom resource whose definition converts by webhook: a view
over the storage version's registry (upstream's versioning codec around the one store).
A write is defaulted and validated in its own version, converted to the storage version,
and written there; what is read, listed or watched is converted to this view's version
from whichever version it was stored in (objects written before the storage version
moved keep theirs until they are rewritten)."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from typing import Any

from apiserver.registry.apiextensions.conversion import WebhookConverter
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.generic.store import Registry
from apiserver.validation import Checker
from kubeling import dynamic, errors
from protos.kubeling.v1 import custom_pb2, meta_pb2

__all__ = ["ConvertingRegistry"]

CR = custom_pb2.CustomResource
Event = custom_pb2.CustomResourceWatchEvent


class ConvertingRegistry(Registry[CR]):
    """Quacks as the Registry the front ends call (create, get, list, update, delete,
    watch, strategy); storage, cache and lifecycle are the storage registry's. Not a
    Registry.__init__: it keeps nothing of its own."""

    def __init__(self, storage: Registry[CR], strategy: CustomResourceStrategy, converter: WebhookConverter) -> None:
        self.stored = storage
        self.strategy = strategy
        self.converter = converter
        self.storage = storage.storage
        self.prefix = storage.prefix
        self.codec = storage.codec
        self.admission = None
        self.hooks = None
        self.cache = None
        self._field_labels = strategy.field_labels()

    # ------------------------------------------------------------ lifecycle (the storage registry's)

    async def start(self) -> None:
        return None

    async def wait_ready(self, timeout: float) -> None:
        await self.stored.wait_ready(timeout)

    @property
    def ready(self) -> bool:
        return self.stored.ready

    async def stop(self) -> None:
        return None

    def compacted(self, revision: int) -> None:
        return None

    @property
    def watcher_count(self) -> int:
        return 0

    def replace_strategy(self, strategy: Any) -> None:
        self.strategy = strategy
        self._field_labels = strategy.field_labels()

    # ------------------------------------------------------------ conversion

    async def _convert(self, objects: builtins.list[CR], api_version: str) -> builtins.list[CR]:
        if not objects:
            return []
        bodies = [dynamic.to_dict(o) for o in objects]
        converted = await self.converter.convert(bodies, api_version)
        out = []
        for before, body in zip(objects, converted, strict=True):
            obj = dynamic.new(body)
            obj.metadata.resourceVersion = before.metadata.resourceVersion
            out.append(obj)
        return out

    async def _out(self, obj: CR) -> CR:
        return (await self._convert([obj], self.strategy.resource.api_version))[0]

    async def _in(self, obj: CR) -> CR:
        stored = (await self._convert([obj], self.stored.strategy.resource.api_version))[0]
        return stored

    def _judged(self, obj: CR, old: CR | None) -> None:
        """Defaults and validation in this version, before conversion (upstream validates
        in the request's version)."""
        check = Checker()
        self.strategy.default(obj)
        if old is None:
            self.strategy.validate_create(obj, check)
        else:
            self.strategy.validate_update(obj, old, check)
        self._invalid(obj, check)

    # ------------------------------------------------------------ verbs

    async def create(self, obj: CR, *, dry_run: bool = False) -> CR:
        self.strategy.prepare_for_create(obj)
        self._judged(obj, None)
        return await self._out(await self.stored.create(await self._in(obj), dry_run=dry_run))

    async def get(self, namespace: str, name: str, resource_version: str = "") -> CR:
        return await self._out(await self.stored.get(namespace, name, resource_version))

    async def list(self, req: meta_pb2.ListRequest) -> tuple[builtins.list[CR], meta_pb2.ListMeta]:
        items, meta = await self.stored.list(req)
        return await self._convert(list(items), self.strategy.resource.api_version), meta

    async def in_namespace(self, namespace: str) -> builtins.list[CR]:
        return await self.stored.in_namespace(namespace)

    async def update(self, obj: CR, *, status: bool = False, dry_run: bool = False, ephemeral: bool = False,
                     resize: bool = False, finalize: bool = False,
                     approval: bool = False) -> CR:
        obj.apiVersion, obj.kind = self.strategy.resource.api_version, self.strategy.resource.kind
        if not status:
            try:
                old = await self.get(obj.metadata.namespace, obj.metadata.name)
            except errors.NotFound:
                old = None
            if old is not None:
                self._judged(obj, old)
        updated = await self.stored.update(await self._in(obj), status=status, dry_run=dry_run, ephemeral=ephemeral,
                                         resize=resize, finalize=finalize, approval=approval)
        return await self._out(updated)

    async def delete(self, namespace: str, name: str, **options: Any) -> CR:
        return await self._out(await self.stored.delete(namespace, name, **options))

    async def watch(self, req: meta_pb2.WatchRequest) -> Any:
        return _ConvertingWatcher(await self.stored.watch(req), self)


class _ConvertingWatcher:
    """The storage registry's watcher, each event's object converted on its way out."""

    def __init__(self, inner: Any, view: ConvertingRegistry) -> None:
        self.inner = inner
        self.view = view

    @property
    def error(self) -> errors.ApiError | None:
        error: errors.ApiError | None = self.inner.error
        return error

    def terminate(self, error: errors.ApiError | None = None) -> None:
        self.inner.terminate(error)

    async def _converted(self, batch: builtins.list[bytes]) -> builtins.list[bytes]:
        events = [Event.FromString(data) for data in batch]
        objects = [e.object for e in events if e.type != "BOOKMARK"]
        try:
            converted = iter(await self.view._convert(objects, self.view.strategy.resource.api_version))
        except errors.ApiError as err:
            self.inner.terminate(err)  # the watcher ends with the conversion's error
            raise
        out = []
        for e in events:
            if e.type == "BOOKMARK":
                out.append(e.SerializeToString())
            else:
                out.append(Event(type=e.type, object=next(converted)).SerializeToString())
        return out

    async def stream(self) -> AsyncIterator[bytes]:
        async for data in self.inner.stream():
            try:
                for item in await self._converted([data]):
                    yield item
            except errors.ApiError:
                return

    async def stream_batches(self, max_bytes: int) -> AsyncIterator[builtins.list[bytes]]:
        async for batch in self.inner.stream_batches(max_bytes):
            try:
                yield await self._converted(batch)
            except errors.ApiError:
                return

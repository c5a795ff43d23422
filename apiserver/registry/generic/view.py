"""A second version of a built-in resource: a view over the registry of its storage
version (upstream serves one resource at several versions through one store and a
versioning codec). A write is defaulted and validated in its own version, converted to
the storage version (what the view cannot say kept from the stored object) and written
there, with that registry's admission, validation and watch cache; what is read, listed
or watched is converted to the view's version."""

from __future__ import annotations

import builtins
import re
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

from apiserver.registry.generic.store import Registry
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import errors
from kubeling.scheme import ApiObject
from protos.kubeling.v1 import meta_pb2

__all__ = ["VersionView", "ToView", "ToStorage"]

V = TypeVar("V", bound=ApiObject)  # the view's message
S = TypeVar("S", bound=ApiObject)  # the storage version's
ToView = Callable[[Any], Any]
ToStorage = Callable[[Any, Any], Any]  # (view object, the stored object or None) -> storage object


class VersionView(Registry[V], Generic[V, S]):
    """Quacks as the Registry the front ends call (create, get, list, update, delete,
    watch, strategy); storage, cache and lifecycle are the storage registry's. Not a
    Registry.__init__: it keeps nothing of its own."""

    def __init__(self, stored: Registry[S], strategy: Strategy[V], to_view: ToView, to_storage: ToStorage) -> None:
        self.stored = stored
        self.strategy = strategy
        self.to_view, self.to_storage = to_view, to_storage
        self.storage = stored.storage
        self.prefix = stored.prefix
        self.codec = stored.codec  # type: ignore[assignment]  # the stored version's encoding
        self.admission = None
        self.hooks = None
        self.cache = None
        self.upgrade = None
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

    # ------------------------------------------------------------ verbs

    def _judged(self, obj: V, old: V | None) -> None:
        check = Checker()
        self.strategy.default(obj)
        if old is None:
            self.strategy.validate(obj, check)
            self.strategy.validate_create(obj, check)
        else:
            self.strategy.validate(obj, check)
            self.strategy.validate_update(obj, old, check)
        self._invalid(obj, check)

    async def create(self, obj: V, *, dry_run: bool = False) -> V:
        self.strategy.prepare_for_create(obj)
        self._judged(obj, None)
        return self.to_view(await self.stored.create(self.to_storage(obj, None), dry_run=dry_run))

    async def get(self, namespace: str, name: str, resource_version: str = "") -> V:
        return self.to_view(await self.stored.get(namespace, name, resource_version))

    def _stored_selector(self, selector: str) -> str:
        """A field selector in the view's labels, in the storage version's."""
        conversions = self.strategy.field_label_conversions
        if not selector or not conversions:
            return selector
        terms = []
        for term in selector.split(","):
            match = re.match(r"\s*([^!=\s]+)\s*(==|!=|=)(.*)", term)
            if match is None or match.group(1) not in conversions:
                terms.append(term)
                continue
            terms.append(f"{conversions[match.group(1)]}{match.group(2)}{match.group(3)}")
        return ",".join(terms)

    async def list(self, req: meta_pb2.ListRequest) -> tuple[builtins.list[V], meta_pb2.ListMeta]:
        if self.strategy.field_label_conversions and req.fieldSelector:
            converted = meta_pb2.ListRequest()
            converted.CopyFrom(req)
            converted.fieldSelector = self._stored_selector(req.fieldSelector)
            req = converted
        items, meta = await self.stored.list(req)
        return [self.to_view(i) for i in items], meta

    async def in_namespace(self, namespace: str) -> builtins.list[V]:
        return [self.to_view(i) for i in await self.stored.in_namespace(namespace)]

    async def update(self, obj: V, *, status: bool = False, dry_run: bool = False, ephemeral: bool = False,
                     resize: bool = False, finalize: bool = False,
                     approval: bool = False) -> V:
        meta = obj.metadata
        stored = await self.stored.get(meta.namespace or ("default" if self.strategy.namespaced else ""), meta.name)
        if not status:
            self._judged(obj, self.to_view(stored))
        written = self.to_storage(obj, stored)
        written.metadata.resourceVersion = meta.resourceVersion  # the caller's precondition, if any
        updated = await self.stored.update(written, status=status, dry_run=dry_run, ephemeral=ephemeral,
                                         resize=resize, finalize=finalize, approval=approval)
        return self.to_view(updated)

    async def delete(self, namespace: str, name: str, **options: Any) -> V:
        return self.to_view(await self.stored.delete(namespace, name, **options))

    async def watch(self, req: meta_pb2.WatchRequest) -> Any:
        if self.strategy.field_label_conversions and req.fieldSelector:
            converted = meta_pb2.WatchRequest()
            converted.CopyFrom(req)
            converted.fieldSelector = self._stored_selector(req.fieldSelector)
            req = converted
        return _ViewWatcher(await self.stored.watch(req), self)


class _ViewWatcher:
    """The storage registry's watcher, each event's object converted on its way out."""

    def __init__(self, inner: Any, view: VersionView[Any, Any]) -> None:
        self.inner = inner
        self.stored_event = view.stored.strategy.resource.event_message
        self.view_event = view.strategy.resource.event_message
        self.to_view = view.to_view

    @property
    def error(self) -> errors.ApiError | None:
        error: errors.ApiError | None = self.inner.error
        return error

    def terminate(self, error: errors.ApiError | None = None) -> None:
        self.inner.terminate(error)

    def _converted(self, data: bytes) -> bytes:
        event = self.stored_event.FromString(data)
        out: bytes = self.view_event(type=event.type, object=self.to_view(event.object)).SerializeToString()
        return out

    async def stream(self) -> AsyncIterator[bytes]:
        async for data in self.inner.stream():
            yield self._converted(data)

    async def stream_batches(self, max_bytes: int) -> AsyncIterator[builtins.list[bytes]]:
        async for batch in self.inner.stream_batches(max_bytes):
            yield [self._converted(data) for data in batch]

"""One client's watch on the watch cache (upstream cacher's cache_watcher.go): what selectors
see of an object (Attrs, Filter), the cache's events, and the watcher's bounded buffer.

A watcher is offered every event; it decides from the object's selector attributes
before and after the change whether the client sees ADDED, MODIFIED, DELETED or
nothing, and takes the encoded bytes the cache made once for every watcher. When its
buffer is full it ends with WatcherTooSlow instead of blocking the others.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kubeling import errors
from kubeling.selectors import FieldSelector, LabelSelector

if TYPE_CHECKING:  # the cache creates its watchers
    from apiserver.registry.strategy import Strategy
    from apiserver.watchcache import WatchCache

__all__ = ["ADDED", "BOOKMARK", "DELETED", "INITIAL_EVENTS_END", "MODIFIED", "Attrs", "CacheEvent", "CacheWatcher",
           "Entry", "Filter", "attrs_of", "batch_end", "change_type", "one_at_a_time"]

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
# On the BOOKMARK that ends a WatchList's initial events (metav1.InitialEventsAnnotationKey).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class Attrs:
    """What selectors look at, computed once per object version."""

    namespace: str
    labels: dict[str, str]
    fields: dict[str, str]
    index: str | None


def attrs_of(strategy: Strategy[Any], obj: Any) -> Attrs:
    fields = strategy.fields(obj)
    idx = strategy.index_field
    return Attrs(obj.metadata.namespace, dict(obj.metadata.labels), fields, fields.get(idx) if idx else None)


@dataclass(frozen=True, slots=True)
class Filter:
    namespace: str = ""
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, a: Attrs) -> bool:
        if self.namespace and a.namespace != self.namespace:
            return False
        return self.labels.matches(a.labels) and self.fields.matches(a.fields)


@dataclass(slots=True)
class Entry:
    obj: Any
    attrs: Attrs
    rv: int
    _added: bytes | None = None


@dataclass(slots=True)
class CacheEvent:
    type: str
    rv: int
    key: bytes
    obj: Any                 # new state; for DELETED the last state, with RV = the delete's
    attrs: Attrs
    prev: Any | None         # state before the change
    prev_attrs: Attrs | None
    _bytes: dict[str, bytes] = field(default_factory=dict)


class CacheWatcher:
    """One client's watch: a bounded buffer of encoded events, drained by `stream()`."""

    def __init__(self, cache: WatchCache, flt: Filter, *, capacity: int, bookmarks: bool,
                 index: str | None, initial: list[bytes]) -> None:
        self.cache = cache
        self.filter = flt
        self.capacity = capacity
        self.bookmarks = bookmarks
        self.index = index
        self._initial = initial
        self._queue: deque[bytes] = deque()
        self._wake = asyncio.Event()
        self.error: errors.ApiError | None = None
        self.done = False

    def offer(self, ev: CacheEvent) -> None:
        typ = change_type(self.filter, ev.type, ev.attrs, ev.prev_attrs)
        if typ is not None:
            self._push(self.cache.encode(ev, typ))

    def offer_bookmark(self, data: bytes) -> None:
        if self.bookmarks and not self._queue:
            self._push(data)

    def _push(self, data: bytes) -> None:
        if self.done:
            return
        if len(self._queue) >= self.capacity:
            self.terminate(errors.WatcherTooSlow(
                f"watch of {self.cache.strategy.plural} ended: the client fell more than {self.capacity} "
                "events behind; resume from the last resourceVersion received"))
            return
        self._queue.append(data)
        self._wake.set()

    def terminate(self, error: errors.ApiError | None = None) -> None:
        if not self.done:
            self.error = error
            self.done = True
            if error is not None:
                # Ended for cause: free the backlog now; the client resumes from the last
                # resourceVersion it received, so nothing is lost.
                self._queue.clear()
            self._wake.set()
            self.cache.remove(self)

    def stream(self) -> AsyncIterator[bytes]:
        """The encoded events, one at a time."""
        return one_at_a_time(self)

    async def stream_batches(self, max_bytes: int) -> AsyncIterator[list[bytes]]:
        """The encoded events, every one ready at once together (up to max_bytes in all,
        at least one): for a client that reads several per message."""
        try:
            initial, self._initial = self._initial, []
            start = 0
            while start < len(initial):
                end = batch_end(initial, start, max_bytes)
                yield initial[start:end]
                start = end
            while True:
                if self._queue:
                    batch = [self._queue.popleft()]
                    size = len(batch[0])
                    while self._queue and size + len(self._queue[0]) <= max_bytes:
                        batch.append(self._queue.popleft())
                        size += len(batch[-1])
                    yield batch
                    continue
                if self.done:
                    return
                self._wake.clear()
                await self._wake.wait()
        finally:
            self.terminate()


class BatchedWatcher(Protocol):
    def stream_batches(self, max_bytes: int) -> AsyncIterator[list[bytes]]: ...

    def terminate(self, error: errors.ApiError | None = None) -> None: ...


async def one_at_a_time(watcher: BatchedWatcher) -> AsyncIterator[bytes]:
    """A watcher's encoded events one by one; the watcher ends with the stream (now, not
    when the inner generator is collected)."""
    try:
        async for batch in watcher.stream_batches(0):
            for data in batch:
                yield data
    finally:
        watcher.terminate()


def change_type(flt: Filter, typ: str, attrs: Attrs, prev_attrs: Attrs | None) -> str | None:
    """What a watcher with this filter sees of a change (None: nothing), from the object's
    selector attributes after (`attrs`) and before (`prev_attrs`, None: it was new)."""
    cur = flt.matches(attrs) if typ != DELETED else False
    was = prev_attrs is not None and flt.matches(prev_attrs)
    if typ == DELETED:
        return DELETED if was else None
    if cur and was:
        return MODIFIED
    if cur:
        return ADDED
    if was:
        return DELETED  # no longer selected: the watcher sees it leave (upstream does the same)
    return None


def batch_end(items: list[bytes], start: int, max_bytes: int) -> int:
    """The end of the run of items from `start` that fits in max_bytes (at least one)."""
    end, size = start + 1, len(items[start])
    while end < len(items) and size + len(items[end]) <= max_bytes:
        size += len(items[end])
        end += 1
    return end

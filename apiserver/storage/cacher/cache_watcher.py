"""One client's watch on the watch cache (upstream cacher's cache_watcher.go): the cache's
events and the watcher's bounded buffer.

A watcher is offered every event; it decides from the object's selector attributes
before and after the change whether the client sees ADDED, MODIFIED, DELETED or
nothing, and takes the encoded bytes the cache made once for every watcher. When its
buffer is full it ends with WatcherTooSlow instead of blocking the others.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.storage.selection import Attrs, Filter, change_type
from kubeling import errors

__all__ = ["CacheEvent", "CacheWatcher", "Entry", "batch_end", "one_at_a_time"]


@dataclass(slots=True)
class Entry:
    obj: Any
    attrs: Attrs
    rv: int
    _added: bytes | None = None
    encoded: dict[str, bytes] | None = None  # the object as each format a LIST gave it in


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

    def __init__(self, resource: str, flt: Filter, *, encode: Callable[[CacheEvent, str], bytes],
                 on_end: Callable[[CacheWatcher], None], capacity: int, bookmarks: bool, index: str | None,
                 initial: list[bytes]) -> None:
        self.resource = resource
        self._encode = encode
        self._on_end = on_end
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
            self._push(self._encode(ev, typ))

    def offer_bookmark(self, data: bytes) -> None:
        if self.bookmarks and not self._queue:
            self._push(data)

    def _push(self, data: bytes) -> None:
        if self.done:
            return
        if len(self._queue) >= self.capacity:
            self.terminate(errors.WatcherTooSlow(
                f"watch of {self.resource} ended: the client fell more than {self.capacity} "
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
            self._on_end(self)

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


def batch_end(items: list[bytes], start: int, max_bytes: int) -> int:
    """The end of the run of items from `start` that fits in max_bytes (at least one)."""
    end, size = start + 1, len(items[start])
    while end < len(items) and size + len(items[end]) <= max_bytes:
        size += len(items[end])
        end += 1
    return end

"""One client's watch straight on etcd, for a resource kept out of the watch cache
(Strategy.watch_cache False; upstream's storage/etcd3/watcher.go behind UndecoratedStorage).

Each watcher is its own etcd watch: from the client's resourceVersion, or after a list
of the current state when the client asks for that state first. The key range is the
watch's namespace when it has one; selectors are applied here, to the object after and
before each change (etcd's prev_kv), with the same outcomes as the cache's watchers.
Nothing is buffered: the client reads at the etcd stream's pace, and a slow client
slows only its own stream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from apiserver.storage.cacher.cache_watcher import batch_end, one_at_a_time
from apiserver.storage.codec import Codec
from apiserver.storage.etcd import Compacted, Storage
from apiserver.storage.listing import list_objects
from apiserver.storage.selection import ADDED, BOOKMARK, DELETED, INITIAL_EVENTS_END, MODIFIED, Filter, change_type
from apiserver.storage.watch import PrefixWatch, WatchedEvent
from kubeling import errors

__all__ = ["EtcdWatcher"]

log = logging.getLogger(__name__)


class EtcdWatcher:
    """`stream()` / `stream_batches()` and `terminate()`, as CacheWatcher."""

    def __init__(self, storage: Storage, codec: Codec, prefix: bytes, flt: Filter, rv: int | None, *,
                 initial_events: bool | None, on_end: Callable[[EtcdWatcher], None]) -> None:
        self.storage = storage
        self.codec = codec
        self.prefix = prefix
        self.filter = flt
        self.error: errors.ApiError | None = None
        self.done = False
        self._rv = rv
        self._initial_events = initial_events
        self._on_end = on_end
        self._watch: PrefixWatch | None = None
        self._base = prefix + f"{flt.namespace}/".encode() if flt.namespace else prefix

    def terminate(self, error: errors.ApiError | None = None) -> None:
        if self.done:
            return
        self.done = True
        if error is not None:
            self.error = error
        if self._watch is not None:
            self._watch.cancel()
        self._on_end(self)

    def stream(self) -> AsyncIterator[bytes]:
        """The encoded events, one at a time."""
        return one_at_a_time(self)

    async def stream_batches(self, max_bytes: int) -> AsyncIterator[list[bytes]]:
        """The encoded events, as many together as one etcd message brought (up to
        max_bytes in all, at least one)."""
        plural = self.codec.resource
        try:
            if self._initial_events or (self._rv is None and self._initial_events is None):
                state, revision = await self._current_state()
                for batch in _batches(state, max_bytes):
                    yield batch
                start = revision + 1
            elif self._rv is None:  # sendInitialEvents=false: only what happens from now on
                start = await self.storage.revision() + 1
            else:
                start = self._rv + 1
            if self.done:
                return
            self._watch = PrefixWatch(self.storage.channel, self._base, start)
            async for changes in self._watch:
                encoded = [data for ev in changes.events if (data := self._encode(ev)) is not None]
                for batch in _batches(encoded, max_bytes):
                    yield batch
        except Compacted:
            self.error = errors.Expired("The resourceVersion for the provided watch is too old.")
        except errors.ApiError as err:
            self.error = err
        except ConnectionError as err:  # etcd canceled or ended the stream: the client resumes
            log.info("watch of %s on etcd ended: %s", plural, err)
            self.error = errors.ServiceUnavailable(
                f"the watch of {plural} was interrupted; resume from the last resourceVersion received")
        finally:
            self.terminate()

    async def _current_state(self) -> tuple[list[bytes], int]:
        """ADDED for every selected object, at one revision (and the WatchList's closing
        BOOKMARK), and that revision."""
        codec = self.codec
        items, meta = await list_objects(self.storage, codec, self.prefix, self.filter, 0, "")
        revision = int(meta.resourceVersion)
        out = [codec.event(ADDED, obj) for obj in items]
        if self._initial_events:
            end = codec.new()
            end.metadata.resourceVersion = str(revision)
            end.metadata.annotations[INITIAL_EVENTS_END] = "true"
            out.append(codec.event(BOOKMARK, end))
        return out, revision

    def _encode(self, ev: WatchedEvent) -> bytes | None:
        codec = self.codec
        kv = ev.kv
        if kv.key == self.prefix:
            return None  # a watch cache's progress sentinel (the resource was cached before)
        prev = codec.decode(ev.prev) if ev.prev is not None else None
        prev_attrs = codec.attrs(prev) if prev is not None else None
        if ev.deleted:
            if prev is None or prev_attrs is None:
                return None  # nothing known of it: nothing a client could be told
            typ = change_type(self.filter, DELETED, prev_attrs, prev_attrs)
            obj = prev
        else:
            obj = codec.decode(kv)
            typ = change_type(self.filter, ADDED if prev is None else MODIFIED, codec.attrs(obj),
                              prev_attrs)
            if typ == DELETED:  # it left the selection: its last selected state, at this revision
                obj = prev
        if typ is None:
            return None
        obj.metadata.resourceVersion = str(kv.mod_revision)
        return codec.event(typ, obj)


def _batches(items: list[bytes], max_bytes: int) -> list[list[bytes]]:
    out, start = [], 0
    while start < len(items):
        end = batch_end(items, start, max_bytes)
        out.append(items[start:end])
        start = end
    return out

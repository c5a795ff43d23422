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
from typing import TYPE_CHECKING, Any

from apiserver.cachewatcher import (
    ADDED,
    BOOKMARK,
    DELETED,
    INITIAL_EVENTS_END,
    MODIFIED,
    Filter,
    attrs_of,
    batch_end,
    change_type,
    one_at_a_time,
)
from apiserver.storage.etcd import Compacted
from apiserver.storage.watch import PrefixWatch, WatchedEvent
from kubeling import errors

if TYPE_CHECKING:  # the registry creates its watchers
    from apiserver.registry.store import Registry

__all__ = ["EtcdWatcher"]

log = logging.getLogger(__name__)


class EtcdWatcher:
    """`stream()` / `stream_batches()` and `terminate()`, as CacheWatcher."""

    def __init__(self, registry: Registry[Any], flt: Filter, rv: int | None, *, initial_events: bool | None,
                 on_end: Callable[[EtcdWatcher], None]) -> None:
        self.registry = registry
        self.filter = flt
        self.error: errors.ApiError | None = None
        self.done = False
        self._rv = rv
        self._initial_events = initial_events
        self._on_end = on_end
        self._watch: PrefixWatch | None = None
        prefix = registry.prefix
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
        plural = self.registry.strategy.plural
        try:
            if self._initial_events or (self._rv is None and self._initial_events is None):
                state, revision = await self._current_state()
                for batch in _batches(state, max_bytes):
                    yield batch
                start = revision + 1
            elif self._rv is None:  # sendInitialEvents=false: only what happens from now on
                start = await self.registry.storage.revision() + 1
            else:
                start = self._rv + 1
            if self.done:
                return
            self._watch = PrefixWatch(self.registry.storage.channel, self._base, start)
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
        reg = self.registry
        items, meta = await reg.list_from_etcd(self.filter, 0, "")
        revision = int(meta.resourceVersion)
        event_type = reg.strategy.event_message
        out = [event_type(type=ADDED, object=obj).SerializeToString() for obj in items]
        if self._initial_events:
            end: Any = reg.strategy.message()
            end.metadata.resourceVersion = str(revision)
            end.metadata.annotations[INITIAL_EVENTS_END] = "true"
            out.append(event_type(type=BOOKMARK, object=end).SerializeToString())
        return out, revision

    def _encode(self, ev: WatchedEvent) -> bytes | None:
        reg = self.registry
        kv = ev.kv
        if kv.key == reg.prefix:
            return None  # a watch cache's progress sentinel (the resource was cached before)
        prev = reg.decode(ev.prev) if ev.prev is not None else None
        prev_attrs = attrs_of(reg.strategy, prev) if prev is not None else None
        if ev.deleted:
            if prev is None or prev_attrs is None:
                return None  # nothing known of it: nothing a client could be told
            typ = change_type(self.filter, DELETED, prev_attrs, prev_attrs)
            obj = prev
        else:
            obj = reg.decode(kv)
            typ = change_type(self.filter, ADDED if prev is None else MODIFIED, attrs_of(reg.strategy, obj),
                              prev_attrs)
            if typ == DELETED:  # it left the selection: its last selected state, at this revision
                obj = prev
        if typ is None:
            return None
        obj.metadata.resourceVersion = str(kv.mod_revision)
        return reg.strategy.event_message(type=typ, object=obj).SerializeToString()


def _batches(items: list[bytes], max_bytes: int) -> list[list[bytes]]:
    out, start = [], 0
    while start < len(items):
        end = batch_end(items, start, max_bytes)
        out.append(items[start:end])
        start = end
    return out

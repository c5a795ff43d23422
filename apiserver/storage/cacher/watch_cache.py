"""The watch cache: one etcd watch per resource, fanned out to every watcher.

State: `store` (current objects, exact at `rv`) and `events`, a window of recent
changes; every change with revision > `oldest_rv` is in the window. A watch from
RV N replays the window after N and then receives live events, in order, exactly
once: registration happens without an `await` between replay and subscription, so
no event can fall between them (asyncio runs one task at a time).

On start the cache lists at revision R and opens its etcd watch *before* R (up to
`capacity` revisions back) so the window covers recent history: a client resuming
across an apiserver restart finds its RV still served.

Progress: to know that every change up to a revision has arrived (to become ready,
to serve "not older than N", to send bookmarks) the cache writes a sentinel key, the
bare prefix itself (never an object's key), and waits for its own watch to deliver
that write: etcd delivers a watch's events in revision order, so when the sentinel at
revision W arrives, everything before W has. (etcd 3.4's progress notifications do
not give that guarantee; see storage/watch.py.)

Each event is encoded once per variant (ADDED / MODIFIED / DELETED) and the same
bytes go to every matching watcher. A watcher whose buffer fills is ended with
WatcherTooSlow; it never blocks the others and never silently skips an event.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from apiserver.storage.cacher.cache_watcher import CacheEvent, CacheWatcher, Entry
from apiserver.storage.codec import Codec
from apiserver.storage.etcd import Compacted, Storage, prefix_end
from apiserver.storage.selection import ADDED, BOOKMARK, DELETED, INITIAL_EVENTS_END, MODIFIED, Attrs, Filter
from apiserver.storage.watch import PrefixWatch, WatchBatch
from kubeling import errors
from kubeling.periodic import cancel_and_wait

__all__ = ["WatchCache"]

log = logging.getLogger(__name__)


class WatchCache:
    def __init__(self, codec: Codec, storage: Storage, prefix: bytes, *, capacity: int = 10_000,
                 bookmark_interval: float = 60.0, watcher_buffer: int = 1_000) -> None:
        self.codec = codec
        self.resource = codec.resource
        self.storage = storage
        self.prefix = prefix
        self.decode = codec.decode
        self.capacity = capacity
        self.bookmark_interval = bookmark_interval
        self.watcher_buffer = watcher_buffer
        self.store: dict[bytes, Entry] = {}  # changed through _put, _drop and _clear only
        self._by_id: dict[int, Entry] = {}  # id(entry.obj): a listed object's entry, for its encodings
        self._order: list[bytes] | None = None  # the keys sorted, until one comes or goes
        # The keys by their index field's value (pods by node, nodes by name): a kubelet's
        # list or watch of its own finds its objects here instead of among all of them.
        self._keys_by_index: dict[str, set[bytes]] = {}
        # Bumped whenever `store` changes: what is derived from the whole store (the RBAC
        # policy) is rebuilt only when this moved.
        self.changes = 0
        self.events: deque[CacheEvent] = deque()
        self.oldest_rv = 0
        self.rv = 0
        self.ready = asyncio.Event()
        self._unindexed: set[CacheWatcher] = set()
        self._indexed: dict[str, set[CacheWatcher]] = {}
        self._rv_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._progress_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._list_rv = 0
        self._watch_rv = 0

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(), name=f"watchcache-{self.resource}"),
                       asyncio.create_task(self._bookmarks(), name=f"bookmarks-{self.resource}")]

    async def stop(self) -> None:
        for t in [*self._tasks, self._progress_task]:
            await cancel_and_wait(t)
        for w in list(self.watchers()):
            w.terminate(errors.ServiceUnavailable(
                "the apiserver is shutting down; resume from the last resourceVersion"))

    def watchers(self) -> list[CacheWatcher]:
        out = list(self._unindexed)
        for ws in self._indexed.values():
            out.extend(ws)
        return out

    @property
    def watcher_count(self) -> int:
        return len(self._unindexed) + sum(len(ws) for ws in self._indexed.values())

    async def _run(self) -> None:
        backoff = 0.1
        resume_from: int | None = None  # after a transient failure: continue, no relist
        while True:
            try:
                if resume_from is None:
                    start = await self._initialize()
                else:
                    start = resume_from
                await self._follow(start)
            except asyncio.CancelledError:
                raise
            except Compacted:
                log.warning("watch cache %s: history compacted under us; relisting", self.resource)
                self._reset(errors.Expired("the watch cache was re-initialized; relist"))
                resume_from = None
            except Exception as err:  # etcd restarts, stream errors: resume where we were
                (log.warning if backoff == 0.1 else log.debug)(
                    "watch cache %s: etcd watch failed (%s); resuming after revision %d",
                    self.resource, err, self.rv)
                resume_from = self.rv + 1 if self.ready.is_set() else None
                if resume_from is None:
                    self._reset(errors.ServiceUnavailable("the watch cache is re-initializing"))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1

    def _reset(self, error: errors.ApiError) -> None:
        self.ready.clear()
        for w in self.watchers():
            w.terminate(error)
        self._clear()
        self.events.clear()

    async def _initialize(self) -> int:
        """List at R, then return the revision to watch from (before R, to fill the window)."""
        kvs, rev, _, _ = await self.storage.range(self.prefix, prefix_end(self.prefix))
        self._clear()
        for kv in kvs:
            if kv.key == self.prefix:
                continue  # the progress sentinel
            obj = self.decode(kv)
            self._put(kv.key, Entry(obj, self.attrs(obj), kv.mod_revision))
        self.events.clear()
        self.rv = rev
        self._list_rv = rev
        self._watch_rv = 0
        start = max(1, rev - self.capacity + 1)
        self.oldest_rv = start - 1
        log.info("watch cache %s: %d objects at revision %d", self.resource, len(self.store), rev)
        return start

    async def _follow(self, start: int) -> None:
        try:
            await self._follow_from(start)
        except Compacted as c:
            if self.ready.is_set() or c.compact_revision > self._list_rv:
                raise
            # The prefill start was compacted: the window begins at the compaction.
            self.oldest_rv = c.compact_revision
            await self._follow_from(c.compact_revision + 1)

    async def _follow_from(self, start: int) -> None:
        watch = PrefixWatch(self.storage.channel, self.prefix, start)
        # The sentinel's revision is above the list revision: its arrival proves the
        # window holds every event up to the list (a watch from the past includes it).
        self.request_progress()
        try:
            async for batch in watch:
                self._apply(batch)
        finally:
            watch.cancel()
        raise ConnectionError("etcd ended the watch stream")

    def request_progress(self) -> None:
        """Write the sentinel (one write in flight at a time); `rv` advances when it arrives."""
        if self._progress_task is None or self._progress_task.done():
            self._progress_task = asyncio.create_task(self._write_sentinel())

    async def _write_sentinel(self) -> None:
        try:
            await self.storage.put(self.prefix, b"kubeling-progress")
        except Exception as err:  # the watch loop notices etcd trouble; waiters time out
            log.debug("watch cache %s: progress write failed: %s", self.resource, err)

    # ------------------------------------------------------------ events

    def attrs(self, obj: Any) -> Attrs:
        return self.codec.attrs(obj)

    def _apply(self, batch: WatchBatch) -> None:
        live = self.ready.is_set()
        for wev in batch.events:
            kv, rv = wev.kv, wev.kv.mod_revision
            if kv.key == self.prefix:
                continue  # the progress sentinel: its revision counts below, nothing else
            history = rv <= self._list_rv  # prefill: the store already reflects it
            if history:
                try:
                    ev = self._event(wev, rv, history)
                except errors.InternalError:
                    # An old value this apiserver cannot read any more (encrypted with a key
                    # since dropped): the window starts after it, a watch from before relists.
                    self.events.clear()
                    self.oldest_rv = rv
                    continue
            else:
                ev = self._event(wev, rv, history)
            if ev is None:
                continue
            self._append(ev)
            if live:
                self._dispatch(ev)
        # The store is exact at the list revision from the start, but the window holds
        # every event up to it only once the etcd watch itself has reached it (an event,
        # or the sentinel, at or past it).
        self._watch_rv = max(self._watch_rv, batch.revision)
        if not live and self._watch_rv >= self._list_rv:
            self.ready.set()
        if batch.revision > self.rv:
            self.rv = batch.revision
        self._wake_waiters()

    def _event(self, wev: Any, rv: int, history: bool) -> CacheEvent | None:
        """The cache event of one etcd event (None: a deletion of nothing known), the store
        updated unless it is history."""
        kv = wev.kv
        prev = None
        if wev.prev is not None:
            try:
                prev = self.decode(wev.prev)
            except errors.InternalError:
                if history:
                    raise
                # live: a value this apiserver cannot read (an old key), the cache's copy instead
        if prev is None and not history:
            entry = self.store.get(kv.key)
            prev = entry.obj if entry else None
        if wev.deleted:
            if prev is None:
                return None  # nothing known of it: nothing a watcher could be told
            obj = type(prev)()
            obj.CopyFrom(prev)
            obj.metadata.resourceVersion = str(rv)
            ev = CacheEvent(DELETED, rv, kv.key, obj, self.attrs(obj), prev, None)
            ev.prev_attrs = ev.attrs
            if not history:
                self._drop(kv.key)
            return ev
        obj = self.decode(kv)
        typ = ADDED if kv.create_revision == kv.mod_revision or prev is None else MODIFIED
        ev = CacheEvent(typ, rv, kv.key, obj, self.attrs(obj), prev, self.attrs(prev) if prev is not None else None)
        if not history:
            self._put(kv.key, Entry(obj, ev.attrs, rv))
        return ev

    def _put(self, key: bytes, entry: Entry) -> None:
        old = self.store.get(key)
        if old is None:
            self._order = None
        else:
            self._by_id.pop(id(old.obj), None)
        if old is None or old.attrs.index != entry.attrs.index:
            if old is not None:
                self._unindex_key(key, old)
            if entry.attrs.index is not None:
                self._keys_by_index.setdefault(entry.attrs.index, set()).add(key)
        self.store[key] = entry
        self._by_id[id(entry.obj)] = entry
        self.changes += 1

    def _drop(self, key: bytes) -> None:
        old = self.store.pop(key, None)
        if old is not None:
            self._by_id.pop(id(old.obj), None)
            self._unindex_key(key, old)
            self._order = None
        self.changes += 1

    def _unindex_key(self, key: bytes, entry: Entry) -> None:
        value = entry.attrs.index
        keys = self._keys_by_index.get(value) if value is not None else None
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys_by_index[value]  # type: ignore[arg-type]

    def _clear(self) -> None:
        self.store = {}
        self._by_id = {}
        self._keys_by_index = {}
        self._order = None
        self.changes += 1

    def _append(self, ev: CacheEvent) -> None:
        self.events.append(ev)
        while len(self.events) > self.capacity:
            self.oldest_rv = self.events.popleft().rv

    def _dispatch(self, ev: CacheEvent) -> None:
        targets = list(self._unindexed)
        if self._indexed:
            for value in {ev.attrs.index, ev.prev_attrs.index if ev.prev_attrs else None}:
                if value is not None and value in self._indexed:
                    targets.extend(self._indexed[value])
        for w in targets:
            w.offer(ev)

    def encode(self, ev: CacheEvent, typ: str) -> bytes:
        data = ev._bytes.get(typ)
        if data is None:
            obj = ev.obj
            if typ == DELETED and ev.type != DELETED:
                assert ev.prev is not None  # only a MODIFIED that left the selection gets here
                obj = type(ev.prev)()
                obj.CopyFrom(ev.prev)
                obj.metadata.resourceVersion = str(ev.rv)
            data = self.codec.event(typ, obj)
            ev._bytes[typ] = data
        return data

    def _encode_added(self, entry: Entry) -> bytes:
        if entry._added is None:
            entry._added = self.codec.event(ADDED, entry.obj)
        return entry._added

    # ------------------------------------------------------------ compaction

    def compacted(self, revision: int) -> None:
        """etcd history up to `revision` is gone: so are watches from before it."""
        if revision > self.oldest_rv:
            self.oldest_rv = revision
            while self.events and self.events[0].rv <= revision:
                self.events.popleft()

    # ------------------------------------------------------------ readers

    async def wait_for(self, rv: int, timeout: float = 3.0) -> None:
        """Return once the cache has seen revision rv (upstream waitUntilFreshAndBlock)."""
        if not self.ready.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self.ready.wait()
            except TimeoutError:
                raise errors.Timeout(f"the {self.resource} watch cache is not ready yet; retry") from None
        if rv <= self.rv:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._rv_waiters.append((rv, fut))
        self.request_progress()
        try:
            async with asyncio.timeout(timeout):
                await fut
        except TimeoutError:
            raise errors.Timeout(f"Too large resource version: {rv}, current: {self.rv}") from None

    def _wake_waiters(self) -> None:
        if not self._rv_waiters:
            return
        keep = []
        for rv, fut in self._rv_waiters:
            if fut.done():
                continue
            if rv <= self.rv:
                fut.set_result(None)
            else:
                keep.append((rv, fut))
        self._rv_waiters = keep

    def _sorted(self) -> builtins.list[Entry]:
        if self._order is None:
            self._order = sorted(self.store)
        store = self.store
        return [store[k] for k in self._order]

    def _selected(self, flt: Filter) -> builtins.list[Entry]:
        """The entries the filter selects, in key order; through the index when the filter
        names its field exactly (a kubelet's `spec.nodeName=<node>`), else over them all."""
        index_field = self.codec.index_field
        value = flt.fields.exact(index_field) if index_field else None
        if value is not None:
            store = self.store
            entries = [store[k] for k in sorted(self._keys_by_index.get(value, ()))]
        else:
            entries = self._sorted()
        if flt.namespace or not flt.labels.empty() or not flt.fields.empty():
            entries = [e for e in entries if flt.matches(e.attrs)]
        return entries

    def list(self, flt: Filter) -> tuple[builtins.list[Any], int]:
        return [e.obj for e in self._selected(flt)], self.rv

    def encoded(self, objs: builtins.list[Any], fmt: str, encode: Callable[[Any], bytes]) -> builtins.list[bytes]:
        """Objects in a format (JSON, protobuf), each made once per stored object: a LIST of
        thousands costs a join, not thousands of encodings (upstream's cachingObject). An
        object that is not the cache's current one is encoded each time."""
        by_id, out = self._by_id, []
        for obj in objs:
            entry = by_id.get(id(obj))
            if entry is None or entry.obj is not obj:
                out.append(encode(obj))
                continue
            cached = entry.encoded
            if cached is None:
                cached = entry.encoded = {}
            data = cached.get(fmt)
            if data is None:
                data = cached[fmt] = encode(obj)
            out.append(data)
        return out

    def get(self, key: bytes) -> Any | None:
        entry = self.store.get(key)
        return entry.obj if entry else None

    def watch(self, flt: Filter, rv: int | None, *, bookmarks: bool,
              initial_events: bool | None = None) -> CacheWatcher:
        """Register a watcher (call after `wait_for(rv)`); rv None means current state first.
        initial_events (WatchList) overrides that: True sends the current state (the cache
        is at rv or newer) then a BOOKMARK annotated k8s.io/initial-events-end at the
        state's revision, and only later changes; False with rv None, only later changes."""
        index_field = self.codec.index_field
        index = flt.fields.exact(index_field) if index_field else None
        initial: list[bytes] = []
        if initial_events:
            initial = [self._encode_added(e) for e in self._selected(flt)]
            end = self.codec.new()
            end.metadata.resourceVersion = str(self.rv)
            end.metadata.annotations[INITIAL_EVENTS_END] = "true"
            initial.append(self.codec.event(BOOKMARK, end))
            rv = self.rv
        elif rv is None and initial_events is None:
            initial = [self._encode_added(e) for e in self._selected(flt)]
        elif rv is not None and rv < self.oldest_rv:
            raise errors.Expired(f"too old resource version: {rv} ({self.oldest_rv})")
        w = CacheWatcher(self.resource, flt, encode=self.encode, on_end=self.remove, capacity=self.watcher_buffer,
                         bookmarks=bookmarks, index=index, initial=initial)
        if rv is not None and rv < self.rv:
            # Replay: events after rv, oldest first. The deque is ordered by revision.
            for ev in self._events_after(rv):
                w.offer(ev)
                if w.done:
                    break
        if index is None:
            self._unindexed.add(w)
        else:
            self._indexed.setdefault(index, set()).add(w)
        return w

    def _events_after(self, rv: int) -> builtins.list[CacheEvent]:
        events = self.events
        lo, hi = 0, len(events)
        while lo < hi:  # bisect on a deque (indexing is O(1) near the ends, fine here)
            mid = (lo + hi) // 2
            if events[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return [events[i] for i in range(lo, len(events))]

    def remove(self, w: CacheWatcher) -> None:
        if w.index is None:
            self._unindexed.discard(w)
        else:
            ws = self._indexed.get(w.index)
            if ws is not None:
                ws.discard(w)
                if not ws:
                    del self._indexed[w.index]

    # ------------------------------------------------------------ bookmarks

    async def _bookmarks(self) -> None:
        while True:
            await asyncio.sleep(self.bookmark_interval)
            wanted = [w for w in self.watchers() if w.bookmarks]
            if not self.ready.is_set() or not wanted:
                continue
            self.request_progress()
            await asyncio.sleep(min(0.05, self.bookmark_interval / 4))
            obj = self.codec.new()
            obj.metadata.resourceVersion = str(self.rv)
            data = self.codec.event(BOOKMARK, obj)
            for w in wanted:
                w.offer_bookmark(data)


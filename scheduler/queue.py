"""The scheduling queue (upstream's PriorityQueue): activeQ, backoffQ, unschedulable pods.

- activeQ: ordered by the QueueSort plugin; `pop` waits for a pod.
- backoffQ: pods that failed, each waiting initial × 2^(attempts-1) (capped) before retry.
- unschedulable: pods no node fits; a cluster event moves them back only when one of the
  plugins that rejected them registered interest in it (queueing hints); pods left there
  longer than `max_unschedulable` are flushed back anyway.
- gated: pods a PreEnqueue plugin refused (scheduling gates); they re-enter on update.
- nominator: pods nominated to a node by preemption, seen by Filter of lower priority pods.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.interface import ClusterEvent
from scheduler.framework.status import Status
from scheduler.framework.types import PodInfo, QueuedPodInfo, pod_key

__all__ = ["SchedulingQueue", "QueueStats"]

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
SortKey = Callable[[QueuedPodInfo], tuple[float, ...]]


@dataclass(order=False)
class _Entry:
    qpi: QueuedPodInfo
    less: Less
    seq: int
    # The pod as it was pushed, for `less`: an update changes the live qpi, and the stale
    # entry it leaves in the heap must keep comparing as it did (the heap's invariant).
    view: QueuedPodInfo
    valid: bool = True

    def __lt__(self, other: _Entry) -> bool:
        if self.less(self.view, other.view):
            return True
        if self.less(other.view, self.view):
            return False
        return self.seq < other.seq


@dataclass
class QueueStats:
    active: int
    backoff: int
    unschedulable: int
    gated: int


@dataclass
class _Heap:
    """Pods in `less`'s order, ties in push order. With a `key`, the heap holds
    (key, seq, entry) tuples, compared in C; without, entries that call `less`."""

    less: Less
    key: SortKey | None = None
    heap: list[_Entry | tuple[tuple[float, ...], int, _Entry]] = field(default_factory=list)
    items: dict[str, _Entry] = field(default_factory=dict)
    seq: itertools.count = field(default_factory=itertools.count)

    def push(self, qpi: QueuedPodInfo) -> None:
        self.remove(qpi.key)
        if self.key is None:
            entry = _Entry(qpi, self.less, next(self.seq), dataclasses.replace(qpi))
            heapq.heappush(self.heap, entry)
        else:  # the key is taken now: nothing to snapshot
            entry = _Entry(qpi, self.less, next(self.seq), qpi)
            heapq.heappush(self.heap, (self.key(qpi), entry.seq, entry))
        self.items[qpi.key] = entry

    @staticmethod
    def _entry(item: _Entry | tuple[tuple[float, ...], int, _Entry]) -> _Entry:
        return item if isinstance(item, _Entry) else item[2]

    def pop(self) -> QueuedPodInfo | None:
        while self.heap:
            entry = self._entry(heapq.heappop(self.heap))
            if entry.valid:
                del self.items[entry.qpi.key]
                return entry.qpi
        return None

    def peek(self) -> QueuedPodInfo | None:
        while self.heap and not self._entry(self.heap[0]).valid:
            heapq.heappop(self.heap)
        return self._entry(self.heap[0]).qpi if self.heap else None

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self.items.pop(key, None)
        if entry is None:
            return None
        entry.valid = False
        return entry.qpi

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self.items.get(key)
        return entry.qpi if entry else None

    def __len__(self) -> int:
        return len(self.items)


class SchedulingQueue:
    def __init__(self, less: Less, *, sort_key: SortKey | None = None,
                 pre_enqueue: Callable[[Pod], Status] | None = None,
                 plugin_events: dict[str, list[ClusterEvent]] | None = None,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_unschedulable: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self.pre_enqueue = pre_enqueue
        self.plugin_events = plugin_events or {}
        self.active = _Heap(less, sort_key)
        self.backoff = _Heap(lambda a, b: self.backoff_expiry(a) < self.backoff_expiry(b),
                             lambda qpi: (self.backoff_expiry(qpi),))
        self.unschedulable: dict[str, QueuedPodInfo] = {}
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self._nominated: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod
        self._nominated_node: dict[str, str] = {}            # uid -> node
        self._ready = asyncio.Event()
        self._closed = False

    def reconfigure(self, less: Less, *, sort_key: SortKey | None = None,
                    plugin_events: dict[str, list[ClusterEvent]] | None = None) -> None:
        """A new QueueSort order (activeQ re-sorted by it) and the new plugins' events."""
        self.plugin_events = plugin_events or {}
        waiting = [entry.qpi for entry in self.active.items.values()]
        self.active = _Heap(less, sort_key)
        for qpi in waiting:
            self.active.push(qpi)

    def move_all_to_active_or_backoff(self) -> None:
        """Every pod waiting for a cluster change tries again (upstream MoveAllToActiveOrBackoffQueue,
        here after the profiles changed); a gated pod asks its PreEnqueue plugins again."""
        for qpi in list(self.unschedulable.values()):
            if qpi.gated:
                del self.unschedulable[qpi.key]
                self._enqueue(qpi)
            else:
                self._move(qpi)
        self.move_request_cycle = self.scheduling_cycle

    # ------------------------------------------------------------ adding

    def _enqueue(self, qpi: QueuedPodInfo) -> None:
        """To activeQ, or to the gated set when a PreEnqueue plugin says no."""
        if self.pre_enqueue is not None:
            s = self.pre_enqueue(qpi.pod)
            if not s.ok:
                qpi.gated = True
                qpi.unschedulable_plugins = {s.plugin} if s.plugin else set()
                self.unschedulable[qpi.key] = qpi
                return
        qpi.gated = False
        self.unschedulable.pop(qpi.key, None)
        self.backoff.remove(qpi.key)
        self.active.push(qpi)
        self._ready.set()

    def add(self, pod: Pod) -> None:
        """A new pending pod."""
        self._enqueue(QueuedPodInfo(PodInfo.of(pod), timestamp=self.clock()))

    def update(self, old: Pod, new: Pod) -> None:
        key = pod_key(new)
        for heap in (self.active, self.backoff):
            qpi = heap.get(key)
            if qpi is not None:
                qpi.pod_info = PodInfo.of(new)
                heap.push(qpi)
                return
        qpi = self.unschedulable.get(key)
        if qpi is None:
            self.add(new)
            return
        qpi.pod_info = PodInfo.of(new)
        if qpi.gated or _pod_changed(old, new):
            # An update may make it schedulable (upstream: isPodUpdated): try again.
            del self.unschedulable[key]
            if not qpi.gated and self._backing_off(qpi):
                self.backoff.push(qpi)
            else:
                self._enqueue(qpi)

    def delete(self, pod: Pod) -> None:
        key = pod_key(pod)
        self.active.remove(key)
        self.backoff.remove(key)
        self.unschedulable.pop(key, None)
        self.delete_nominated(pod)

    def add_unschedulable(self, qpi: QueuedPodInfo, cycle: int, *, error: bool = False) -> None:
        """A pod that failed its cycle `cycle`. If a move request came in meanwhile (the
        cluster changed while it was being scheduled) or it failed on an error, it goes to
        backoffQ at once; otherwise it waits as unschedulable for a matching event."""
        qpi.timestamp = self.clock()
        if self.move_request_cycle >= cycle or error or not qpi.unschedulable_plugins:
            self.backoff.push(qpi)
        else:
            self.unschedulable[qpi.key] = qpi

    # ------------------------------------------------------------ popping

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule (None once closed)."""
        while True:
            self.flush_backoff_completed()
            qpi = self.active.pop()
            if qpi is not None:
                qpi.attempts += 1
                if qpi.initial_attempt_timestamp is None:
                    qpi.initial_attempt_timestamp = self.clock()
                self.scheduling_cycle += 1
                return qpi
            if self._closed:
                return None
            self._ready.clear()
            timeout = self._next_backoff_wait()
            try:
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
            except TimeoutError:
                pass

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    # ------------------------------------------------------------ backoff

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        if qpi.attempts <= 0:
            return 0.0
        return min(self.initial_backoff * (2 ** (qpi.attempts - 1)), self.max_backoff)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def _backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_expiry(qpi) > self.clock()

    def _next_backoff_wait(self) -> float | None:
        head = self.backoff.peek()
        if head is None:
            return None
        return max(0.0, self.backoff_expiry(head) - self.clock()) + 0.001

    def flush_backoff_completed(self) -> None:
        now = self.clock()
        while True:
            head = self.backoff.peek()
            if head is None or self.backoff_expiry(head) > now:
                return
            self.backoff.pop()
            self.active.push(head)
            self._ready.set()

    def flush_unschedulable_leftover(self) -> None:
        now = self.clock()
        stale = [q for q in self.unschedulable.values()
                 if not q.gated and now - q.timestamp > self.max_unschedulable]
        for qpi in stale:
            self._move(qpi)

    # ------------------------------------------------------------ events

    def move_all_on_event(self, event: ClusterEvent) -> int:
        """Move unschedulable pods that a plugin says this event may help; returns how many."""
        moved = 0
        for qpi in list(self.unschedulable.values()):
            # gated pods move on their own updates (see update), not on cluster events
            if not qpi.gated and self._interested(qpi, event):
                self._move(qpi)
                moved += 1
        self.move_request_cycle = self.scheduling_cycle
        return moved

    def _interested(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        if not qpi.unschedulable_plugins:
            return True
        for plugin in qpi.unschedulable_plugins:
            registered = self.plugin_events.get(plugin)
            if registered is None or any(r.matches(event) for r in registered):
                return True
        return False

    def _move(self, qpi: QueuedPodInfo) -> None:
        self.unschedulable.pop(qpi.key, None)
        if self._backing_off(qpi):
            self.backoff.push(qpi)
        else:
            self.active.push(qpi)
            self._ready.set()

    # ------------------------------------------------------------ nominator

    def add_nominated(self, info: PodInfo, node: str) -> None:
        self.delete_nominated(info.pod)
        if node:
            self._nominated.setdefault(node, {})[info.uid] = info
            self._nominated_node[info.uid] = node

    def delete_nominated(self, pod: Pod) -> None:
        uid = str(pod.metadata.uid)
        node = self._nominated_node.pop(uid, None)
        if node is not None:
            pods = self._nominated.get(node, {})
            pods.pop(uid, None)
            if not pods:
                self._nominated.pop(node, None)

    def has_nominations(self) -> bool:
        return bool(self._nominated)

    def nominated_for_node(self, node: str) -> list[PodInfo]:
        return list(self._nominated.get(node, {}).values())

    # ------------------------------------------------------------ introspection

    def stats(self) -> QueueStats:
        gated = sum(1 for q in self.unschedulable.values() if q.gated)
        return QueueStats(len(self.active), len(self.backoff), len(self.unschedulable) - gated, gated)

    def __contains__(self, pod: Pod) -> bool:
        key = pod_key(pod)
        return key in self.active.items or key in self.backoff.items or key in self.unschedulable


def _pod_changed(old: Pod, new: Pod) -> bool:
    """Whether an update could change scheduling (not just status or resourceVersion)."""
    return (old.spec.SerializeToString(deterministic=True) != new.spec.SerializeToString(deterministic=True)
            or dict(old.metadata.labels) != dict(new.metadata.labels)
            or dict(old.metadata.annotations) != dict(new.metadata.annotations))

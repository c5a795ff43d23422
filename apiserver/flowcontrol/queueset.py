"""One priority level's seats and queues (upstream's fairqueuing/queueset): a request takes
as many seats as its work needs; when the level's seats are taken it waits in one of the
level's queues — the least loaded of the few its flow is dealt by shuffle sharding, so one
flow fills few queues — and the queues are served by virtual finish time (fair queuing),
so that flows share the level's seat-seconds fairly whatever their requests' widths. A
full queue, a wait past the limit, or a level that rejects instead of queueing answers
429."""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kubeling import errors

__all__ = ["PriorityLevel", "Rejected", "Seat", "TOO_MANY"]

TOO_MANY = "Too many requests, please try again later."
_HANDS_KEPT = 4096  # flows whose hand of queues is remembered (then forgotten all at once)


class Rejected(errors.TooManyRequests):
    """A 429 from a level, and why (upstream's metric reasons: queue-full, time-out,
    concurrency-limit)."""

    def __init__(self, why: str) -> None:
        super().__init__(TOO_MANY, metadata={"retryAfterSeconds": "1"})
        self.why = why


@dataclass(eq=False)
class _Waiting:
    width: int
    ready: asyncio.Future[Seat]  # the seats, once dispatched


@dataclass(eq=False)
class _Queue:
    """One of a level's queues: its waiting requests, the seats its requests hold, and the
    virtual time at which its next request starts (upstream's nextDispatchR)."""

    waiting: deque[_Waiting] = field(default_factory=deque)
    executing_seats: int = 0
    next_r: float = 0.0

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.executing_seats

    @property
    def seats(self) -> int:
        return self.executing_seats + sum(w.width for w in self.waiting)


@dataclass(eq=False)
class Seat:
    """Seats held by one request, given back once (release)."""

    level: PriorityLevel
    width: int
    queue: _Queue | None = None
    started: float = 0.0
    charged: float = 0.0  # the work charged to its queue when it started
    _released: bool = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.level.give_back(self)


@dataclass(eq=False)
class PriorityLevel:
    name: str
    uid: str
    exempt: bool
    seats: int  # its concurrency limit (exempt: unlimited)
    reject: bool = False  # limitResponse Reject: no queues
    queues: int = 64
    hand_size: int = 8
    queue_length_limit: int = 50
    wait_limit: float = 15.0  # upstream's longest wait in a queue before 429
    clock: Callable[[], float] = time.monotonic
    in_use: int = 0
    _queues: list[_Queue] = field(default_factory=list)
    _busy: set[_Queue] = field(default_factory=set)  # the queues with requests waiting or executing
    # Virtual time (seat-seconds per active queue), as upstream's fair queuing: it runs at
    # the seats in use (or wanted, at most all) over the queues that have requests, so a
    # queue's requests are dispatched as if each active queue had an equal share of seats
    _r: float = 0.0
    _r_at: float = 0.0
    # what a request is charged when it starts, per seat, until it ends and what it really
    # took is known: the level's recent service time (an average of what requests took)
    _estimate: float = 0.1
    # counters, for tests
    dispatched: int = 0
    rejected: int = 0
    _hands: dict[str, list[int]] = field(default_factory=dict)  # flow -> its queues (dealt once)

    def __post_init__(self) -> None:
        self._queues = [_Queue() for _ in range(max(self.queues, 1))]
        self._r_at = self.clock()

    @property
    def waiting(self) -> int:
        return sum(len(q.waiting) for q in self._busy)

    def _note(self, queue: _Queue) -> None:
        """Keep `_busy` (the queues with requests waiting or executing) as the queue now is:
        every request touches it twice, so nothing on that path scans all the queues."""
        if queue.idle:
            self._busy.discard(queue)
        else:
            self._busy.add(queue)

    def _sync(self) -> None:
        """Advance virtual time to now."""
        now = self.clock()
        active = self._busy
        if active:
            wanted = min(sum(q.seats for q in active), self.seats)
            self._r += (now - self._r_at) * wanted / len(active)
        self._r_at = now

    def _deal(self, flow: str) -> _Queue:
        """The least loaded (in seats) of the queues this flow's hand holds (the same hand
        every time: shuffle sharding, so that one flow fills few queues)."""
        hand = self._hands.get(flow)
        if hand is None:  # dealing is a seeded shuffle: dozens of µs, the same every time
            if len(self._hands) >= _HANDS_KEPT:
                self._hands.clear()
            hand = self._hands[flow] = random.Random(zlib.crc32(flow.encode())).sample(
                range(len(self._queues)), min(self.hand_size, len(self._queues)))
        return min((self._queues[i] for i in hand), key=lambda q: q.seats)

    def _start(self, queue: _Queue, width: int) -> Seat:
        """A request of the queue starts: its work (width × the estimated service time) is
        charged to the queue's virtual time, corrected by what it really took when it ends."""
        queue.next_r += width * self._estimate
        queue.executing_seats += width
        self._note(queue)
        self.in_use += width
        self.dispatched += 1
        return Seat(self, width, queue, self.clock(), width * self._estimate)

    async def acquire(self, flow: str, width: int) -> Seat:
        if self.exempt:
            self.dispatched += 1
            return Seat(self, 0)
        width = max(1, min(width, self.seats))
        self._sync()
        queue = self._deal(flow)
        if queue.idle:
            queue.next_r = max(queue.next_r, self._r)
        if self.in_use + width <= self.seats and not self.waiting:
            return self._start(queue, width)
        if self.reject:
            self.rejected += 1
            raise Rejected("concurrency-limit")
        if len(queue.waiting) >= self.queue_length_limit:
            self.rejected += 1
            raise Rejected("queue-full")
        waiting = _Waiting(width, asyncio.get_running_loop().create_future())
        queue.waiting.append(waiting)
        self._note(queue)
        try:
            async with asyncio.timeout(self.wait_limit):
                await asyncio.shield(waiting.ready)
        except TimeoutError:
            if not waiting.ready.done():
                queue.waiting.remove(waiting)
                self._note(queue)
                self.rejected += 1
                raise Rejected("time-out") from None
        except asyncio.CancelledError:
            if waiting.ready.done():
                self.give_back(waiting.ready.result())  # dispatched as the client went: free again
            else:
                queue.waiting.remove(waiting)
                self._note(queue)
            raise
        return waiting.ready.result()

    def give_back(self, seat: Seat) -> None:
        self._sync()
        self.in_use -= seat.width
        queue = seat.queue
        if queue is not None:
            took = self.clock() - seat.started
            queue.executing_seats -= seat.width
            self._note(queue)
            queue.next_r += seat.width * took - seat.charged  # what it really took counts
            self._estimate += (took - self._estimate) / 8
        self._dispatch()

    def _dispatch(self) -> None:
        """Start the waiting request whose virtual finish (its queue's next start plus its
        work) comes first, while it fits; a head that does not fit waits for its seats
        and nothing overtakes it (wide requests are not starved)."""
        while True:
            candidates = [q for q in self._busy if q.waiting]
            if not candidates:
                return
            estimate = self._estimate
            queue = min(candidates, key=lambda q: q.next_r + q.waiting[0].width * estimate)
            head = queue.waiting[0]
            if head.ready.done():  # its waiter gave up
                queue.waiting.popleft()
                self._note(queue)
                continue
            if self.in_use + head.width > self.seats:
                return
            queue.waiting.popleft()
            head.ready.set_result(self._start(queue, head.width))

"""One priority level's seats and queues (upstream's fairqueuing/queueset, simplified): a
request takes as many seats as its work needs; when the level's seats are taken it waits
in one of the level's queues — the shortest of the few its flow is dealt by shuffle
sharding, so one flow fills few queues — and queues are served in turn, so that flows
share the level fairly. A full queue, a wait past the limit, or a level that rejects
instead of queueing answers 429."""

from __future__ import annotations

import asyncio
import random
import zlib
from collections import deque
from dataclasses import dataclass, field

from kubeling import errors

__all__ = ["PriorityLevel", "Rejected", "Seat", "TOO_MANY"]

TOO_MANY = "Too many requests, please try again later."


class Rejected(errors.TooManyRequests):
    """A 429 from a level, and why (upstream's metric reasons: queue-full, time-out,
    concurrency-limit)."""

    def __init__(self, why: str) -> None:
        super().__init__(TOO_MANY, metadata={"retryAfterSeconds": "1"})
        self.why = why


@dataclass(eq=False)
class _Waiting:
    width: int
    ready: asyncio.Future[None]


@dataclass(eq=False)
class Seat:
    """Seats held by one request, given back once (release)."""

    level: PriorityLevel
    width: int
    _released: bool = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.level.give_back(self.width)


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
    in_use: int = 0
    _queues: list[deque[_Waiting]] = field(default_factory=list)
    _next: int = 0  # the queue served next (round robin)
    # counters, for /metrics and tests
    dispatched: int = 0
    rejected: int = 0

    def __post_init__(self) -> None:
        self._queues = [deque() for _ in range(max(self.queues, 1))]

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues)

    def _deal(self, flow: str) -> deque[_Waiting]:
        """The shortest of the queues this flow's hand holds (the same hand every time)."""
        hand = random.Random(zlib.crc32(flow.encode())).sample(range(len(self._queues)),
                                                              min(self.hand_size, len(self._queues)))
        return min((self._queues[i] for i in hand), key=len)

    async def acquire(self, flow: str, width: int) -> Seat:
        width = max(1, min(width, self.seats)) if not self.exempt else 0
        if self.exempt:
            self.dispatched += 1
            return Seat(self, 0)
        if self.in_use + width <= self.seats and not self.waiting:
            self.in_use += width
            self.dispatched += 1
            return Seat(self, width)
        if self.reject:
            self.rejected += 1
            raise Rejected("concurrency-limit")
        queue = self._deal(flow)
        if len(queue) >= self.queue_length_limit:
            self.rejected += 1
            raise Rejected("queue-full")
        waiting = _Waiting(width, asyncio.get_running_loop().create_future())
        queue.append(waiting)
        try:
            async with asyncio.timeout(self.wait_limit):
                await asyncio.shield(waiting.ready)
        except TimeoutError:
            if not waiting.ready.done():
                queue.remove(waiting)
                self.rejected += 1
                raise Rejected("time-out") from None
        except asyncio.CancelledError:
            if waiting.ready.done():
                self.give_back(width)  # dispatched as the client went: the seats are free again
            else:
                queue.remove(waiting)
            raise
        return Seat(self, width)

    def give_back(self, width: int) -> None:
        self.in_use -= width
        self._dispatch()

    def _dispatch(self) -> None:
        """Serve the queues in turn while the head of the next one fits."""
        count = len(self._queues)
        while self.waiting:
            for step in range(count):
                queue = self._queues[(self._next + step) % count]
                if queue:
                    break
            else:
                return
            head = queue[0]
            if self.in_use + head.width > self.seats:
                return  # the next in turn waits for its seats (no overtaking: wide requests are not starved)
            queue.popleft()
            self._next = (self._next + step + 1) % count
            if head.ready.done():
                continue  # its waiter gave up
            self.in_use += head.width
            self.dispatched += 1
            head.ready.set_result(None)

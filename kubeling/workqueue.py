"""A rate-limited work queue, as client-go's workqueue: a key is queued at most once,
is never handed to two workers at a time (a key added while it is processed is queued
again when it is done), and a key that failed comes back after a per-key exponential
backoff (upstream's default: 5 ms doubling to 1000 s; capped lower here)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubeling.periodic import cancel_and_wait

__all__ = ["WorkQueue", "Workers"]

log = logging.getLogger(__name__)


@dataclass
class WorkQueue:
    name: str
    base_delay: float = 0.005
    max_delay: float = 60.0
    _queue: list[str] = field(default_factory=list)
    _dirty: set[str] = field(default_factory=set)
    _processing: set[str] = field(default_factory=set)
    _failures: dict[str, int] = field(default_factory=dict)
    _timers: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._ready.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue the key in `delay` seconds (an earlier pending timer for it wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        pending = self._timers.get(key)
        if pending is not None and pending.when() <= loop.time() + delay:
            return
        if pending is not None:
            pending.cancel()
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(self.max_delay, self.base_delay * 2 ** failures))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    async def get(self) -> str:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.pop(0)
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._ready.set()

    def __len__(self) -> int:
        return len(self._queue)

    def shut_down(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Workers:
    """`count` tasks taking keys from a queue and running `sync(key)`: an error requeues
    the key with backoff, success forgets its failures."""

    def __init__(self, queue: WorkQueue, sync: Callable[[str], Awaitable[None]], count: int = 2) -> None:
        self.queue = queue
        self.sync = sync
        self.count = count
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._work(), name=f"{self.queue.name}-worker-{i}")
                           for i in range(self.count)]

    async def stop(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.sync(key)
                self.queue.forget(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 (retried: the controller must not stop)
                log.info("%s: syncing %s failed, retrying: %s: %s", self.queue.name, key, type(err).__name__, err)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

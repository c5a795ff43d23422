"""Background loops: run a step every interval; stop by cancelling and waiting."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["Periodic", "cancel_and_wait"]

log = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Task[object] | None, *, grace: float = 10.0) -> None:
    """Cancel a task and wait until it has finished (its errors are not re-raised).

    A task still running `grace` seconds after the cancel is cancelled again, with a
    warning: a cancel can be lost (Python 3.11's asyncio.wait_for drops one that arrives
    as the awaited thing completes, python/cpython#86296: a kube-proxy stop hung on it),
    and a stop must not hang. Cancelling the caller still cancels the caller."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            log.warning("task %s still runs %.0f s after it was cancelled; cancelling it again", task.get_name(),
                        grace)
    if not task.cancelled():
        task.exception()  # retrieved, so never reported as "exception was never retrieved"


class Periodic:
    """Runs `step` every `interval` seconds in its own task; a failing step is logged and
    the loop goes on (the next round is the retry)."""

    def __init__(self, name: str, interval: float, step: Callable[[], Awaitable[None]], *,
                 first_at_start: bool = False) -> None:
        self.name = name
        self.first_at_start = first_at_start  # run a step at once, then every interval
        self.interval = interval
        self.step = step
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        wait = 0.0 if self.first_at_start else self.interval
        while True:
            await asyncio.sleep(wait)
            wait = self.interval
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("%s failed: %s", self.name, err)

"""Waiting on a condition, the one way tests do it: poll until it holds, and when it does
not within the time given, fail saying what was waited for and what was last seen.

    pod = await until(lambda: client.pods.get("web"), "web Running", timeout=60,
                      check=lambda p: p.status.phase == "Running")
    await until(lambda: "restarted" in log.read_text(), "the supervisor restarted the scheduler")
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

__all__ = ["until", "settle", "holds", "gone", "WaitTimeout"]


class WaitTimeout(AssertionError):
    """A condition that did not hold in time: what was waited for, and the last value seen."""


def _failed(what: str, timeout: float, last: Any, error: BaseException | None) -> WaitTimeout:
    seen = f"last error: {type(error).__name__}: {error}" if error is not None else f"last seen: {last!r}"
    return WaitTimeout(f"{what}: not within {timeout:g}s ({seen})"[:4000])


async def until(probe: Callable[[], Any], what: str, timeout: float = 30.0, *, interval: float = 0.05,
                check: Callable[[Any], Any] = bool, retry_on: tuple[type[BaseException], ...] = ()) -> Any:
    """Call probe (a function or a coroutine function) until check(its result) is true and
    return the result; errors in retry_on count as not yet."""
    deadline = time.monotonic() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            result = probe()
            value = await result if inspect.isawaitable(result) else result
            last, error = value, None
            if check(value):
                return value
        except retry_on as err:
            error = err
        if time.monotonic() >= deadline:
            raise _failed(what, timeout, last, error)
        await asyncio.sleep(interval)


async def settle(probe: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.05,
                 check: Callable[[Any], Any] = bool) -> Any:
    """until, without failing: the last value seen once check holds or the time is up.
    For teardowns, which clean up everything first and assert on what they saw after."""
    try:
        return await until(probe, "", timeout=timeout, interval=interval, check=check)
    except WaitTimeout:
        result = probe()
        return await result if inspect.isawaitable(result) else result


async def holds(probe: Callable[[], Any], what: str, duration: float, *, interval: float = 0.1,
                check: Callable[[Any], Any] = bool) -> None:
    """The opposite wait: the condition holds for the whole duration (checked every
    interval), else fail at once saying what stopped holding and what was seen."""
    deadline = time.monotonic() + duration
    while True:
        result = probe()
        value = await result if inspect.isawaitable(result) else result
        if not check(value):
            raise AssertionError(f"{what}: stopped holding (seen: {value!r})"[:4000])
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(interval)


async def gone(get: Callable[[], Any]) -> bool:
    """Whether get() (a coroutine function reading one object) answers NotFound."""
    from kubeling import errors

    try:
        await get()
    except errors.NotFound:
        return True
    return False

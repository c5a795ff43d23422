"""Stopping a background loop ends it even when the cancel meets a wake-up.

A clean-clone CI run hung in kube-proxy's stop: its loop waited on "something changed"
through asyncio.wait_for, which on Python 3.11 returns the result instead of raising
when the cancel arrives in the same loop iteration as the change (python/cpython#86296).
The loop then went on and the stop waited for it forever. Loops now wait with
asyncio.timeout (ruff's TID251 bans wait_for outside tests), and cancel_and_wait cancels
again a task that outlives its cancel."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubeling.client import Client
from kubeling.periodic import cancel_and_wait
from proxy.proxier import Proxier, ProxyConfig


async def test_cancel_and_wait_cancels_again_a_task_that_dropped_the_cancel(
        caplog: pytest.LogCaptureFixture) -> None:
    dropped = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            dropped.set()  # what the 3.11 wait_for race amounts to: the cancel is gone
        await asyncio.sleep(3600)

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    try:
        with caplog.at_level(logging.WARNING):
            await asyncio.wait({asyncio.create_task(cancel_and_wait(task, grace=0.2))}, timeout=5)
        assert dropped.is_set() and task.cancelled()
        assert "task stubborn still runs" in caplog.text
    finally:
        await _end(task)


async def test_cancel_and_wait_keeps_the_callers_own_cancel() -> None:
    async def slow_to_end() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.shield(asyncio.sleep(3600))  # its cleanup takes its time

    async def stopper() -> None:
        slow = asyncio.create_task(slow_to_end())
        await asyncio.sleep(0)
        try:
            await cancel_and_wait(slow, grace=3600)
        finally:
            slow.cancel()

    outer = asyncio.create_task(stopper())
    await asyncio.sleep(0.05)
    outer.cancel()  # whoever stops the stopper is obeyed
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(outer, 5)


async def test_the_proxy_loop_ends_when_stopped_as_a_change_arrives() -> None:
    proxier = Proxier(Client("127.0.0.1:1"), ProxyConfig(min_sync_period=0, sync_period=3600))
    syncs = 0

    async def sync(*, full: bool = False) -> None:
        nonlocal syncs
        syncs += 1

    proxier.sync = sync  # type: ignore[method-assign]  # the loop alone: no apiserver, no iptables
    loop = asyncio.create_task(proxier._loop())
    try:
        for _ in range(5):
            await asyncio.sleep(0)  # the loop is waiting for a change now
        proxier._changed.set()
        loop.cancel()  # in the same iteration: the race that hung
        done, _ = await asyncio.wait({loop}, timeout=2)
        assert done, "the cancelled loop went on after the change woke it"
        assert loop.cancelled() and syncs == 0
    finally:
        await _end(loop)
        await proxier.client.close()


async def _end(task: asyncio.Task[None]) -> None:
    """A regression fails its test instead of hanging the session (a task that drops one
    cancel obeys the next)."""
    for _ in range(10):
        if task.done():
            return
        task.cancel()
        await asyncio.wait({task}, timeout=0.5)

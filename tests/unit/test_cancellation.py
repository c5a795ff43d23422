"""Stopping a background loop ends it even when the cancel meets a wake-up.

A clean-clone CI run hung in kube-proxy's stop: its loop waited on "something changed"
through asyncio.wait_for, which on Python 3.11 returns the result instead of raising
when the cancel arrives in the same loop iteration as the change (python/cpython#86296).
The loop then went on and the stop waited for it forever. Loops now wait with
asyncio.timeout (ruff's TID251 bans wait_for outside tests)."""

from __future__ import annotations

import asyncio

from kubeling.client import Client
from proxy.proxier import Proxier, ProxyConfig


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

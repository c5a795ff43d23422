"""Optimistic concurrency: 50 concurrent read-modify-write updaters lose nothing."""

from __future__ import annotations

import asyncio

from kubeling import errors
from kubeling.client import Client
from tests.objects import node


async def test_fifty_concurrent_updaters_lose_no_update(client: Client) -> None:
    await client.nodes.create(node("counter"))
    updaters, increments = 50, 4
    conflicts = 0

    async def updater() -> None:
        nonlocal conflicts
        done = 0
        while done < increments:
            current = await client.nodes.get("counter")
            count = int(current.metadata.annotations.get("count", "0"))
            current.metadata.annotations["count"] = str(count + 1)
            try:
                await client.nodes.update(current)  # carries resourceVersion: a precondition
            except errors.Conflict:
                conflicts += 1
                continue
            done += 1

    await asyncio.gather(*(updater() for _ in range(updaters)))
    final = await client.nodes.get("counter")
    assert final.metadata.annotations["count"] == str(updaters * increments)
    assert conflicts > 0  # the race really happened

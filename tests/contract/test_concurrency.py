"""Optimistic concurrency: 50 concurrent read-modify-write updaters lose nothing; a burst
of requests is served or refused with a 429, never dropped."""

from __future__ import annotations

import asyncio

from apiserver.server import APIServer
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


async def test_a_burst_past_grpcs_pending_backlog_is_served_or_refused_by_flow_control(
        apiserver: APIServer) -> None:
    """Thousands of requests arriving at once (a thousand kubelets registering) wait for the
    server to take them: each is answered, or refused by flow control with a 429 that says
    to retry — never cancelled unseen by gRPC's pending-request backlog, whose default
    randomly drops calls past 1,000 waiting (a client cannot tell whether those happened)."""
    clients = [Client(f"127.0.0.1:{apiserver.port}") for _ in range(2)]
    try:
        await clients[0].nodes.create(node("burst"))
        outcomes: dict[str, int] = {}

        async def get(i: int) -> None:
            try:
                await clients[i % 2].nodes.get("burst")
                outcome = "ok"
            except errors.ApiError as err:
                outcome = err.reason if err.reason != "Unknown" else err.code.name
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

        await asyncio.gather(*(get(i) for i in range(4000)))
        assert set(outcomes) <= {"ok", "TooManyRequests"}, outcomes
        assert outcomes.get("ok", 0) > 0
    finally:
        for c in clients:
            await c.close()

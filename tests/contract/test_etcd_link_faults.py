"""A flaky link between the apiserver and a real etcd (tests/faultproxy.py, a fake link:
latency and jitter, lost segments, resets, a blackhole), under a steady stream of writes
and one watch. What must hold, checked against etcd's own history of the changes:

- the watch sees every change once, in order, nothing missed (resuming, as a reflector
  does, from the last resourceVersion when its stream ends);
- a write reported done is in etcd at the revision it was reported with; one reported
  not done (503) is not; one whose outcome was unknown was told so (504 Timeout) — and
  none was applied twice (each compare-and-swap update's value appears at most once);
- during the blackhole, requests end within the etcd timeout with a 503/504 and a
  Retry-After instead of hanging;
- when the link heals, everything converges: writes succeed and the watch catches up.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2
from tests.conftest import apiserver_config
from tests.contract.etcd_history import changes
from tests.faultproxy import FaultProxy, Faults
from tests.wait import until

TIMEOUT = 2.0  # the apiserver's --etcd-request-timeout here
UNKNOWN = (errors.Timeout,)  # the outcomes a client must not take as "not applied"


@dataclass
class Outcome:
    op: str  # create NAME / update counter
    marker: str  # written into the object: how its write is found in etcd's history
    revision: int = 0  # the reported resourceVersion, when it succeeded
    error: errors.ApiError | None = None


@dataclass
class Writer:
    client: Client
    outcomes: list[Outcome] = field(default_factory=list)
    seq: int = 0

    def _configmap(self, name: str, marker: str) -> core_pb2.ConfigMap:
        cm = core_pb2.ConfigMap()
        cm.metadata.name, cm.metadata.namespace = name, "default"
        cm.data["marker"] = marker
        return cm

    async def _record(self, op: str, marker: str, write: Callable[[], Awaitable[core_pb2.ConfigMap]]) -> None:
        outcome = Outcome(op, marker)
        try:
            outcome.revision = int((await write()).metadata.resourceVersion)
        except errors.ApiError as err:
            outcome.error = err
        self.outcomes.append(outcome)

    async def step(self) -> None:
        """One create and one compare-and-swap update of the shared counter."""
        self.seq += 1
        marker = f"w-{self.seq:05d}"
        await self._record(f"create {marker}", marker,
                           lambda: self.client.configmaps.create(self._configmap(marker, marker)))
        marker = f"counter-{self.seq:05d}"

        async def update() -> core_pb2.ConfigMap:
            current = await self.client.configmaps.get("counter", "default")
            current.data["marker"] = marker
            return await self.client.configmaps.update(current)

        await self._record("update counter", marker, update)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.step()
            await asyncio.sleep(0.02)


async def _watch(client: Client, start: int, seen: list[tuple[str, str, int]], resumes: list[int]) -> None:
    """A reflector's watch: from `start`, resumed from the last resourceVersion whenever
    the stream ends."""
    rv = start
    while True:
        try:
            async for ev in client.configmaps.watch("default", resource_version=str(rv)):
                rv = int(ev.object.metadata.resourceVersion)
                if ev.type != "BOOKMARK":
                    seen.append((ev.type, ev.object.metadata.name, rv))
        except errors.ApiError:
            pass
        resumes.append(rv)
        await asyncio.sleep(0.1)


@pytest.fixture
async def behind_proxy(etcd: EtcdServer, prefix: str) -> AsyncIterator[tuple[FaultProxy, APIServer, Client]]:
    proxy = await FaultProxy(etcd.endpoint, seed=44).start()
    config = apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0", etcd_request_timeout=TIMEOUT,
                              etcd_keepalive=5.0)
    config.etcd = proxy.address  # every call of the apiserver to etcd crosses the fake link
    server = APIServer(config)
    await server.start()
    client = Client(server.address, timeout=4 * TIMEOUT)
    try:
        yield proxy, server, client
    finally:
        await client.close()
        await server.stop(grace=0)
        await proxy.stop()


async def _converged(client: Client) -> core_pb2.ConfigMap:
    """A write that succeeds once the link is healed."""
    async def attempt() -> core_pb2.ConfigMap | None:
        cm = core_pb2.ConfigMap()
        cm.metadata.name, cm.metadata.namespace = "healed", "default"
        with contextlib.suppress(errors.AlreadyExists):
            return await client.configmaps.create(cm)
        return await client.configmaps.get("healed", "default")  # a timed-out attempt was applied after all

    return await until(attempt, "a write after the link healed", timeout=30, retry_on=(errors.ApiError,))


async def test_a_flaky_etcd_link_loses_nothing_repeats_nothing_and_converges(
        etcd: EtcdServer, prefix: str, behind_proxy: tuple[FaultProxy, APIServer, Client]) -> None:
    proxy, server, client = behind_proxy
    counter = core_pb2.ConfigMap()
    counter.metadata.name, counter.metadata.namespace = "counter", "default"
    start = int((await client.configmaps.create(counter)).metadata.resourceVersion)
    seen: list[tuple[str, str, int]] = []
    resumes: list[int] = []
    watching = asyncio.create_task(_watch(client, start, seen, resumes))
    writer = Writer(client)
    stop = asyncio.Event()
    writing = asyncio.create_task(writer.run(stop))
    try:
        proxy.faults = Faults(latency=0.02, jitter=0.03)
        await until(lambda: len(writer.outcomes) >= 20, "writes through latency and jitter", timeout=60)
        proxy.faults = Faults(latency=0.005, loss=0.2)
        await until(lambda: len(writer.outcomes) >= 40, "writes through lost segments", timeout=60)
        proxy.heal()
        for _ in range(3):  # the link reset under writes and the watch, three times
            wanted = len(writer.outcomes) + 4
            assert proxy.reset_all() > 0
            await until(lambda: len(writer.outcomes) >= wanted, "writes after a reset", timeout=60)  # noqa: B023

        # a blackhole longer than the etcd timeout: requests end, with when to retry
        proxy.faults = Faults(blackhole=True)
        async with aiohttp.ClientSession() as session:
            url = f"http://{server.rest_address}/api/v1/namespaces/default/configmaps"
            began = time.monotonic()
            async with session.post(url, json={"metadata": {"name": "in-the-hole"}, "data": {"marker": "hole"}},
                                    timeout=aiohttp.ClientTimeout(total=30)) as resp:
                body = await resp.json()
            took = time.monotonic() - began
        assert resp.status in (503, 504) and resp.headers.get("Retry-After") == "1", (resp.status, body)
        assert took < 3 * TIMEOUT, f"a request in the blackhole took {took:.1f} s"
        if resp.status == 504:
            assert "may or may not have been applied" in body["message"]
        await asyncio.sleep(1.5 * TIMEOUT)  # the writer's requests fail in the hole too
        proxy.heal()
        stop.set()
        await writing
        healed = await _converged(client)
        end = int(healed.metadata.resourceVersion)
        await until(lambda: any(name == "healed" for _, name, _ in seen), "the watch caught up", timeout=30)
    finally:
        stop.set()
        writing.cancel()
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching

    truth = await changes(etcd, prefix, "configmaps", start, end)
    truth_events = [(c.type, c.name, c.revision) for c in truth]
    assert seen == truth_events, "the watch saw exactly etcd's history: nothing missed, nothing repeated"

    marker_at = {}
    for c in truth:
        for marker in set(re.findall(rb"(?:w|counter)-\d{5}", c.value)):  # (a create's name is its marker too)
            assert marker not in marker_at, f"{marker!r} was applied twice"
            marker_at[marker] = c.revision
    assert all(c.type == "MODIFIED" for c in truth if c.name == "counter")
    done = [o for o in writer.outcomes if o.error is None]
    failed = [o for o in writer.outcomes if o.error is not None]
    assert len(done) > 40 and failed, "writes both went through and failed on the faulty link"
    for o in done:
        assert marker_at.get(o.marker.encode()) == o.revision, f"{o.op}: reported at {o.revision}, etcd has it " \
                                                               f"at {marker_at.get(o.marker.encode())}"
    for o in failed:
        if not isinstance(o.error, UNKNOWN):  # definite failures (503, 409, 404…) were not applied
            assert o.marker.encode() not in marker_at, f"{o.op} failed with {o.error!r} but was applied"
    kinds = {type(o.error).__name__ for o in failed}
    assert kinds <= {"Timeout", "ServiceUnavailable", "Conflict"}, kinds


async def test_a_link_that_dies_silently_is_found_by_keepalive_and_the_watch_resumes(
        etcd: EtcdServer, prefix: str) -> None:
    """A connection that goes silent for good (no RST, no FIN: a path that died, a frozen
    peer) would hold the apiserver's etcd watch forever; the keepalive finds it (a ping
    unanswered for --etcd-keepalive-timeout) and the watch resumes on a new connection from
    its revision: what was written meanwhile arrives, once."""
    proxy = await FaultProxy(etcd.endpoint, seed=45).start()
    config = apiserver_config(etcd, prefix, etcd_request_timeout=TIMEOUT, etcd_keepalive=5.0,
                              etcd_keepalive_timeout=2.0)
    config.etcd = proxy.address
    severed_server, direct_server = APIServer(config), APIServer(apiserver_config(etcd, prefix))
    await severed_server.start()
    await direct_server.start()
    client, direct = Client(severed_server.address, timeout=30), Client(direct_server.address, timeout=10)
    seen: list[tuple[str, str, int]] = []
    resumes: list[int] = []
    watching: asyncio.Task[None] | None = None
    try:
        start = int((await client.configmaps.list("default")).metadata.resourceVersion)
        watching = asyncio.create_task(_watch(client, start, seen, resumes))
        made = core_pb2.ConfigMap()
        made.metadata.name, made.metadata.namespace = "before", "default"
        await client.configmaps.create(made)
        await until(lambda: any(name == "before" for _, name, _ in seen), "the watch before the link died")

        connections = proxy.stats.connections
        assert proxy.sever_all() >= 1
        severed_at = time.monotonic()
        made.metadata.name = "during"
        await direct.configmaps.create(made)  # written by another apiserver, straight to etcd
        await until(lambda: any(name == "during" for _, name, _ in seen), "the write made while the link was dead",
                    timeout=30)
        found_after = time.monotonic() - severed_at
        assert proxy.stats.connections > connections, "a new connection replaced the dead one"
        assert found_after < 5.0 + 2.0 + 10, found_after  # a keepalive round, its timeout, the resumption

        made.metadata.name = "after"

        async def write_after() -> core_pb2.ConfigMap:
            with contextlib.suppress(errors.AlreadyExists):
                return await client.configmaps.create(made)
            return await client.configmaps.get("after", "default")  # a timed-out attempt applied after all
        await until(write_after, "a write through the new connection", timeout=30, retry_on=(errors.ApiError,))
        await until(lambda: any(name == "after" for _, name, _ in seen), "the write after")
        assert [(t, n) for t, n, _ in seen] == [("ADDED", "before"), ("ADDED", "during"), ("ADDED", "after")]
        history = {name: rev for _, name, rev in seen}
        assert history["before"] < history["during"] < history["after"]
    finally:
        if watching is not None:
            watching.cancel()
        await client.close()
        await direct.close()
        await severed_server.stop(grace=0)
        await direct_server.stop(grace=0)
        await proxy.stop()

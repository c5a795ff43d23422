"""The apiserver on a 3-member etcd cluster (real Raft, Debian's etcd) given every
member's endpoint: when the member it uses is killed, it moves to another; writes go on
(after at most a short unavailability while etcd elects a leader), and a watch opened
before the fault sees every change once, in order. With two members of three gone there
is no quorum: writes fail with a clear ServiceUnavailable, nothing hangs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from apiserver.server import APIServer
from apiserver.storage.etcd import channel_target
from cluster.etcd import EtcdCluster
from kubeling import errors
from kubeling.client import Client
from tests.objects import pod


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    made = EtcdCluster(3).start()
    try:
        yield made
    finally:
        made.stop()


async def _create(client: Client, name: str, timeout: float = 30) -> None:
    """Create, retrying while etcd has no leader yet (503, or 504 for a write it took but
    could not confirm): how long is part of the test."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await client.pods.create(pod(name))
            return
        except errors.AlreadyExists:
            return  # an earlier try that timed out on our side went through
        except (errors.ServiceUnavailable, errors.Timeout):
            assert time.monotonic() < deadline, f"{name}: etcd unavailable for {timeout}s"
            await asyncio.sleep(0.2)


async def test_the_apiserver_survives_the_member_it_uses(cluster: EtcdCluster) -> None:
    from apiserver.server import Config
    server = APIServer(Config(etcd=cluster.endpoints, listen="127.0.0.1:0", compaction_interval=0,
                              bookmark_interval=0.2))
    await server.start()
    try:
        async with Client(server.address, timeout=15) as client:
            await _create(client, "before")
            _, listed_rv = await client.pods.list_all()
            seen: list[str] = []

            async def watch() -> None:
                async for ev in client.pods.watch(resource_version=listed_rv):
                    if ev.type == "ADDED":
                        seen.append(ev.object.metadata.name)

            watcher = asyncio.create_task(watch())
            await _create(client, "a")
            cluster.members[0].kill()  # the first endpoint: the one pick_first connected to
            killed = time.monotonic()
            for name in ("b", "c", "d"):
                await _create(client, name)
            recovered = time.monotonic() - killed
            print(f"writes went on {recovered:.2f}s after the member was killed")
            deadline = time.monotonic() + 15
            while seen != ["a", "b", "c", "d"]:
                assert time.monotonic() < deadline, seen
                await asyncio.sleep(0.05)
            watcher.cancel()
            assert sorted(p.metadata.name for p in (await client.pods.list_all())[0]) == ["a", "b", "before", "c",
                                                                                          "d"]
            cluster.members[1].kill()  # quorum gone: refused clearly, in bounded time
            start = time.monotonic()
            # (a 504: the member took the write, and would apply it if the quorum came back)
            with pytest.raises((errors.ServiceUnavailable, errors.Timeout)):
                await client.pods.create(pod("no-quorum"))
            assert time.monotonic() - start < 15
    finally:
        await server.stop(grace=0)


def test_channel_targets() -> None:
    assert channel_target(["127.0.0.1:2379"]) == "127.0.0.1:2379"
    assert channel_target(["127.0.0.1:1", "127.0.0.1:2"]) == "ipv4:127.0.0.1:1,127.0.0.1:2"
    with pytest.raises(ValueError, match="by IPv4 address"):
        channel_target(["etcd-1:2379", "etcd-2:2379"])

"""Informer: list+watch, resume across apiserver restarts, relist on Expired."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling.client import Client
from kubeling.informer import INDEX_NAMESPACE, INDEX_NODE_NAME, Informer
from protos.kubeling.v1 import core_pb2
from tests.conftest import apiserver_config
from tests.objects import namespace, pod


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def attach(self, informer: Informer[core_pb2.Pod]) -> None:
        informer.add_handler(
            on_add=lambda o: self.events.append(("add", o.metadata.name)),
            on_update=lambda old, new: self.events.append(("update", new.metadata.name)),
            on_delete=lambda o: self.events.append(("delete", o.metadata.name)))


async def eventually(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def truth(client: Client) -> dict[str, str]:
    items, _ = await client.pods.list_all()
    return {f"{p.metadata.namespace}/{p.metadata.name}": p.metadata.resourceVersion for p in items}


def view(inf: Informer[core_pb2.Pod]) -> dict[str, str]:
    return {k: v.metadata.resourceVersion for k, v in inf.store.items.items()}


async def test_informer_lists_watches_and_indexes(client: Client) -> None:
    await client.namespaces.create(namespace("ns2"))
    await client.pods.create(pod("a", node="n1"))
    inf: Informer[core_pb2.Pod] = Informer(client.pods)
    rec = Recorder()
    rec.attach(inf)
    await inf.start()
    try:
        await inf.wait_synced(10)
        assert rec.events == [("add", "a")]
        await client.pods.create(pod("b", namespace="ns2"))
        await client.pods.bind("b", "n1", "ns2")
        await client.pods.delete("a", grace_period_seconds=0)
        await eventually(lambda: rec.events[-1] == ("delete", "a"))
        assert rec.events == [("add", "a"), ("add", "b"), ("update", "b"), ("delete", "a")]
        assert [p.metadata.name for p in inf.store.by_index(INDEX_NODE_NAME, "n1")] == ["b"]
        assert [p.metadata.name for p in inf.store.by_index(INDEX_NAMESPACE, "ns2")] == ["b"]
        assert inf.store.by_index(INDEX_NAMESPACE, "default") == []
        assert view(inf) == await truth(client)
    finally:
        await inf.stop()


async def test_informer_with_field_selector(client: Client) -> None:
    inf: Informer[core_pb2.Pod] = Informer(client.pods, field_selector="spec.nodeName=n1")
    rec = Recorder()
    rec.attach(inf)
    await inf.start()
    try:
        await inf.wait_synced(10)
        await client.pods.create(pod("x"))
        await client.pods.bind("x", "n1")
        await client.pods.create(pod("y", node="n2"))
        await client.pods.create(pod("z", node="n1"))  # after y in the stream: once z is seen, y had its turn
        await eventually(lambda: ("add", "z") in rec.events)
        assert rec.events == [("add", "x"), ("add", "z")]
    finally:
        await inf.stop()


async def _while_down(etcd: EtcdServer, prefix: str, server: APIServer,
                     changes: Callable[[Client], Awaitable[None]], **restart: object) -> APIServer:
    """Stop `server`, make `changes` through another apiserver instance, then start a new
    server on the same port (with `restart` config overrides) and return it."""
    port = server.port
    await server.stop(grace=0)
    other = APIServer(apiserver_config(etcd, prefix))
    await other.start()
    async with Client(other.address) as c:
        await changes(c)
    await other.stop(grace=0)
    again = APIServer(apiserver_config(etcd, prefix, listen=f"127.0.0.1:{port}", **restart))
    await again.start()
    return again


async def _started_informer(etcd: EtcdServer, prefix: str, pods: int) -> tuple[APIServer, Client,
                                                                               Informer[core_pb2.Pod], Recorder]:
    server = APIServer(apiserver_config(etcd, prefix))
    await server.start()
    client = Client(server.address)
    for i in range(pods):
        await client.pods.create(pod(f"p{i}"))
    inf: Informer[core_pb2.Pod] = Informer(client.pods, max_backoff=0.2)
    rec = Recorder()
    rec.attach(inf)
    await inf.start()
    await inf.wait_synced(10)
    return server, client, inf, rec


async def test_informer_converges_after_apiserver_restart(etcd: EtcdServer, prefix: str) -> None:
    server, client, inf, rec = await _started_informer(etcd, prefix, 3)

    async def changes(c: Client) -> None:
        await c.pods.create(pod("new"))
        await c.pods.delete("p0")
        cur = await c.pods.get("p1")
        cur.metadata.labels["changed"] = "yes"
        await c.pods.update(cur)

    try:
        server = await _while_down(etcd, prefix, server, changes)
        expected = await truth(client)
        await eventually(lambda: view(inf) == expected)
        assert inf.relists == 1  # resumed from its resourceVersion: no relist needed
        assert rec.events[3:] == [("add", "new"), ("delete", "p0"), ("update", "p1")]
    finally:
        await inf.stop()
        await client.close()
        await server.stop(grace=0)


async def test_informer_relists_after_expired_and_delivers_the_difference(etcd: EtcdServer, prefix: str) -> None:
    server, client, inf, rec = await _started_informer(etcd, prefix, 4)

    async def changes(c: Client) -> None:
        await c.pods.delete("p0")
        cur = await c.pods.get("p1")
        cur.metadata.labels["changed"] = "yes"
        await c.pods.update(cur)
        await c.pods.create(pod("new"))
        for i in range(30):  # churn that pushes the informer's RV out of a small window
            await c.pods.create(pod(f"tmp{i}"))
            await c.pods.delete(f"tmp{i}")

    try:
        server = await _while_down(etcd, prefix, server, changes, watch_cache_size=10)
        expected = await truth(client)
        await eventually(lambda: view(inf) == expected)
        assert inf.relists == 2
        # Only the difference, never the tmp pods that came and went while it was away.
        assert sorted(rec.events[4:]) == [("add", "new"), ("delete", "p0"), ("update", "p1")]
    finally:
        await inf.stop()
        await client.close()
        await server.stop(grace=0)

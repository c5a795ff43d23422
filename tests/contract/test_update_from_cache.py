"""Writes start from the watch cache's copy (upstream's GuaranteedUpdate with the
cacher's object): one etcd call when the copy is current, and, with a copy that lags
behind (a fault this test injects: real lag cannot be produced on demand), no lost
write, no invented conflict, no double binding."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from apiserver.registry.generic.store import Registry
from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, scheme
from kubeling.client import Client
from tests.conftest import apiserver_config
from tests.objects import node, pod


class EtcdCalls:
    """Spy on the apiserver's etcd client: the calls that touched one object."""

    def __init__(self, registry: Registry[Any], monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        storage = registry.storage
        real = storage._call

        async def call(what: str, method: str, request: object) -> object:
            self.calls.append((what, method))
            return await real(what, method, request)

        monkeypatch.setattr(storage, "_call", call)

    def on(self, name: str) -> list[str]:
        return [method for what, method in self.calls if what.endswith(f"/{name}")]


def lagging_cache(registry: Registry[Any], key: bytes, old: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: the cache answers `old` for key, whatever etcd holds."""
    real = registry.cache.get
    monkeypatch.setattr(registry.cache, "get", lambda k: old if k == key else real(k))


@pytest.fixture
async def apiserver(etcd: EtcdServer, prefix: str) -> AsyncIterator[APIServer]:
    """Without node IPAM: these tests count the etcd calls on a node, and the IPAM, giving
    it a pod CIDR meanwhile, added its own (a clean-clone CI run saw Txn, Range, Txn)."""
    server = APIServer(apiserver_config(etcd, prefix, cluster_cidr=""))
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)


@pytest.fixture
def nodes(apiserver: APIServer) -> Iterator[Registry[Any]]:
    yield apiserver.registries[scheme.NODES]


async def test_a_write_from_a_current_cache_is_one_etcd_call(client: Client, nodes: Registry[Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    created = await client.nodes.create(node("n1"))
    await nodes.cache.wait_for(int(created.metadata.resourceVersion))
    spy = EtcdCalls(nodes, monkeypatch)
    created.metadata.labels["a"] = "b"
    updated = await client.nodes.update(created)
    assert updated.metadata.labels["a"] == "b"
    assert spy.on("n1") == ["Txn"]


async def test_a_lagging_cache_loses_nothing_and_invents_no_conflict(client: Client, nodes: Registry[Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = await client.nodes.create(node("n2"))
    second = await client.nodes.get("n2")
    second.metadata.labels["second"] = "yes"
    second = await client.nodes.update(second)
    lagging_cache(nodes, nodes.key("", "n2"), first, monkeypatch)
    spy = EtcdCalls(nodes, monkeypatch)

    # With the current resourceVersion: not a conflict (the cache's is older), etcd is asked.
    second.metadata.labels["third"] = "yes"
    third = await client.nodes.update(second)
    assert spy.on("n2") == ["Range", "Txn"]
    # Without one (a status write): the compare-and-swap on the old copy is refused, and the
    # retry starts from what etcd answered, so the labels written meanwhile stay.
    third.ClearField("metadata")
    third.metadata.name = "n2"
    third.status.capacity["pods"] = "50"
    fourth = await client.nodes.update_status(third)
    assert fourth.status.capacity["pods"] == "50"
    assert dict(fourth.metadata.labels) == {"second": "yes", "third": "yes"}
    # A truly stale resourceVersion is still a conflict.
    with pytest.raises(errors.Conflict):
        await client.nodes.update(first)
    await client.nodes.delete("n2")
    with pytest.raises(errors.NotFound):
        await client.nodes.get("n2")


async def test_a_lagging_cache_never_binds_twice(client: Client, apiserver: APIServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pods = apiserver.registries[scheme.PODS]
    unbound = await client.pods.create(pod("p1"))
    await client.pods.bind("p1", "node-a", "default")
    lagging_cache(pods, pods.key("default", "p1"), unbound, monkeypatch)
    with pytest.raises(errors.Conflict, match="already assigned to node 'node-a'"):
        await client.pods.bind("p1", "node-b", "default")
    assert (await client.pods.get("p1", "default")).spec.nodeName == "node-a"

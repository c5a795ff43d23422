"""Nodes get a pod CIDR from the apiserver's allocator, once, never shared."""

from __future__ import annotations

import asyncio

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.conftest import apiserver_config


async def _cidrs(client: Client, names: list[str], timeout: float = 10.0) -> dict[str, str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        nodes = {n.metadata.name: n for n in (await client.nodes.list_all())[0]}
        cidrs = {name: nodes[name].spec.podCIDR for name in names}
        if all(cidrs.values()):
            for name in names:
                assert list(nodes[name].spec.podCIDRs) == [cidrs[name]]
            return cidrs
        assert asyncio.get_running_loop().time() < deadline, f"no pod CIDR yet: {cidrs}"
        await asyncio.sleep(0.05)


async def test_each_node_gets_its_own_range_and_keeps_it(etcd: EtcdServer, prefix: str) -> None:
    server = APIServer(apiserver_config(etcd, prefix))
    await server.start()
    try:
        async with Client(server.address) as client:
            # One range set by hand: it is respected and never handed out again.
            await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="manual"),
                                                    spec=core_pb2.NodeSpec(podCIDR="10.88.0.0/24",
                                                                           podCIDRs=["10.88.0.0/24"])))
            await asyncio.gather(*(client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=f"n{i}")))
                                   for i in range(5)))
            cidrs = await _cidrs(client, ["manual", *(f"n{i}" for i in range(5))])
            assert cidrs["manual"] == "10.88.0.0/24"
            assert sorted(cidrs.values()) == [f"10.88.{i}.0/24" for i in range(6)]
    finally:
        await server.stop(grace=0)
    # A restarted apiserver reads the ranges in use back from the nodes.
    server = APIServer(apiserver_config(etcd, prefix))
    await server.start()
    try:
        async with Client(server.address) as client:
            await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="late")))
            assert (await _cidrs(client, ["late"]))["late"] == "10.88.6.0/24"
            assert (await client.nodes.get("n0")).spec.podCIDR == cidrs["n0"]
    finally:
        await server.stop(grace=0)


async def test_no_cluster_cidr_no_allocation(etcd: EtcdServer, prefix: str) -> None:
    server = APIServer(apiserver_config(etcd, prefix, cluster_cidr=""))
    await server.start()
    try:
        async with Client(server.address) as client:
            await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="n")))
            assert not server.allocates_pod_cidrs  # no allocator runs at all
            assert (await client.nodes.get("n")).spec.podCIDR == ""
    finally:
        await server.stop(grace=0)

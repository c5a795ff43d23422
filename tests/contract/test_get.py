"""GET with a resourceVersion, as upstream's GetOptions: "" reads etcd; "0" whatever the
watch cache holds; N an object not older than N (the cache, once it has seen N); a version
the cache does not reach in time is a Timeout; a malformed one a BadRequest."""

from __future__ import annotations

import asyncio
import urllib.request

import aiohttp
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.objects import node


def _etcd_ranges(etcd: EtcdServer) -> int:
    with urllib.request.urlopen(f"http://{etcd.endpoint}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("etcd_debugging_mvcc_range_total "):
                return int(float(line.split()[1]))
    raise AssertionError("etcd reports no etcd_debugging_mvcc_range_total")


async def test_get_from_the_cache_is_never_older_than_asked_and_costs_etcd_nothing(
        client: Client, etcd: EtcdServer) -> None:
    created = await client.nodes.create(node("n1"))
    # not older than the create: the write is there, however soon after it the read comes
    got = await client.nodes.get("n1", resource_version=created.metadata.resourceVersion)
    assert got.metadata.uid == created.metadata.uid
    for round_ in range(5):  # each update's version read back at once: never the one before
        got.metadata.labels["round"] = str(round_)
        got = await client.nodes.update(got)
        again = await client.nodes.get("n1", resource_version=got.metadata.resourceVersion)
        assert again.metadata.labels["round"] == str(round_)
        assert int(again.metadata.resourceVersion) >= int(got.metadata.resourceVersion)
    assert (await client.nodes.get("n1", resource_version="0")).metadata.name == "n1"

    # the cache answers without asking etcd; a GET without a version asks it each time
    # (the apiserver's own background reads in the meantime are a handful)
    before = _etcd_ranges(etcd)
    await asyncio.gather(*(client.nodes.get("n1", resource_version="0") for _ in range(200)))
    cached = _etcd_ranges(etcd) - before
    before = _etcd_ranges(etcd)
    await asyncio.gather(*(client.nodes.get("n1") for _ in range(200)))
    latest = _etcd_ranges(etcd) - before
    assert latest >= 200
    assert cached < 50, cached


async def test_get_with_a_version_refuses_what_it_cannot_serve(client: Client) -> None:
    created = await client.nodes.create(node("n1"))
    with pytest.raises(errors.NotFound):
        await client.nodes.get("absent", resource_version="0")
    with pytest.raises(errors.BadRequest, match="resourceVersion: invalid value 'abc'"):
        await client.nodes.get("n1", resource_version="abc")
    with pytest.raises(errors.Timeout, match="Too large resource version"):  # after the cache's 3 s wait
        await client.nodes.get("n1", resource_version=str(int(created.metadata.resourceVersion) + 1000))
    await client.nodes.delete("n1")
    deleted = await client.nodes.list()
    with pytest.raises(errors.NotFound):  # the delete is seen by a read not older than it
        await client.nodes.get("n1", resource_version=deleted.metadata.resourceVersion)


async def test_rest_get_takes_the_resource_version_query(rest: APIServer) -> None:
    async with Client(rest.address) as c, aiohttp.ClientSession(f"http://{rest.rest_address}") as http:
        cm = await c.configmaps.create(core_pb2.ConfigMap(
            metadata=meta_pb2.ObjectMeta(name="cm", namespace="default"), data={"k": "v"}))
        path = "/api/v1/namespaces/default/configmaps/cm"
        for version in ("0", cm.metadata.resourceVersion):
            async with http.get(path, params={"resourceVersion": version}) as r:
                assert r.status == 200
                assert (await r.json())["data"] == {"k": "v"}
        async with http.get(path, params={"resourceVersion": "-1"}) as r:
            assert r.status == 400
            assert "resourceVersion: invalid value" in (await r.json())["message"]

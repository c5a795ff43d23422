"""A resource without a watch cache (Events, as upstream): its lists and watches go to etcd,
with the same semantics as a cached resource's (Leases here, as the reference)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, scheme
from kubeling.client import Client, ResourceClient
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2
from tests.conftest import apiserver_config
from tests.wait import until

Seen = list[tuple[str, str, str, str]]  # type, namespace, name, label "sel"


def _event(name: str, namespace: str = "default", **labels: str) -> core_pb2.Event:
    return core_pb2.Event(metadata={"name": name, "namespace": namespace, "labels": labels},
                          involvedObject={"kind": "Pod", "name": "p", "namespace": namespace},
                          reason="Tested", message="m")


def _lease(name: str, namespace: str = "default", **labels: str) -> coordination_pb2.Lease:
    return coordination_pb2.Lease(metadata={"name": name, "namespace": namespace, "labels": labels})


async def _collect(stream: AsyncIterator[Any], out: Seen, until: str) -> None:
    async for ev in stream:
        if ev.type == "BOOKMARK":
            continue
        meta = ev.object.metadata
        out.append((ev.type, meta.namespace, meta.name, meta.labels.get("sel", "")))
        if meta.name == until:
            return


async def _watchers_registered(server: APIServer, count: int) -> None:
    registry = server.registries[scheme.EVENTS]
    async with asyncio.timeout(10):
        while registry.watcher_count < count:
            await asyncio.sleep(0.01)


async def test_events_have_no_cache_and_watch_like_a_cached_resource(apiserver: APIServer, client: Client) -> None:
    assert apiserver.registries[scheme.EVENTS].cache is None and apiserver.registries[scheme.LEASES].cache is not None
    await client.namespaces.create(core_pb2.Namespace(metadata={"name": "other"}))
    rng = random.Random(7)
    ops: list[tuple[str, str, str, str]] = []  # op, namespace, name, label
    exists: dict[tuple[str, str], str] = {}
    for _ in range(80):
        key = (rng.choice(["default", "other"]), f"o{rng.randrange(5)}")
        label = rng.choice(["yes", "no"])
        if key not in exists:
            ops.append(("create", *key, label))
            exists[key] = label
        elif rng.random() < 0.7:
            ops.append(("update", *key, label))
            exists[key] = label
        else:
            ops.append(("delete", *key, ""))
            del exists[key]
    ops.append(("create", "default", "zz-end", "yes"))

    async def run(resource: ResourceClient[Any], make: Any) -> tuple[list[Seen], list[str]]:
        start = (await resource.list()).metadata.resourceVersion
        seen: list[Seen] = [[], [], []]
        watches = [
            asyncio.create_task(_collect(resource.watch("default", label_selector="sel=yes",
                                                        resource_version=start), seen[0], "zz-end")),
            asyncio.create_task(_collect(resource.watch(resource_version=start), seen[1], "zz-end")),
            asyncio.create_task(_collect(resource.watch(field_selector="metadata.namespace=other",
                                                        resource_version=start), seen[2], "zz-end")),
        ]
        written: list[str] = []
        for op, namespace, name, label in ops:
            if op == "create":
                obj = await resource.create(make(name, namespace, sel=label))
            elif op == "update":
                obj = await resource.get(name, namespace)
                obj.metadata.labels["sel"] = label
                obj = await resource.update(obj)
            else:
                obj = await resource.delete(name, namespace)
            written.append(obj.metadata.resourceVersion)
        # the third watcher never sees the marker (it is in "default"): end it with one in "other"
        written.append((await resource.create(make("zz-end", "other", sel="yes"))).metadata.resourceVersion)
        await asyncio.wait_for(asyncio.gather(*watches), 10)
        return seen, written

    cached, _ = await run(client.leases, _lease)
    uncached, written = await run(client.events, _event)
    assert uncached == cached  # the same changes, kinds of event, order and selections
    changes = sorted({int(r) for r in written[:-1]})  # an update that changes nothing writes nothing
    assert uncached[0] and uncached[2] and len(uncached[1]) == len(changes)
    async with asyncio.timeout(10):  # the watches ended with their clients: nothing held
        while apiserver.registries[scheme.EVENTS].watcher_count:
            await asyncio.sleep(0.01)
    # Each event carries the revision of its write (deletes: the delete's).
    rvs: list[str] = []
    await _rv_collect(client, str(changes[0]), str(changes[-1]), rvs)
    assert [int(r) for r in rvs] == changes[1:]


async def _rv_collect(client: Client, after: str, last: str, out: list[str]) -> None:
    async with asyncio.timeout(10):
        async for ev in client.events.watch(resource_version=after):
            out.append(ev.object.metadata.resourceVersion)
            if ev.object.metadata.resourceVersion == last:
                return


async def test_event_watch_from_now_state_first_and_watch_list(apiserver: APIServer, client: Client) -> None:
    await client.events.create(_event("a"))
    await client.events.create(_event("b"))
    seen: Seen = []
    task = asyncio.create_task(_collect(client.events.watch(resource_version="0"), seen, "c"))
    await _watchers_registered(apiserver, 1)
    await client.events.create(_event("c"))
    await asyncio.wait_for(task, 10)
    assert [(t, n) for t, _, n, _ in seen] == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]

    # WatchList: the state, the BOOKMARK that ends it at the state's revision, then changes.
    request = meta_pb2.WatchRequest(namespace="default", sendInitialEvents=True, resourceVersionMatch="NotOlderThan",
                                    allowWatchBookmarks=True)
    async with grpc.aio.insecure_channel(apiserver.address) as channel:
        call = _watch_events(channel, request)
        got = []
        async for message in call:
            got.append(message)
            if message.type == "BOOKMARK":
                break
        latest = await client.events.delete("a")
        got.append(await anext(aiter(call)))
        call.cancel()
    assert [(m.type, m.object.metadata.name) for m in got] == [
        ("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("BOOKMARK", ""), ("DELETED", "a")]
    assert got[3].object.metadata.annotations["k8s.io/initial-events-end"] == "true"
    assert int(got[3].object.metadata.resourceVersion) < int(latest.metadata.resourceVersion)
    assert got[4].object.metadata.resourceVersion == latest.metadata.resourceVersion

    # sendInitialEvents=false: the changes only (written until the watch, open at some
    # revision, reports one: the first it reports is one of them, never the state).
    request.sendInitialEvents = False
    async with grpc.aio.insecure_channel(apiserver.address) as channel:
        call = _watch_events(channel, request)
        first = asyncio.create_task(anext(aiter(call)))
        written = 0
        async with asyncio.timeout(10):
            while not first.done():
                await client.events.create(_event(f"d{written}"))
                written += 1
                await asyncio.wait([first], timeout=0.05)
        message = first.result()
        call.cancel()
    assert message.type == "ADDED" and message.object.metadata.name in {f"d{i}" for i in range(written)}


async def test_event_lists_read_etcd(client: Client) -> None:
    for i in range(5):
        await client.events.create(_event(f"e{i}"))
    first = await client.events.list(resource_version="0", limit=2)
    assert [e.metadata.name for e in first.items] == ["e0", "e1"] and getattr(first.metadata, "continue")
    items, rv = await client.events.list_all("default", page_size=2)
    assert [e.metadata.name for e in items] == [f"e{i}" for i in range(5)]
    exact = await client.events.list(resource_version=rv)
    assert len(exact.items) == 5
    with pytest.raises(errors.Timeout, match="Too large resource version"):
        await client.events.list(resource_version=str(int(rv) + 1000))


async def test_event_watch_expired_after_compaction_and_ended_by_shutdown(prefix: str) -> None:
    with EtcdServer() as own_etcd:  # compaction is global to an etcd: not on the shared one
        server = APIServer(apiserver_config(own_etcd, prefix, compaction_interval=0.2))
        await server.start()
        stopped = False
        try:
            async with Client(server.address) as client:
                old = (await client.events.create(_event("old"))).metadata.resourceVersion
                for i in range(5):
                    await client.events.create(_event(f"e{i}"))
                async with asyncio.timeout(10):
                    while server.metrics.compactions._value.get() < 2:
                        await asyncio.sleep(0.05)
                with pytest.raises(errors.Expired, match="too old"):
                    async for _ in client.events.watch(resource_version=old):
                        pass
                # A watch open when the apiserver stops ends with an error the client resumes on.
                rv = (await client.events.list()).metadata.resourceVersion
                task = asyncio.create_task(_collect(client.events.watch(resource_version=rv), [], ""))
                await _watchers_registered(server, 1)
                await server.stop(grace=0)
                stopped = True
                with pytest.raises(errors.ApiError):
                    await asyncio.wait_for(task, 10)
        finally:
            if not stopped:
                await server.stop(grace=0)


async def test_namespace_deletion_removes_its_events(client: Client) -> None:
    await client.namespaces.create(core_pb2.Namespace(metadata={"name": "gone"}))
    for i in range(3):
        await client.events.create(_event(f"e{i}", "gone"))
    await client.events.create(_event("stays"))
    await client.namespaces.delete("gone")

    async def gone() -> bool:
        try:
            await client.namespaces.get("gone")
        except errors.NotFound:
            return True
        return False

    await until(gone, "namespace gone deleted", 10)
    assert (await client.events.list("gone")).items == []
    assert [e.metadata.name for e in (await client.events.list("default")).items] == ["stays"]


async def test_rest_watch_of_events(rest: APIServer) -> None:
    async with Client(rest.address) as client, aiohttp.ClientSession() as session:
        rv = (await client.events.create(_event("before"))).metadata.resourceVersion
        url = f"http://{rest.rest_address}/api/v1/namespaces/default/events?watch=1&resourceVersion={rv}"
        async with session.get(url) as r:
            assert r.status == 200
            created = await client.events.create(_event("after"))
            line = json.loads(await r.content.readline())
        assert line["type"] == "ADDED" and line["object"]["kind"] == "Event"
        assert line["object"]["metadata"]["name"] == "after"
        assert line["object"]["metadata"]["resourceVersion"] == created.metadata.resourceVersion
        async with session.get(url.replace(f"resourceVersion={rv}", "resourceVersion=1")) as r:
            assert r.status == 200  # etcd's revision 1 is still there (nothing compacted)


def _watch_events(channel: grpc.aio.Channel, request: meta_pb2.WatchRequest) -> Any:
    """A raw gRPC watch of events, by the service's name and the scheme's event message."""
    return channel.unary_stream("/kubeling.v1.Events/Watch", request_serializer=meta_pb2.WatchRequest.SerializeToString,
                                response_deserializer=scheme.EVENTS.event_message.FromString)(request)

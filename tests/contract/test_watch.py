"""Watch semantics: order, exactly-once, resume, Expired, bookmarks, slow watchers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import errors, scheme
from kubeling.client import Client, WatchEvent
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.conftest import apiserver_config
from tests.contract.etcd_history import history
from tests.objects import node, pod
from tests.wait import until

Seen = list[tuple[str, str, int]]


async def _first(stream: AsyncIterator[WatchEvent[core_pb2.Pod]]) -> WatchEvent[core_pb2.Pod]:
    """The stream's first event (as a coroutine, for a task)."""
    return await anext(aiter(stream))


async def _registered(server: APIServer, count: int) -> None:
    """Wait until `count` pod watchers are registered with the server's watch cache."""
    cache = server.registries[scheme.PODS].cache
    deadline = asyncio.get_running_loop().time() + 10
    while cache.watcher_count < count:
        assert asyncio.get_running_loop().time() < deadline, f"{cache.watcher_count} of {count} watchers registered"
        await asyncio.sleep(0.01)


def _key(ev: WatchEvent[core_pb2.Pod]) -> tuple[str, str, int]:
    return ev.type, ev.object.metadata.name, int(ev.object.metadata.resourceVersion)


async def _collect(client: Client, rv: str, until: int, out: Seen, **kw: object) -> None:
    async for ev in client.pods.watch(resource_version=rv, **kw):  # type: ignore[arg-type]
        if ev.type == "BOOKMARK":
            continue
        out.append(_key(ev))
        if int(ev.object.metadata.resourceVersion) >= until:
            return


async def _churn(client: Client, n: int, seed: int = 0) -> int:
    """Random creates, updates and deletes from 16 concurrent writers; returns the last revision."""
    rng = random.Random(seed)
    last = 0

    async def writer(w: int) -> None:
        nonlocal last
        for i in range(n):
            name = f"w{w}-{rng.randrange(6)}"
            op = rng.random()
            try:
                if op < 0.5:
                    obj = await client.pods.create(pod(name, labels={"w": str(w)}))
                elif op < 0.8:
                    cur = await client.pods.get(name)
                    cur.metadata.annotations["i"] = str(i)
                    obj = await client.pods.update(cur)
                else:
                    obj = await client.pods.delete(name)
                last = max(last, int(obj.metadata.resourceVersion))
            except (errors.AlreadyExists, errors.NotFound, errors.Conflict):
                pass

    await asyncio.gather(*(writer(w) for w in range(16)))
    return last


async def test_200_watchers_see_etcd_history_in_order_exactly_once(
        apiserver: APIServer, client: Client, etcd: EtcdServer, prefix: str) -> None:
    existing = [await client.pods.create(pod(f"pre-{i}")) for i in range(5)]
    start = int((await client.pods.list()).metadata.resourceVersion)
    # A mix: 100 resume from the list's resourceVersion, 100 start from the current state
    # (RV "": an ADDED per existing pod first), all registered before the churn.
    resumed: list[Seen] = [[] for _ in range(100)]
    initial: list[Seen] = [[] for _ in range(100)]
    ready = [asyncio.create_task(_collect(client, str(start), 1 << 62, s)) for s in resumed]
    ready += [asyncio.create_task(_collect(client, "", 1 << 62, s)) for s in initial]
    await _registered(apiserver, 200)
    streams = resumed + initial
    last = await _churn(client, 20)
    # A final marker write tells every watcher where the end is.
    marker = await client.pods.create(pod("zz-marker"))
    end = int(marker.metadata.resourceVersion)
    truth = await history(etcd, prefix, start, end)
    assert len(truth) > 100 and truth[-1][2] == end >= last
    deadline = asyncio.get_running_loop().time() + 60
    while any(not s or s[-1][2] < end for s in streams):
        for t in ready:
            if t.done():
                t.result()  # a watcher that failed: show why
        assert asyncio.get_running_loop().time() < deadline, "watchers did not catch up"
        await asyncio.sleep(0.05)
    for t in ready:
        t.cancel()
    for s in resumed:
        assert s == truth  # same events, same order, none missed, none repeated
    state = [("ADDED", p.metadata.name, int(p.metadata.resourceVersion)) for p in existing]
    for s in initial:
        assert s == state + truth  # the state as it was, then the same history


async def test_watch_from_zero_gives_state_then_changes(apiserver: APIServer, client: Client) -> None:
    a = await client.pods.create(pod("a"))
    await client.pods.create(pod("b"))
    seen: list[tuple[str, str]] = []

    async def run() -> None:
        async for ev in client.pods.watch(resource_version="0"):
            seen.append((ev.type, ev.object.metadata.name))
            if len(seen) == 4:
                return

    task = asyncio.create_task(run())
    await _registered(apiserver, 1)
    a.metadata.labels["x"] = "1"
    await client.pods.update(a)
    await client.pods.delete("b")
    await asyncio.wait_for(task, 5)
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]


async def _raw_watch(apiserver: APIServer, request: meta_pb2.WatchRequest,
                     events: int) -> list[Any]:
    """The watch's messages as sent, until they hold `events` events."""
    async with grpc.aio.insecure_channel(apiserver.address) as channel:
        # the service and its event message as the scheme builds them, called by name
        call = channel.unary_stream("/kubeling.v1.Pods/Watch",
                                    request_serializer=meta_pb2.WatchRequest.SerializeToString,
                                    response_deserializer=scheme.PODS.event_message.FromString)(request)
        messages: list[Any] = []
        async for message in call:
            messages.append(message)
            if sum(len(m.batch) or 1 for m in messages) >= events:
                call.cancel()
                return messages
    raise AssertionError("the watch ended early")


def _unpacked(messages: list[Any]) -> list[tuple[str, str, int]]:
    return [(e.type, e.object.metadata.name, int(e.object.metadata.resourceVersion))
            for m in messages for e in (m.batch or [m])]


async def test_batched_watch_sends_the_same_events_in_fewer_messages(apiserver: APIServer, client: Client) -> None:
    for i in range(30):
        await client.pods.create(pod(f"p{i:02}"))
    # The state from "0": every event is ready at once.
    plain = await _raw_watch(apiserver, meta_pb2.WatchRequest(resourceVersion="0"), 30)
    batched = await _raw_watch(apiserver, meta_pb2.WatchRequest(resourceVersion="0", batchEvents=True), 30)
    assert len(plain) == 30 and not any(m.batch for m in plain)  # unasked, one event per message
    assert len(batched) < 30 and all(not m.type for m in batched if m.batch)
    assert _unpacked(batched) == _unpacked(plain)

    # Live: a burst of concurrent writes, read by the client library (which asks for
    # batches): each event once, in revision order.
    _, rv = await client.pods.list_all("default")
    seen: Seen = []

    async def collect() -> None:
        async for ev in client.pods.watch(resource_version=rv):
            if ev.type != "BOOKMARK":
                seen.append(_key(ev))
            if len(seen) == 60:
                return

    task = asyncio.create_task(collect())
    await _registered(apiserver, 1)
    await asyncio.gather(*(client.pods.create(pod(f"q{i:02}")) for i in range(60)))
    await asyncio.wait_for(task, 10)
    assert sorted(name for _, name, _ in seen) == sorted(f"q{i:02}" for i in range(60))
    assert [r for _, _, r in seen] == sorted(r for _, _, r in seen) and {t for t, _, _ in seen} == {"ADDED"}


async def test_deleted_event_carries_last_state(client: Client) -> None:
    created = await client.pods.create(pod("gone", labels={"k": "v"}))
    task = asyncio.create_task(_first(client.pods.watch(resource_version=created.metadata.resourceVersion)))
    deleted = await client.pods.delete("gone")
    ev = await asyncio.wait_for(task, 5)
    assert ev.type == "DELETED"
    assert ev.object.metadata.labels["k"] == "v"
    assert ev.object.metadata.resourceVersion == deleted.metadata.resourceVersion


async def test_selector_watch_sees_objects_enter_and_leave(client: Client) -> None:
    start = (await client.pods.list()).metadata.resourceVersion
    seen: list[tuple[str, str]] = []

    async def run() -> None:
        async for ev in client.pods.watch(resource_version=start, field_selector="spec.nodeName=n1"):
            seen.append((ev.type, ev.object.metadata.name))
            if len(seen) == 3:
                return

    task = asyncio.create_task(run())
    await client.pods.create(pod("other", node="n2"))
    await client.pods.create(pod("p"))
    await client.pods.bind("p", "n1")  # enters the selection: ADDED
    await client.pods.create(pod("direct", node="n1"))
    labelled = await client.pods.get("p")
    labelled.metadata.labels["a"] = "b"
    await client.pods.update(labelled)  # MODIFIED
    await asyncio.wait_for(task, 5)
    assert seen == [("ADDED", "p"), ("ADDED", "direct"), ("MODIFIED", "p")]

    # Leaving a label selection is a DELETED for that watcher.
    rv = (await client.pods.get("p")).metadata.resourceVersion
    nxt = asyncio.create_task(_first(client.pods.watch(resource_version=rv, label_selector="a=b")))
    cur = await client.pods.get("p")
    del cur.metadata.labels["a"]
    await client.pods.update(cur)
    ev = await asyncio.wait_for(nxt, 5)
    assert (ev.type, ev.object.metadata.name) == ("DELETED", "p")


async def test_a_kubelets_node_watch_is_indexed_by_name(apiserver: APIServer, client: Client) -> None:
    """Each kubelet watches metadata.name=<its node>: the nodes' watch cache files such a
    watcher under that name (only that node's events are offered to it), and it sees its
    node's whole life and nothing of the others'."""
    start = (await client.nodes.list()).metadata.resourceVersion
    seen: list[tuple[str, str]] = []

    async def run() -> None:
        async for ev in client.nodes.watch(resource_version=start, field_selector="metadata.name=idx-n1"):
            seen.append((ev.type, ev.object.metadata.name))
            if ev.type == "DELETED":
                return

    cache = apiserver.registries[scheme.NODES].cache
    before = cache.watcher_count
    task = asyncio.create_task(run())
    await until(lambda: cache.watcher_count == before + 1, what="the node watcher registered")
    assert "idx-n1" in cache._indexed
    for name in ("idx-n0", "idx-n1", "idx-n2"):
        await client.nodes.create(node(name))
    mine = await client.nodes.get("idx-n1")
    mine.metadata.labels["seen"] = "yes"
    await client.nodes.update(mine)
    await client.nodes.delete("idx-n2")
    await client.nodes.delete("idx-n1")
    await asyncio.wait_for(task, 5)
    assert seen == [("ADDED", "idx-n1"), ("MODIFIED", "idx-n1"), ("DELETED", "idx-n1")]
    await until(lambda: "idx-n1" not in cache._indexed, what="the ended watcher unfiled")
    await client.nodes.delete("idx-n0")


async def test_a_nodes_pods_are_found_through_the_index_as_a_scan_finds_them(client: Client) -> None:
    """A list or a watch's current state by `spec.nodeName=<node>` is taken from the cache's
    keys by node, kept as pods are made, bound and deleted: the same answer as a scan."""
    await client.pods.create(pod("ix-late"))
    await client.pods.create(pod("ix-b", node="ix-n1", labels={"k": "v"}))
    await client.pods.create(pod("ix-c", node="ix-n2"))
    await client.pods.create(pod("ix-a", node="ix-n1", namespace="kube-system"))

    async def names(**kw: Any) -> list[str]:
        return [p.metadata.name for p in (await client.pods.list(**kw)).items if p.metadata.name.startswith("ix-")]

    # in key order: default/ before kube-system/
    assert await names(field_selector="spec.nodeName=ix-n1") == ["ix-b", "ix-a"]
    assert await names(field_selector="spec.nodeName=") == ["ix-late"]
    await client.pods.bind("ix-late", "ix-n1")
    assert await names(field_selector="spec.nodeName=ix-n1") == ["ix-b", "ix-late", "ix-a"]
    assert await names(field_selector="spec.nodeName=") == []
    assert await names(field_selector="spec.nodeName=ix-n1", label_selector="k=v") == ["ix-b"]
    assert await names(namespace="default", field_selector="spec.nodeName=ix-n1") == ["ix-b", "ix-late"]
    await client.pods.delete("ix-b", grace_period_seconds=0)  # bound: graceful unless told
    assert await names(field_selector="spec.nodeName=ix-n1") == ["ix-late", "ix-a"]
    assert await names(field_selector="spec.nodeName=ix-n3") == []
    current = []
    async for ev in client.pods.watch(field_selector="spec.nodeName=ix-n1", allow_bookmarks=True):
        if ev.type == "ADDED":
            current.append(ev.object.metadata.name)
        if len(current) == 2:
            break
    assert current == ["ix-late", "ix-a"]


async def test_bookmarks_keep_idle_watchers_fresh(apiserver: APIServer, client: Client) -> None:
    created = await client.pods.create(pod("a"))
    await client.nodes.create(core_pb2.Node(metadata={"name": "n"}))  # moves etcd's revision, not pods'
    bookmarks: list[int] = []

    async def run() -> None:
        async for ev in client.pods.watch(resource_version=created.metadata.resourceVersion, allow_bookmarks=True):
            assert ev.type == "BOOKMARK"
            assert ev.object.metadata.name == ""
            bookmarks.append(int(ev.object.metadata.resourceVersion))
            if len(bookmarks) == 3:
                return

    await asyncio.wait_for(run(), 10)
    assert bookmarks == sorted(bookmarks)
    # The bookmark reaches past the pod's own revision: it reflects etcd progress.
    assert bookmarks[-1] > int(created.metadata.resourceVersion)
    # Without allowWatchBookmarks, none come: while a watcher that allows them gets two more.
    rv = created.metadata.resourceVersion
    quiet = asyncio.create_task(_first(client.pods.watch(resource_version=rv)))
    await _registered(apiserver, 1)
    async with asyncio.timeout(10):
        count = 0
        async for _ in client.pods.watch(resource_version=rv, allow_bookmarks=True):
            count += 1
            if count == 2:
                break
    assert not quiet.done()
    quiet.cancel()


async def test_resume_across_apiserver_restart(etcd: EtcdServer, prefix: str) -> None:
    first = APIServer(apiserver_config(etcd, prefix))
    await first.start()
    client = Client(first.address)
    start = int((await client.pods.list()).metadata.resourceVersion)
    seen: Seen = []
    for i in range(5):
        await client.pods.create(pod(f"before-{i}"))
    mid = int((await client.pods.get("before-4")).metadata.resourceVersion)
    await _collect(client, str(start), mid, seen)
    await client.close()
    await first.stop(grace=0)

    # Changes while no apiserver instance serves this client: through another instance.
    other = APIServer(apiserver_config(etcd, prefix))
    await other.start()
    async with Client(other.address) as c2:
        for i in range(5):
            await c2.pods.create(pod(f"during-{i}"))
        await c2.pods.delete("before-0")
    await other.stop(grace=0)

    second = APIServer(apiserver_config(etcd, prefix))
    await second.start()
    try:
        async with Client(second.address) as c3:
            end = int((await c3.pods.create(pod("after"))).metadata.resourceVersion)
            await asyncio.wait_for(_collect(c3, str(seen[-1][2]), end, seen), 10)
    finally:
        await second.stop(grace=0)
    expected = await history(etcd, prefix, start, end)
    assert seen == expected, f"\nseen:     {seen}\nexpected: {expected}"


async def test_expired_after_compaction(prefix: str) -> None:
    with EtcdServer() as own_etcd:  # compaction is global to an etcd: not on the shared one
        server = APIServer(apiserver_config(own_etcd, prefix, compaction_interval=0.2))
        await server.start()
        try:
            async with Client(server.address) as client:
                old = (await client.pods.create(pod("old"))).metadata.resourceVersion
                for i in range(5):
                    await client.pods.create(pod(f"p{i}"))
                await until(lambda: server.metrics.compactions._value.get() >= 2, "two compactions", timeout=10)
                with pytest.raises(errors.Expired, match="too old resource version"):
                    async for _ in client.pods.watch(resource_version=old):
                        pass
                # A fresh list gives a resourceVersion that works.
                rv = (await client.pods.list()).metadata.resourceVersion
                task = asyncio.create_task(_first(client.pods.watch(resource_version=rv)))
                await client.pods.create(pod("new"))
                assert (await asyncio.wait_for(task, 5)).object.metadata.name == "new"
        finally:
            await server.stop(grace=0)


async def test_slow_watcher_does_not_delay_fast_one_and_is_ended(etcd: EtcdServer, prefix: str) -> None:
    server = APIServer(apiserver_config(etcd, prefix, watcher_buffer=20))
    await server.start()
    # The slow client has fixed 64 KiB HTTP/2 windows (no BDP growth), so the server's writes
    # to it block after a message or two and the watch cache's buffer must absorb the rest.
    slow_channel = grpc.aio.insecure_channel(server.address, options=[("grpc.http2.bdp_probe", 0)])
    try:
        async with Client(server.address) as client:
            slow_client = Client(server.address, channel=slow_channel)
            start = (await client.pods.list()).metadata.resourceVersion
            slow_iter = aiter(slow_client.pods.watch(resource_version=start))
            slow_first = asyncio.create_task(_first(slow_iter))  # opens the stream, reads one event
            fast: Seen = []
            fast_task = asyncio.create_task(_collect(client, start, 1 << 62, fast))
            await _registered(server, 2)
            n = 60
            payload = {"blob": "x" * 60_000}
            last = 0
            for i in range(n):
                last = int((await client.pods.create(pod(f"p{i}", annotations=payload))).metadata.resourceVersion)
            await until(lambda: fast and fast[-1][2] >= last, "the fast watcher at the last revision", timeout=10)
            assert [name for _, name, _ in fast] == [f"p{i}" for i in range(n)]
            fast_task.cancel()
            # The slow one: what reached it comes in order, then a clear end (it would resume).
            got = [(await slow_first).object.metadata.name]
            with pytest.raises(errors.WatcherTooSlow, match="resume from the last resourceVersion"):
                async for ev in slow_iter:
                    got.append(ev.object.metadata.name)
            assert got == [f"p{i}" for i in range(len(got))] and len(got) < n
            assert server.registries[scheme.PODS].cache.watcher_count == 0 or fast_task.done()
    finally:
        await slow_channel.close()
        await server.stop(grace=0)


async def test_watch_errors(client: Client) -> None:
    with pytest.raises(errors.BadRequest):
        async for _ in client.pods.watch(resource_version="x"):
            pass
    with pytest.raises(errors.BadRequest, match="field label not supported"):
        async for _ in client.pods.watch(field_selector="spec.nope=1"):
            pass
    with pytest.raises(errors.Timeout, match="Too large resource version"):
        async for _ in client.pods.watch(resource_version=str(1 << 40)):
            pass


async def test_watch_timeout_seconds_ends_stream_cleanly(client: Client) -> None:
    events = [ev async for ev in client.pods.watch(resource_version="0", timeout_seconds=1)]
    assert events == []

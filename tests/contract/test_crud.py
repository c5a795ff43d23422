"""CRUD verbs and their error codes against a real apiserver on a real etcd."""

from __future__ import annotations

import asyncio

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apiserver.server import APIServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.objects import namespace, node, pod
from tests.wait import until


async def test_create_get_defaults_and_server_fields(client: Client) -> None:
    created = await client.pods.create(pod("web", cpu="1.5"))
    assert created.metadata.namespace == "default"
    assert created.metadata.uid and created.metadata.creationTimestamp.seconds > 0
    assert created.metadata.generation == 1
    assert int(created.metadata.resourceVersion) > 0
    assert created.spec.schedulerName == "default-scheduler"
    assert created.spec.restartPolicy == "Always"
    assert created.spec.terminationGracePeriodSeconds == 30
    assert created.spec.containers[0].resources.requests["cpu"] == "1500m"  # canonical form
    assert created.status.phase == "Pending"
    got = await client.pods.get("web")
    assert got == created


async def test_create_twice_is_already_exists(client: Client) -> None:
    await client.pods.create(pod("a"))
    with pytest.raises(errors.AlreadyExists, match='pods "a" already exists'):
        await client.pods.create(pod("a"))


async def test_generate_name(client: Client) -> None:
    p = pod("")
    p.metadata.generateName = "web-"
    a = await client.pods.create(p)
    b = await client.pods.create(p)
    assert a.metadata.name.startswith("web-") and len(a.metadata.name) == 9
    assert a.metadata.name != b.metadata.name


async def test_invalid_names_every_field_and_writes_nothing(client: Client) -> None:
    bad = pod("Bad_Name")
    bad.spec.containers[0].image = ""
    bad.spec.containers[0].resources.requests["memory"] = "12 apples"
    bad.spec.restartPolicy = "Sometimes"
    with pytest.raises(errors.Invalid) as info:
        await client.pods.create(bad)
    fields = {v.field for v in info.value.violations}
    assert {"metadata.name", "spec.containers[0].image",
            "spec.containers[0].resources.requests[memory]", "spec.restartPolicy"} <= fields
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    page = await client.pods.list()
    assert list(page.items) == []


async def test_resource_version_on_create_is_bad_request(client: Client) -> None:
    p = pod("x")
    p.metadata.resourceVersion = "5"
    with pytest.raises(errors.BadRequest, match="resourceVersion should not be set"):
        await client.pods.create(p)


async def test_get_missing_is_not_found(client: Client) -> None:
    with pytest.raises(errors.NotFound, match='pods "nope" not found'):
        await client.pods.get("nope")
    with pytest.raises(errors.NotFound):
        await client.pods.delete("nope")


async def test_namespace_must_exist(client: Client) -> None:
    with pytest.raises(errors.NotFound, match='namespaces "ghost" not found'):
        await client.pods.create(pod("p", namespace="ghost"))
    await client.namespaces.create(namespace("ghost"))
    created = await client.pods.create(pod("p", namespace="ghost"))
    assert created.metadata.namespace == "ghost"


async def test_update_precondition_conflict_names_object(client: Client) -> None:
    created = await client.nodes.create(node("n1"))
    first = core_pb2.Node()
    first.CopyFrom(created)
    first.metadata.labels["a"] = "1"
    updated = await client.nodes.update(first)
    assert int(updated.metadata.resourceVersion) > int(created.metadata.resourceVersion)
    stale = core_pb2.Node()
    stale.CopyFrom(created)
    stale.metadata.labels["a"] = "2"
    with pytest.raises(errors.Conflict, match='nodes "n1": the object has been modified'):
        await client.nodes.update(stale)
    # No resourceVersion: an unconditional update (pods and nodes allow it, as upstream).
    stale.metadata.resourceVersion = ""
    assert (await client.nodes.update(stale)).metadata.labels["a"] == "2"


async def test_update_keeps_status_and_status_update_keeps_spec(client: Client) -> None:
    created = await client.pods.create(pod("s"))
    change = core_pb2.Pod()
    change.CopyFrom(created)
    change.status.phase = "Running"
    change.metadata.labels["x"] = "y"
    after = await client.pods.update(change)
    assert after.status.phase == "Pending" and after.metadata.labels["x"] == "y"
    status = core_pb2.Pod()
    status.CopyFrom(after)
    status.status.phase = "Running"
    status.spec.containers[0].image = "other"
    status.metadata.labels["x"] = "z"
    status.metadata.ownerReferences.add(apiVersion="v1", kind="Node", name="n", uid="u")
    after2 = await client.pods.update_status(status)
    assert after2.status.phase == "Running"
    assert after2.spec.containers[0].image == "busybox" and not after2.metadata.ownerReferences
    # as upstream's podStatusStrategy: labels and annotations go with a pod's status write
    assert after2.metadata.labels["x"] == "z"
    assert after2.metadata.generation == 1
    # other resources' status writes keep all of the stored metadata
    node = await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="s-node", labels={"x": "y"})))
    node.metadata.labels["x"] = "z"
    node.status.phase = "Running"
    assert (await client.nodes.update_status(node)).metadata.labels["x"] == "y"


async def test_spec_update_bumps_generation_and_pod_spec_is_mostly_immutable(client: Client) -> None:
    created = await client.pods.create(pod("g"))
    change = core_pb2.Pod()
    change.CopyFrom(created)
    change.spec.containers[0].image = "busybox:2"
    after = await client.pods.update(change)
    assert after.metadata.generation == 2
    change.CopyFrom(after)
    change.spec.containers[0].command[:] = ["true"]
    with pytest.raises(errors.Invalid, match="pod updates may not change fields"):
        await client.pods.update(change)
    # metadata only: generation unchanged
    change.CopyFrom(after)
    change.metadata.annotations["note"] = "hi"
    assert (await client.pods.update(change)).metadata.generation == 2


async def test_noop_update_writes_nothing(client: Client) -> None:
    created = await client.pods.create(pod("n"))
    same = await client.pods.update(created)
    assert same.metadata.resourceVersion == created.metadata.resourceVersion


async def test_delete_preconditions(client: Client) -> None:
    await client.nodes.create(node("d1"))
    # as it stays: the apiserver's node IPAM gives it a pod CIDR a moment after its creation
    created = await until(lambda: client.nodes.get("d1"), "node d1's pod CIDR", check=lambda n: n.spec.podCIDR)
    with pytest.raises(errors.Conflict, match="Precondition failed: UID"):
        await client.nodes.delete("d1", uid="not-the-uid")
    with pytest.raises(errors.Conflict, match="Precondition failed: ResourceVersion"):
        await client.nodes.delete("d1", resource_version="1")
    await client.nodes.delete("d1", uid=created.metadata.uid, resource_version=created.metadata.resourceVersion)
    with pytest.raises(errors.NotFound):
        await client.nodes.get("d1")


async def test_graceful_deletion_of_bound_pod(client: Client) -> None:
    await client.pods.create(pod("unbound"))
    gone = await client.pods.delete("unbound")
    assert gone.metadata.name == "unbound"
    with pytest.raises(errors.NotFound):
        await client.pods.get("unbound")

    await client.pods.create(pod("bound", node="node-1"))
    marked = await client.pods.delete("bound")
    assert marked.metadata.HasField("deletionTimestamp")
    assert marked.metadata.deletionGracePeriodSeconds == 30
    still = await client.pods.get("bound")
    assert still.metadata.deletionGracePeriodSeconds == 30
    shorter = await client.pods.delete("bound", grace_period_seconds=5)
    assert shorter.metadata.deletionGracePeriodSeconds == 5
    longer = await client.pods.delete("bound", grace_period_seconds=60)  # never lengthened
    assert longer.metadata.deletionGracePeriodSeconds == 5
    # The kubelet confirms with grace 0: now it is gone.
    await client.pods.delete("bound", grace_period_seconds=0)
    with pytest.raises(errors.NotFound):
        await client.pods.get("bound")


async def test_finalizers_hold_deletion_until_removed(client: Client) -> None:
    p = pod("fin")
    p.metadata.finalizers.append("example.com/hold")
    await client.pods.create(p)
    marked = await client.pods.delete("fin")
    assert marked.metadata.HasField("deletionTimestamp")
    held = await client.pods.get("fin")
    held.metadata.ClearField("finalizers")
    await client.pods.update(held)
    with pytest.raises(errors.NotFound):
        await client.pods.get("fin")


async def test_bind_once(client: Client) -> None:
    await client.pods.create(pod("b"))
    bound = await client.pods.bind("b", "node-1")
    assert bound.spec.nodeName == "node-1"
    cond = {c.type: c for c in bound.status.conditions}["PodScheduled"]
    assert cond.status == "True"
    with pytest.raises(errors.Conflict, match="already assigned to node"):
        await client.pods.bind("b", "node-2")
    assert (await client.pods.get("b")).spec.nodeName == "node-1"
    with pytest.raises(errors.NotFound):
        await client.pods.bind("missing", "node-1")
    with pytest.raises(errors.Invalid, match="target.name"):
        await client.pods.bind("b", "")


async def test_concurrent_binds_exactly_one_wins(client: Client) -> None:
    await client.pods.create(pod("race"))
    results = await asyncio.gather(*(client.pods.bind("race", f"node-{i}") for i in range(10)),
                                   return_exceptions=True)
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(isinstance(r, errors.Conflict) for r in results if isinstance(r, Exception))
    assert (await client.pods.get("race")).spec.nodeName == winners[0].spec.nodeName


async def test_bind_refused_while_deleting(client: Client) -> None:
    p = pod("dying")
    p.metadata.finalizers.append("example.com/hold")
    await client.pods.create(p)
    await client.pods.delete("dying")
    with pytest.raises(errors.Conflict, match="is being deleted"):
        await client.pods.bind("dying", "node-1")


async def test_namespace_lifecycle(client: Client) -> None:
    await client.namespaces.create(namespace("team"))
    await client.pods.create(pod("p1", namespace="team"))
    ns = await client.namespaces.delete("team")
    assert ns.status.phase == "Terminating"
    with pytest.raises(errors.Forbidden, match="being terminated"):
        await client.pods.create(pod("p2", namespace="team"))
    for _ in range(100):
        try:
            await client.namespaces.get("team")
        except errors.NotFound:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("namespace was never removed")
    with pytest.raises(errors.NotFound):
        await client.pods.get("p1", "team")
    with pytest.raises(errors.Forbidden, match="may not be deleted"):
        await client.namespaces.delete("default")


async def test_object_too_large(client: Client) -> None:
    with pytest.raises(errors.ApiError) as info:
        await client.pods.create(pod("big", annotations={"a": "x" * (4 * 1024 * 1024)}))
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_health_reflection_and_metrics(etcd: object, prefix: str) -> None:
    from tests.conftest import apiserver_config
    server = APIServer(apiserver_config(etcd, prefix, metrics_listen="127.0.0.1:0"))  # type: ignore[arg-type]
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            resp = await health.Check(health_pb2.HealthCheckRequest(service="kubeling.v1.Pods"))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
            from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
            refl = reflection_pb2_grpc.ServerReflectionStub(ch)
            async for r in refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
                listed = {s.name for s in r.list_services_response.service}
                assert {"kubeling.v1.Pods", "kubeling.v1.Nodes", "grpc.health.v1.Health"} <= listed
                break
        async with Client(server.address) as c:
            await c.pods.create(pod("m"))
            with pytest.raises(errors.NotFound):
                await c.pods.get("absent")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{server.metrics_port}/metrics") as r:
                text = await r.text()
            async with http.get(f"http://127.0.0.1:{server.metrics_port}/readyz") as r:
                assert r.status == 200
        assert 'apiserver_request_total{code="OK",resource="pods",verb="CREATE"} 1.0' in text
        assert 'apiserver_request_total{code="NOT_FOUND",resource="pods",verb="GET"} 1.0' in text
        assert "apiserver_request_duration_seconds_bucket" in text
        assert "apiserver_registered_watchers" in text
    finally:
        await server.stop(grace=0)


async def test_malformed_request_is_invalid_argument(apiserver: APIServer) -> None:
    async with grpc.aio.insecure_channel(apiserver.address) as ch:
        create = ch.unary_unary("/kubeling.v1.Pods/Create")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await create(b"\x0a\xff\xff")  # field 1, a length that runs past the end
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid kubeling.v1.Pod" in (info.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in ch.unary_stream("/kubeling.v1.Pods/Watch")(b"\x12\x80"):
                pass
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_events_expire_after_event_ttl(etcd: object, prefix: str) -> None:
    from tests.conftest import apiserver_config
    server = APIServer(apiserver_config(etcd, prefix, event_ttl=1.0))  # type: ignore[arg-type]
    await server.start()
    try:
        async with Client(server.address) as c:
            ev = core_pb2.Event(metadata={"name": "pod-a.1", "namespace": "default"},
                                involvedObject={"kind": "Pod", "name": "a", "namespace": "default"},
                                reason="Scheduled", message="assigned to node-1")
            created = await c.events.create(ev)
            assert created.type == "Normal" and created.count == 1
            node_obj = await c.nodes.create(node("keeps"))  # not an Event: never expires
            async def expired() -> bool:
                try:
                    await c.events.get("pod-a.1")
                    return False
                except errors.NotFound:
                    return True
            await until(expired, "the event gone after its TTL", timeout=10)  # etcd's shortest lease: about 2 s
            assert (await c.nodes.get("keeps")).metadata.uid == node_obj.metadata.uid
    finally:
        await server.stop(grace=0)

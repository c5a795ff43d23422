"""Server-side dry run, deletecollection, DeleteOptions and pods/eviction against their
contract (issue 22): dryRun=All runs every stage but the write (no resourceVersion
consumed, validation and conflicts reported), a collection DELETE with selectors,
DeleteOptions in JSON and protobuf (kubectl's typed clients), malformed ones a 400, and
evictions that a PodDisruptionBudget allows (decremented, recorded) or refuses (429 with
upstream's message and cause)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from kubeling import errors, scheme
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2, policy_pb2


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Client]:
    async with Client(rest.address) as c:
        yield c


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    async with aiohttp.ClientSession() as session:
        yield session, f"http://{rest.rest_address}/api/v1/namespaces/default"


def pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, labels=labels or {}), spec=core_pb2.PodSpec(
        nodeName=node, containers=[core_pb2.Container(name="main", image="busybox")]))


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dry", "labels": {"app": "x"}},
       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


async def _call(http: tuple[aiohttp.ClientSession, str], method: str, path: str, **kw: Any) -> tuple[int, Any]:
    session, base = http
    async with session.request(method, base + path, **kw) as r:
        return r.status, await r.json(content_type=None)


async def test_dry_run_writes_nothing(rest: APIServer, api: Client, http: tuple[aiohttp.ClientSession, str]) -> None:
    before = int((await api.pods.list()).metadata.resourceVersion)
    code, body = await _call(http, "POST", "/pods?dryRun=All", json=POD)
    assert code == 201 and body["metadata"]["name"] == "dry" and body["metadata"]["uid"]
    assert "resourceVersion" not in body["metadata"] and body["spec"]["restartPolicy"] == "Always"  # defaulted
    with pytest.raises(errors.NotFound):
        await api.pods.get("dry")
    # No pod revision consumed (not even a write undone): the pods' watch cache, caught up
    # with etcd, holds no event since. etcd's revision itself may move meanwhile: the
    # apiserver's own writers (its controllers' lease) do not wait for the test.
    after = int((await api.pods.list()).metadata.resourceVersion)
    cache = rest.registries[scheme.PODS].watch_cache
    await cache.wait_for(after)
    assert [(e.type, e.key) for e in cache.events if e.rv > before] == []
    bad = {**POD, "spec": {"containers": [{"name": "main"}]}}
    code, body = await _call(http, "POST", "/pods?dryRun=All", json=bad)
    assert code == 422 and "spec.containers[0].image" in body["message"]
    code, body = await _call(http, "POST", "/pods?dryRun=Some", json=POD)
    assert code == 400 and 'Unsupported value: "Some"' in body["message"]

    made = await api.pods.create(pod("real", {"app": "x"}))
    code, body = await _call(http, "PATCH", "/pods/real?dryRun=All", json={"metadata": {"labels": {"app": "y"}}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert code == 200 and body["metadata"]["labels"]["app"] == "y"
    assert body["metadata"]["resourceVersion"] == made.metadata.resourceVersion
    assert (await api.pods.get("real")).metadata.labels["app"] == "x"
    stale = {**POD, "metadata": {"name": "real", "resourceVersion": "1"}}
    code, _ = await _call(http, "PUT", "/pods/real?dryRun=All", json=stale)
    assert code == 409  # conflicts are judged as for real
    code, body = await _call(http, "DELETE", "/pods/real?dryRun=All")
    assert code == 200 and (await api.pods.get("real")).metadata.uid == made.metadata.uid
    with pytest.raises(errors.AlreadyExists):
        await api.pods.create(pod("real"), dry_run=True)  # gRPC: the `dry-run: All` metadata
    assert (await api.pods.create(pod("grpc-dry"), dry_run=True)).metadata.uid
    with pytest.raises(errors.NotFound):
        await api.pods.get("grpc-dry")


async def test_delete_collection_and_delete_options(api: Client, http: tuple[aiohttp.ClientSession, str]) -> None:
    for i in range(3):
        await api.pods.create(pod(f"a{i}", {"app": "a"}))
    await api.pods.create(pod("b0", {"app": "b"}))
    code, body = await _call(http, "DELETE", "/pods?labelSelector=app%3Da")
    assert code == 200 and body["kind"] == "PodList" and sorted(i["metadata"]["name"] for i in body["items"]) == [
        "a0", "a1", "a2"]
    assert [p.metadata.name for p in (await api.pods.list_all())[0]] == ["b0"]
    code, body = await _call(http, "DELETE", "/pods/b0", data=b"{not json",
                             headers={"Content-Type": "application/json"})
    assert code == 400 and body["reason"] == "BadRequest"
    code, body = await _call(http, "DELETE", "/pods/b0", json={"kind": "Pod"})
    assert code == 400
    # DeleteOptions as kubectl's typed clients send them: protobuf (gracePeriodSeconds 0)
    options = meta_pb2.DeleteOptions(gracePeriodSeconds=0, propagationPolicy="Background")
    envelope = b"k8s\x00" + _unknown("v1", "DeleteOptions", options.SerializeToString())
    code, body = await _call(http, "DELETE", "/pods/b0", data=envelope,
                             headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert code == 200 and body["metadata"]["name"] == "b0"
    assert not (await api.pods.list_all())[0]


def _unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown {typeMeta {apiVersion=1, kind=2} = 1, raw = 2}."""
    def field(number: int, data: bytes) -> bytes:
        return bytes([number << 3 | 2]) + _len(len(data)) + data
    return field(1, field(1, api_version.encode()) + field(2, kind.encode())) + field(2, raw)


def _len(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


async def _running(api: Client, name: str, labels: dict[str, str]) -> core_pb2.Pod:
    await api.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=f"node-{name}")))
    made = await api.pods.create(pod(name, labels, node=f"node-{name}"))
    made.status.phase = "Running"
    made.status.conditions.add(type="Ready", status="True")
    return await api.pods.update_status(made)


async def test_eviction_honours_a_budget(api: Client, http: tuple[aiohttp.ClientSession, str]) -> None:
    for name in ("db-0", "db-1"):
        await _running(api, name, {"app": "db"})
    budget = await api.poddisruptionbudgets.create(policy_pb2.PodDisruptionBudget(
        metadata=meta_pb2.ObjectMeta(name="db"), spec=policy_pb2.PodDisruptionBudgetSpec(
            minAvailable=core_pb2.IntOrString(intVal=1), selector=meta_pb2.LabelSelector(matchLabels={"app": "db"}))))
    # no controller manager here: play the disruption controller's status
    budget.status.observedGeneration = budget.metadata.generation
    budget.status.currentHealthy, budget.status.desiredHealthy, budget.status.expectedPods = 2, 1, 2
    budget.status.disruptionsAllowed = 1
    await api.poddisruptionbudgets.update_status(budget)

    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0"}}
    code, body = await _call(http, "POST", "/pods/db-0/eviction?dryRun=All", json=eviction)
    assert code == 201 and (await api.pods.get("db-0")).metadata.deletionTimestamp.seconds == 0
    assert (await api.poddisruptionbudgets.get("db", "default")).status.disruptionsAllowed == 1
    code, body = await _call(http, "POST", "/pods/db-0/eviction", json=eviction)
    assert code == 201 and body["status"] == "Success"
    assert (await api.pods.get("db-0")).metadata.HasField("deletionTimestamp")  # graceful: bound to a node
    after = await api.poddisruptionbudgets.get("db", "default")
    assert after.status.disruptionsAllowed == 0 and "db-0" in after.status.disruptedPods

    code, body = await _call(http, "POST", "/pods/db-1/eviction", json={**eviction, "metadata": {"name": "db-1"}})
    assert code == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget db needs 1 healthy pods and has 2 "
                                                     "currently"}]
    assert not (await api.pods.get("db-1")).metadata.HasField("deletionTimestamp")
    with pytest.raises(errors.TooManyRequests):
        await api.pods.evict("db-1", "default")  # gRPC
    code, body = await _call(http, "POST", "/pods/db-1/eviction", json={**eviction, "metadata": {"name": "other"}})
    assert code == 400 and body["message"] == "name in URL does not match name in Eviction object"
    # a pod no budget covers, and a pending one, go at once
    await _running(api, "free", {"app": "free"})
    await api.pods.evict("free", "default", grace_period_seconds=0)
    with pytest.raises(errors.NotFound):
        await api.pods.get("free")


async def test_ephemeral_containers_subresource(api: Client, http: tuple[aiohttp.ClientSession, str]) -> None:
    await api.pods.create(pod("target"))
    patch = {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": True, "tty": True}]}}
    code, body = await _call(http, "PATCH", "/pods/target/ephemeralcontainers", json=patch,
                             headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert code == 200 and [c["name"] for c in body["spec"]["ephemeralContainers"]] == ["dbg"]
    assert body["spec"]["ephemeralContainers"][0]["imagePullPolicy"] == "Always"  # defaulted as a container
    changed = {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "other"}]}}
    code, body = await _call(http, "PATCH", "/pods/target/ephemeralcontainers", json=changed,
                             headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert code == 422 and "existing ephemeral containers 'dbg' may not be changed" in body["message"]
    bad = {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": True, "tty": True},
                                            {"name": "p", "image": "busybox", "ports": [{"containerPort": 80}],
                                             "targetContainerName": "nope"}]}}
    code, body = await _call(http, "PATCH", "/pods/target/ephemeralcontainers", json=bad,
                             headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert code == 422 and "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral " \
                           "Container" in body["message"] and "targetContainerName: Not found" in body["message"]
    # an ordinary update neither drops nor adds them
    current = await api.pods.get("target")
    del current.spec.ephemeralContainers[:]
    current.metadata.labels["x"] = "y"
    assert [c.name for c in (await api.pods.update(current)).spec.ephemeralContainers] == ["dbg"]
    made = pod("born-with")
    made.spec.ephemeralContainers.add(name="e", image="busybox")
    with pytest.raises(errors.Invalid, match="spec.ephemeralContainers: Forbidden: cannot be set on create"):
        await api.pods.create(made)

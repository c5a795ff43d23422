"""The REST facade against its protocol: the official `kubernetes` Python client (a real,
independent REST client) and raw HTTP for what the client does not expose (discovery,
OpenAPI, tables, content types). The apiserver runs on a real etcd."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import scheme
from kubeling.kubeconfig import write_kubeconfig
from tests.conftest import apiserver_config
from tests.wait import until

T = TypeVar("T")


def _api(server: APIServer, tmp_path: Path) -> k8s.CoreV1Api:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.rest_address)
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(kubeconfig)))


async def _sync(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The official client blocks: run it off the loop that serves it."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "60"],
                                     "ports": [{"containerPort": 80}]}]}}


async def test_python_client_crud_and_errors(rest: APIServer, tmp_path: Path) -> None:
    api = _api(rest, tmp_path)
    namespaces = await _sync(api.list_namespace)
    assert {"default", "kube-system"} <= {n.metadata.name for n in namespaces.items}

    created = await _sync(api.create_namespaced_pod, "default", _pod("a", app="web"))  # no kind/apiVersion sent
    assert created.metadata.uid and created.spec.containers[0].ports
    assert created.spec.containers[0].ports[0].protocol == "TCP"
    assert created.spec.termination_grace_period_seconds == 30
    generated = await _sync(api.create_namespaced_pod, "default",
                            {"metadata": {"generateName": "gen-"}, "spec": _pod("x")["spec"]})
    assert generated.metadata.name.startswith("gen-") and len(str(generated.metadata.name)) == 9

    listed = await _sync(api.list_namespaced_pod, "default", label_selector="app=web")
    assert [p.metadata.name for p in listed.items] == ["a"] and listed.metadata.resource_version
    by_field = await _sync(api.list_pod_for_all_namespaces, field_selector="metadata.name=a")
    assert [p.metadata.name for p in by_field.items] == ["a"]
    page = await _sync(api.list_namespaced_pod, "default", limit=1)
    assert len(page.items) == 1 and page.metadata._continue
    rest_page = await _sync(api.list_namespaced_pod, "default", limit=1, _continue=page.metadata._continue)
    assert {page.items[0].metadata.name, rest_page.items[0].metadata.name} == {"a", generated.metadata.name}

    patched = await _sync(api.patch_namespaced_pod, "a", "default", {"metadata": {"labels": {"tier": "x"}}})
    assert patched.metadata.labels == {"app": "web", "tier": "x"}
    stale = created
    stale.metadata.labels = {"app": "stale"}
    with pytest.raises(ApiException) as conflict:
        await _sync(api.replace_namespaced_pod, "a", "default", stale)
    assert conflict.value.status == 409 and json.loads(str(conflict.value.body))["reason"] == "Conflict"

    with pytest.raises(ApiException) as missing:
        await _sync(api.read_namespaced_pod, "nope", "default")
    body = json.loads(str(missing.value.body))
    assert missing.value.status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["message"] == 'pods "nope" not found' and body["details"] == {"name": "nope", "kind": "pods"}
    with pytest.raises(ApiException) as exists:
        await _sync(api.create_namespaced_pod, "default", _pod("a"))
    assert exists.value.status == 409 and json.loads(str(exists.value.body))["reason"] == "AlreadyExists"
    bad = _pod("bad")
    bad["spec"]["containers"][0]["image"] = ""
    with pytest.raises(ApiException) as invalid:
        await _sync(api.create_namespaced_pod, "default", bad)
    body = json.loads(str(invalid.value.body))
    assert invalid.value.status == 422 and body["reason"] == "Invalid"
    assert {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"} \
        in body["details"]["causes"]

    deleted = await _sync(api.delete_namespaced_pod, "a", "default")  # unbound: gone at once
    assert deleted.metadata.name == "a"
    with pytest.raises(ApiException):
        await _sync(api.read_namespaced_pod, "a", "default")


async def test_python_client_watch(rest: APIServer, tmp_path: Path) -> None:
    api = _api(rest, tmp_path)
    start = (await _sync(api.list_namespaced_pod, "default")).metadata.resource_version

    def collect() -> list[tuple[str, str]]:
        seen = []
        w = k8s_watch.Watch()
        for event in w.stream(api.list_namespaced_pod, "default", resource_version=start, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED":
                w.stop()
        return seen

    watching = asyncio.create_task(asyncio.to_thread(collect))
    await _sync(api.create_namespaced_pod, "default", _pod("w"))
    await _sync(api.patch_namespaced_pod, "w", "default", {"metadata": {"labels": {"x": "y"}}})
    await _sync(api.delete_namespaced_pod, "w", "default")
    assert await asyncio.wait_for(watching, 20) == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_python_client_watch_expired(prefix: str, tmp_path: Path) -> None:
    with EtcdServer() as own_etcd:  # compaction is global to an etcd: not on the shared one
        server = APIServer(apiserver_config(own_etcd, prefix, compaction_interval=0.2, rest_listen="127.0.0.1:0"))
        await server.start()
        try:
            api = _api(server, tmp_path)
            old = (await _sync(api.create_namespaced_pod, "default", _pod("old"))).metadata.resource_version
            for i in range(3):
                await _sync(api.create_namespaced_pod, "default", _pod(f"p{i}"))
            await until(lambda: server.metrics.compactions._value.get() >= 2, "two compactions", timeout=10)

            def watch_from_old() -> None:
                for _ in k8s_watch.Watch().stream(api.list_namespaced_pod, "default", resource_version=old):
                    pass

            # The client retries once on the 410 ERROR event, then raises it.
            with pytest.raises(ApiException) as gone:
                await asyncio.wait_for(asyncio.to_thread(watch_from_old), 20)
            assert gone.value.status == 410 and "Expired" in str(gone.value.reason)
        finally:
            await server.stop(grace=0)


# ------------------------------------------------------------------ raw HTTP


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    async with aiohttp.ClientSession() as session:
        yield session, f"http://{rest.rest_address}"


async def _get(http: tuple[aiohttp.ClientSession, str], path: str, **headers: str) -> tuple[int, Any]:
    session, base = http
    async with session.get(base + path, headers=headers) as r:
        return r.status, await r.json(content_type=None)


async def test_discovery_and_openapi(http: tuple[aiohttp.ClientSession, str]) -> None:
    code, version = await _get(http, "/version")
    assert code == 200 and version["major"] == "1" and 29 <= int(version["minor"]) <= 33
    assert (await _get(http, "/api"))[1]["versions"] == ["v1"]
    groups = (await _get(http, "/apis"))[1]
    assert [g["name"] for g in groups["groups"]] == [
        "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io", "apps", "autoscaling",
        "batch", "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io",
        "flowcontrol.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "policy",
        "rbac.authorization.k8s.io", "scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io"]
    v1 = (await _get(http, "/api/v1"))[1]
    names = {r["name"]: r for r in v1["resources"]}
    assert names["pods"]["shortNames"] == ["po"] and names["pods"]["categories"] == ["all"]
    assert names["nodes"]["namespaced"] is False
    assert {"pods/log", "pods/status", "pods/binding", "events", "namespaces"} <= set(names)
    for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"),
                      ("portforward", "PodPortForwardOptions")):
        assert (names[f"pods/{sub}"]["kind"], names[f"pods/{sub}"]["verbs"]) == (kind, ["create", "get"])
    assert names["events"]["shortNames"] == ["ev"] and names["namespaces"]["shortNames"] == ["ns"]
    assert names["services"]["shortNames"] == ["svc"] and names["services"]["categories"] == ["all"]
    assert names["endpoints"]["shortNames"] == ["ep"] and names["endpoints"]["singularName"] == "endpoints"
    discovery = (await _get(http, "/apis/discovery.k8s.io/v1"))[1]
    assert [(r["name"], r["kind"]) for r in discovery["resources"]] == [("endpointslices", "EndpointSlice")]
    leases = (await _get(http, "/apis/coordination.k8s.io/v1"))[1]
    assert [r["name"] for r in leases["resources"]] == ["leases"]
    rbac = (await _get(http, "/apis/rbac.authorization.k8s.io/v1"))[1]
    assert [(r["name"], r["namespaced"]) for r in rbac["resources"]] == [
        ("roles", True), ("clusterroles", False), ("rolebindings", True), ("clusterrolebindings", False)]
    apps = {r["name"]: r for r in (await _get(http, "/apis/apps/v1"))[1]["resources"]}
    assert apps["deployments"]["shortNames"] == ["deploy"] and apps["deployments"]["categories"] == ["all"]
    assert (apps["deployments/scale"]["group"], apps["deployments/scale"]["version"],
            apps["deployments/scale"]["kind"]) == ("autoscaling", "v1", "Scale")
    index = (await _get(http, "/openapi/v3"))[1]
    assert {"apis/apps/v1", "apis/batch/v1", "apis/policy/v1", "apis/scheduling.k8s.io/v1"} <= set(index["paths"])
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    doc = (await _get(http, url))[1]
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    schemas = doc["components"]["schemas"]
    assert schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "version": "v1", "kind": "Pod"}]
    containers = schemas["io.kubeling.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["x-kubernetes-patch-strategy"] == "merge"
    assert (await _get(http, "/api/v2"))[0] == 404
    assert (await _get(http, "/api/v1/widgets"))[0] == 404


async def test_tables_field_validation_and_content_types(http: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    body = {"apiVersion": "v1", "kind": "Pod", **_pod("t")}
    body["spec"]["colour"] = "blue"
    async with session.post(pods + "?fieldValidation=Strict", json=body) as r:
        assert r.status == 400 and 'unknown field "spec.colour"' in (await r.json())["message"]
    async with session.post(pods, json=body) as r:  # Warn (the default): created, with a warning
        assert r.status == 201 and 'unknown field \\"spec.colour\\"' in r.headers["Warning"]

    table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    code, table = await _get(http, "/api/v1/namespaces/default/pods", Accept=table_accept)
    assert code == 200 and table["kind"] == "Table"
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns[:5] == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0)]
    assert ("IP", 1) in columns and ("Node", 1) in columns
    row = table["rows"][0]
    assert row["cells"][:4] == ["t", "0/1", "Pending", "0"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "t"
    code, single = await _get(http, "/api/v1/namespaces/default/pods/t", Accept=table_accept)
    assert single["kind"] == "Table" and len(single["rows"]) == 1
    async with http[0].get(http[1] + "/api/v1/pods", headers={"Accept": "application/vnd.kubernetes.protobuf"}) as r:
        assert r.status == 200 and r.content_type == "application/vnd.kubernetes.protobuf"
        assert (await r.read())[:4] == b"k8s\x00"

    item = pods + "/t"
    async with session.patch(item, data=json.dumps([{"op": "add", "path": "/metadata/labels", "value": {"json": "1"}}]),
                             headers={"Content-Type": "application/json-patch+json"}) as r:
        assert r.status == 200 and (await r.json())["metadata"]["labels"] == {"json": "1"}
    smp = {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}
    async with session.patch(item, data=json.dumps(smp),
                             headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
        result = await r.json()  # containers merged by name: pods allow an image change
        assert r.status == 200, result
        assert result["spec"]["containers"][0]["image"] == "busybox:2"
        assert result["spec"]["containers"][0]["command"] == ["sleep", "60"]
    async with session.patch(item, data="{}", headers={"Content-Type": "text/plain"}) as r:
        assert r.status == 415 and (await r.json())["reason"] == "UnsupportedMediaType"
    async with session.post(item, json={}) as r:
        assert r.status == 405 and (await r.json())["reason"] == "MethodNotAllowed"

    applied = {"apiVersion": "v1", "kind": "Pod", **_pod("ssa", app="ssa")}
    async with session.patch(pods + "/ssa?fieldManager=test", data=json.dumps(applied),
                             headers={"Content-Type": "application/apply-patch+yaml"}) as r:
        created = await r.json()
        assert r.status == 201 and created["metadata"]["labels"] == {"app": "ssa"}
        assert [(e["manager"], e["operation"]) for e in created["metadata"]["managedFields"]] == [("test", "Apply")]
    applied["metadata"] = {"name": "ssa"}  # the label is no longer applied: it goes
    async with session.patch(pods + "/ssa?fieldManager=test", data=yaml.safe_dump(applied),
                             headers={"Content-Type": "application/apply-patch+yaml"}) as r:
        assert r.status == 200 and "labels" not in (await r.json())["metadata"]
    async with session.delete(item, json={"gracePeriodSeconds": 0}) as r:
        assert r.status == 200 and (await r.json())["metadata"]["name"] == "t"


async def test_http_watch(http: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    _, listed = await _get(http, "/api/v1/namespaces/default/pods")
    rv = listed["metadata"]["resourceVersion"]
    async with session.post(pods, json=_pod("w1")) as r:
        assert r.status == 201
    # From the list's resourceVersion: the create, then bookmarks until the timeout ends it.
    url = f"{pods}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2"
    async with session.get(url) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("application/json")
        events = [json.loads(line) async for line in r.content if line.strip()]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "w1"
    assert events[0]["object"]["kind"] == "Pod"
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


async def test_http_watch_list(http: tuple[aiohttp.ClientSession, str]) -> None:
    """client-go's streaming list (recent kubectl, 1.37 here, waits with it): the state as ADDED
    events, a BOOKMARK annotated k8s.io/initial-events-end at the state's revision, then
    the changes after it."""
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    for name in ("l1", "l2"):
        async with session.post(pods, json=_pod(name)) as r:
            assert r.status == 201
    _, listed = await _get(http, "/api/v1/namespaces/default/pods")
    url = f"{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    async with session.get(url + f"&resourceVersion={listed['metadata']['resourceVersion']}") as r:
        assert r.status == 200
        events = []
        async for line in r.content:
            events.append(json.loads(line))
            if events[-1]["type"] == "BOOKMARK":
                break
        async with session.post(pods, json=_pod("l3")) as created:
            assert created.status == 201
        after = json.loads(await r.content.readline())
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "l1"), ("ADDED", "l2"), ("BOOKMARK", None)]
    end = events[-1]["object"]["metadata"]
    assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["resourceVersion"]) >= int(listed["metadata"]["resourceVersion"])
    assert (after["type"], after["object"]["metadata"]["name"]) == ("ADDED", "l3")
    # sendInitialEvents=false: the changes only
    async with session.get(url.replace("sendInitialEvents=true", "sendInitialEvents=false")) as r:
        async with session.delete(pods + "/l1") as deleted:
            assert deleted.status == 200
        first = json.loads(await r.content.readline())
    assert (first["type"], first["object"]["metadata"]["name"]) == ("DELETED", "l1")
    for query, message in (
            ("watch=1&sendInitialEvents=true&allowWatchBookmarks=true", "sendInitialEvents requires setting "
                                                                        "resourceVersionMatch to NotOlderThan"),
            ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "sendInitialEvents requires "
                                                                                 "setting allowWatchBookmarks"),
            ("watch=1&resourceVersionMatch=NotOlderThan", "resourceVersionMatch is forbidden for watch unless "
                                                          "sendInitialEvents is provided")):
        code, status = await _get(http, f"/api/v1/namespaces/default/pods?{query}")
        assert code == 400 and message in status["message"], status


async def test_binding_and_status_subresources(http: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    async with session.post(pods, json=_pod("b")) as r:
        assert r.status == 201
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    async with session.post(pods + "/b/binding", json=binding) as r:
        assert r.status == 201 and (await r.json())["status"] == "Success"
    async with session.post(pods + "/b/binding", json=binding) as r:  # bound once only
        assert r.status == 409 and (await r.json())["reason"] == "Conflict"
    _, pod = await _get(http, "/api/v1/namespaces/default/pods/b")
    assert pod["spec"]["nodeName"] == "node-a"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"])

    # The status subresource changes status only; the main resource ignores status.
    patch = json.dumps({"status": {"phase": "Running", "podIP": "10.0.0.9"}, "spec": {"activeDeadlineSeconds": 5}})
    async with session.patch(pods + "/b/status", data=patch,
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        result = await r.json()
        assert r.status == 200 and result["status"]["podIP"] == "10.0.0.9"
        assert "activeDeadlineSeconds" not in result["spec"]
    async with session.patch(pods + "/b", data=json.dumps({"status": {"podIP": "10.0.0.10"}}),
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200 and (await r.json())["status"]["podIP"] == "10.0.0.9"
    # A bound pod's delete is graceful: the object comes back with a deletionTimestamp.
    async with session.delete(pods + "/b") as r:
        assert r.status == 200 and (await r.json())["metadata"]["deletionTimestamp"]


async def test_watch_ends_when_its_client_goes_away(rest: APIServer, http: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = http
    cache = rest.registries[scheme.PODS].cache
    before = cache.watcher_count
    response = await session.get(f"{base}/api/v1/namespaces/default/pods?watch=1")
    assert response.status == 200
    await until(lambda: cache.watcher_count == before + 1, "the REST watch registered", timeout=5, interval=0.02)
    response.close()  # the client hangs up without a word: the server's handler is cancelled
    await until(lambda: cache.watcher_count == before, "the watch ended with its client", timeout=5, interval=0.02)


async def test_errors_are_statuses(http: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    async with session.post(pods, data=b"{not json", headers={"Content-Type": "application/json"}) as r:
        body = await r.json()
        assert r.status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"
    async with session.post(pods, data=b"x" * (4 * 1024 * 1024), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 413 and (await r.json())["reason"] == "RequestEntityTooLarge"
    async with session.get(pods + "?labelSelector=a%20in%20(") as r:
        assert r.status == 400 and "unable to parse requirement" in (await r.json())["message"]
    async with session.get(pods + "?fieldSelector=spec.colour=red") as r:
        assert r.status == 400 and 'field label not supported: "spec.colour"' in (await r.json())["message"]
    async with session.post(base + "/api/v1/namespaces/nowhere/pods", json=_pod("x")) as r:
        assert r.status == 404 and (await r.json())["message"] == 'namespaces "nowhere" not found'
    async with session.post(pods, json={"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}}) as r:
        assert r.status == 400 and "this endpoint takes v1/Pod" in (await r.json())["message"]
    async with session.post(pods + "?dryRun=All", json=_pod("dry")) as r:
        assert r.status == 201  # a dry run: answered, not written
    async with session.post(pods + "?dryRun=Maybe", json=_pod("dry")) as r:
        assert r.status == 400
    _, listed = await _get(http, "/api/v1/namespaces/default/pods")
    assert [p["metadata"]["name"] for p in listed["items"]] == []  # nothing above wrote anything


async def test_pod_streams_are_located_and_checked(http: tuple[aiohttp.ClientSession, str]) -> None:
    """pods/exec, attach and portforward: the pod, its container, its options and its
    node's kubelet are checked before the connection is relayed; each failure a Status."""
    session, base = http
    pods = base + "/api/v1/namespaces/default/pods"
    upgrade = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": "v4.channel.k8s.io"}

    async def refused(method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        async with session.request(method, pods + path, headers=upgrade if headers is None else headers) as r:
            status = await r.json()
            assert status["kind"] == "Status" and status["code"] == r.status
            return r.status, status["message"]

    two = _pod("two")
    two["spec"]["containers"].append({"name": "side", "image": "busybox"})
    two["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
    for body in (_pod("one"), two):
        async with session.post(pods, json=body) as r:
            assert r.status == 201
    assert await refused("POST", "/ghost/exec?command=true") == (404, 'pods "ghost" not found')
    assert await refused("POST", "/two/exec?command=true") == (
        400, "a container name must be specified for pod two, choose one of: [main side] "
             "or one of the init containers: [setup]")
    assert await refused("GET", "/two/attach?container=nope") == (400, "container nope is not valid for pod two")
    code, message = await refused("POST", "/one/exec")
    assert code == 400 and message.startswith("command: Required value")
    assert await refused("POST", "/one/exec?command=true&stdout=false&stderr=0") == (
        400, "you must specify at least 1 of stdin, stdout, stderr")
    code, message = await refused("POST", "/one/portforward?ports=80,0")
    assert code == 400 and message.startswith('ports: Invalid value: "0"')
    for path in ("/one/exec?command=true", "/one/attach", "/one/portforward?ports=80"):
        assert await refused("POST", path) == (400, "pod one does not have a host assigned")
    async with session.post(pods, json=_pod("done")) as r:
        assert r.status == 201
    async with session.patch(pods + "/done/status", data=json.dumps({"status": {"phase": "Succeeded"}}),
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200
    assert await refused("POST", "/done/exec?command=true") == (
        400, "cannot exec into a container in a completed pod; current phase is Succeeded")
    assert await refused("POST", "/done/portforward") == (
        400, "unable to forward port because pod is not running. Current status=Succeeded")

    # Bound to a node whose kubelet does not answer (port 1 of loopback refuses)
    async with session.post(base + "/api/v1/nodes", json={"metadata": {"name": "dark"}}) as r:
        assert r.status == 201
    endpoint = {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                           "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}}
    async with session.patch(base + "/api/v1/nodes/dark/status", data=json.dumps(endpoint),
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "one"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "dark"}}
    async with session.post(pods + "/one/binding", json=binding) as r:
        assert r.status == 201
    code, message = await refused("POST", "/one/exec?command=true")
    assert code == 503 and message.startswith("cannot reach the kubelet of pod default/one")
    assert await refused("GET", "/one/exec?command=true", headers={}) == (400, "Upgrade request required")

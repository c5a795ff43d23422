"""The `[sig-api-machinery]` conformance tests of namespaces, discovery, watches, list
chunking, tables, the server's version and the garbage collector mirrored (upstream's
test/e2e/apimachinery: namespace.go, discovery.go, watch.go, chunking.go,
table_conversion.go, server_version.go, garbage_collector.go), each named after its
testname, against a real apiserver and controller manager over REST, as upstream's
clientset drives them. No kubelet runs: pods are never bound, so they go at once when
deleted, as upstream's pods on a node do once their kubelet has stopped them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client
from tests.contract.test_crds import Rest
from tests.wait import until

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Rest]:
    manager = ControllerManager(Client(rest.address), ManagerConfig(leader_elect=False))
    await manager.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Rest(rest, session)
    finally:
        await manager.stop()


async def _ok(api: Rest, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    code, out, _ = await api.call(method, path, body, **kw)
    assert code < 300, f"{method} {path}: {code} {out}"
    return out


async def _namespace(api: Rest, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = await _ok(api, "POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    return out


async def _gone(api: Rest, path: str, timeout: float = 60) -> None:
    await until(lambda: api.call("GET", path), timeout=timeout, what=f"{path} gone", check=lambda r: r[0] == 404)


def _pod(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "nginx", "image": "pause"}]}}


# ---------------------------------------------------------------- namespaces


async def test_namespace_apply_finalizer_to_a_namespace(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should apply a finalizer to a Namespace."""
    ns = await _namespace(api, "e2e-ns-finalizer")
    ns["spec"]["finalizers"] = [*ns["spec"]["finalizers"], "e2e.example.com/fakeFinalizer"]
    updated = await _ok(api, "PUT", "/api/v1/namespaces/e2e-ns-finalizer/finalize", ns)
    assert "e2e.example.com/fakeFinalizer" in updated["spec"]["finalizers"], updated
    ns = await _ok(api, "GET", "/api/v1/namespaces/e2e-ns-finalizer")
    assert ns["spec"]["finalizers"] == ["kubernetes", "e2e.example.com/fakeFinalizer"]
    ns["spec"]["finalizers"] = ["kubernetes"]
    updated = await _ok(api, "PUT", "/api/v1/namespaces/e2e-ns-finalizer/finalize", ns)
    assert updated["spec"]["finalizers"] == ["kubernetes"]
    # a plain update never changes them (only /finalize does)
    ns = await _ok(api, "GET", "/api/v1/namespaces/e2e-ns-finalizer")
    ns["spec"]["finalizers"] = []
    assert (await _ok(api, "PUT", "/api/v1/namespaces/e2e-ns-finalizer", ns))["spec"]["finalizers"] == ["kubernetes"]


async def test_namespace_apply_update_to_a_namespace(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should apply an update to a Namespace."""
    ns = await _namespace(api, "e2e-ns-update")
    ns["metadata"]["labels"]["e2e-update-namespace"] = "updated"
    updated = await _ok(api, "PUT", "/api/v1/namespaces/e2e-ns-update", ns)
    assert updated["metadata"]["labels"]["e2e-update-namespace"] == "updated"


async def test_namespace_apply_changes_to_a_namespace_status(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should apply changes to a namespace status."""
    await _namespace(api, "e2e-ns-status")
    status = await _ok(api, "GET", "/api/v1/namespaces/e2e-ns-status/status")
    assert status["status"]["phase"] == "Active"
    patched = await _ok(api, "PATCH", "/api/v1/namespaces/e2e-ns-status/status", {"status": {"conditions": [
        {"type": "StatusPatch", "status": "True", "reason": "E2E", "message": "Patched by an e2e test"}]}},
        content_type=STRATEGIC)
    assert [c["type"] for c in patched["status"]["conditions"]] == ["StatusPatch"], patched
    patched["status"]["conditions"].append({"type": "StatusUpdate", "status": "True", "reason": "E2E",
                                            "message": "Updated by an e2e test"})
    updated = await _ok(api, "PUT", "/api/v1/namespaces/e2e-ns-status/status", patched)
    assert [(c["type"], c["message"]) for c in updated["status"]["conditions"]] == [
        ("StatusPatch", "Patched by an e2e test"), ("StatusUpdate", "Updated by an e2e test")]


async def test_namespace_deletion_removes_pods(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should ensure that all pods are removed when a namespace is deleted."""
    await _namespace(api, "nsdeletetest")
    await _ok(api, "POST", "/api/v1/namespaces/nsdeletetest/pods", _pod("test-pod"))
    await _ok(api, "DELETE", "/api/v1/namespaces/nsdeletetest")
    await _gone(api, "/api/v1/namespaces/nsdeletetest")
    await _namespace(api, "nsdeletetest")
    pods = await _ok(api, "GET", "/api/v1/namespaces/nsdeletetest/pods")
    assert pods["items"] == []


async def test_namespace_deletion_removes_services(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should ensure that all services are removed when a namespace is
    deleted."""
    await _namespace(api, "nsdeletetest")
    await _ok(api, "POST", "/api/v1/namespaces/nsdeletetest/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-service"},
        "spec": {"selector": {"foo": "bar", "baz": "blah"}, "ports": [{"port": 80, "targetPort": 80}]}})
    await _ok(api, "DELETE", "/api/v1/namespaces/nsdeletetest")
    await _gone(api, "/api/v1/namespaces/nsdeletetest")
    await _namespace(api, "nsdeletetest")
    services = await _ok(api, "GET", "/api/v1/namespaces/nsdeletetest/services")
    assert services["items"] == []


async def test_namespace_patching(api: Rest) -> None:
    """[sig-api-machinery] Namespaces [Serial] should patch a Namespace."""
    await _namespace(api, "nspatchtest")
    await _ok(api, "PATCH", "/api/v1/namespaces/nspatchtest", {"metadata": {"labels": {"testLabel": "testValue"}}},
              content_type=STRATEGIC)
    ns = await _ok(api, "GET", "/api/v1/namespaces/nspatchtest")
    assert ns["metadata"]["labels"]["testLabel"] == "testValue"


async def test_namespace_deletion_conditions_and_terminating_refusal(api: Rest) -> None:
    """Beyond the list: a namespace held by a finalizer on its content says so in its
    conditions (upstream's namespace controller's), and refuses new content with upstream's
    message and cause; both go once the finalizer is removed."""
    await _namespace(api, "held")
    await _ok(api, "POST", "/api/v1/namespaces/held/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "finalizers": ["example.com/hold"]}})
    await _ok(api, "DELETE", "/api/v1/namespaces/held")

    def conditions(reply: tuple[int, Any, Any]) -> dict[str, Any]:
        return {c["type"]: c for c in (reply[1].get("status") or {}).get("conditions", [])}

    only_the_held = "Some resources are remaining: configmaps has 1 resource instances"

    # The ServiceAccounts controller may make `default` again between the namespace's
    # deletion and its own next look (it saw the namespace not yet terminating); one pass
    # of the namespace controller then counts it too, and the next deletes it.
    reply = await until(lambda: api.call("GET", "/api/v1/namespaces/held"), timeout=30, what="conditions",
                        check=lambda r: conditions(r).get("NamespaceFinalizersRemaining", {}).get("status") == "True"
                        and conditions(r)["NamespaceContentRemaining"].get("message") == only_the_held)
    found = conditions(reply)
    assert reply[1]["status"]["phase"] == "Terminating"
    assert found["NamespaceFinalizersRemaining"]["message"] == "Some content in the namespace has finalizers " \
                                                               "remaining: example.com/hold in 1 resource instances"
    assert found["NamespaceDeletionDiscoveryFailure"]["status"] == "False"
    code, status, _ = await api.call("POST", "/api/v1/namespaces/held/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})
    assert code == 403 and status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'configmaps "late" is forbidden: unable to create new content in namespace held because it '
                   "is being terminated",
        "reason": "Forbidden", "details": {"name": "late", "kind": "configmaps", "causes": [{
            "reason": "NamespaceTerminating", "message": "namespace held is being terminated",
            "field": "metadata.namespace"}]}, "code": 403}, status
    await _ok(api, "PATCH", "/api/v1/namespaces/held/configmaps/kept", {"metadata": {"finalizers": None}},
              content_type=MERGE)
    await _gone(api, "/api/v1/namespaces/held")


# ---------------------------------------------------------------- discovery, version, tables


async def test_discovery_confirm_the_preferredversion_for_each_api_group(api: Rest) -> None:
    """[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup."""
    groups = (await _ok(api, "GET", "/apis"))["groups"]
    assert groups
    for group in groups:
        versions = [v["groupVersion"] for v in group["versions"]]
        assert group["preferredVersion"]["groupVersion"] in versions, group
        alone = await _ok(api, "GET", f"/apis/{group['name']}")
        assert alone["preferredVersion"] == group["preferredVersion"], alone


async def test_discovery_confirm_the_groupversion_and_a_resource_from_each_apigroup(api: Rest) -> None:
    """[sig-api-machinery] Discovery should locate the groupVersion and a resource within each APIGroup."""
    for group in (await _ok(api, "GET", "/apis"))["groups"]:
        for version in group["versions"]:
            listed = await _ok(api, "GET", f"/apis/{version['groupVersion']}")
            assert listed["groupVersion"] == version["groupVersion"]
            assert listed["resources"], listed
    core = await _ok(api, "GET", "/api/v1")
    assert core["groupVersion"] == "v1" and any(r["name"] == "resourcequotas" for r in core["resources"])


async def test_confirm_a_server_version(api: Rest) -> None:
    """[sig-api-machinery] server version should find the server version."""
    version = await _ok(api, "GET", "/version")
    assert re.fullmatch(r"\d+", version["major"]) and re.fullmatch(r"\d+", version["minor"].rstrip("+")), version
    assert version["gitVersion"].startswith(f"v{version['major']}.")


async def test_api_metadata_http_return(api: Rest) -> None:
    """[sig-api-machinery] Servers with support for Table transformation should return a 406 for a backend which
    does not implement metadata."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}
    async with api.session.post(f"{api.base}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                data=json.dumps(body), headers={
                                    "Content-Type": "application/json",
                                    "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}) as resp:
        status = await resp.json()
        assert resp.status == 406 and status["reason"] == "NotAcceptable" and status["code"] == 406, status


# ---------------------------------------------------------------- watches


class _Watch:
    """A REST watch's events, as upstream's watch.Interface hands them."""

    def __init__(self, api: Rest, path: str, **query: str) -> None:
        self.api, self.path, self.query = api, path, {"watch": "1", **query}
        self.response: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> _Watch:
        self.response = await self.api.session.get(self.api.base + self.path, params=self.query)
        assert self.response.status == 200, await self.response.text()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.response is not None
        self.response.close()

    async def next(self, timeout: float = 10) -> tuple[str, dict[str, Any]]:
        assert self.response is not None
        while True:
            line = await asyncio.wait_for(self.response.content.readline(), timeout)
            if not line:
                raise AssertionError("the watch ended")
            event = json.loads(line)
            if event["type"] != "BOOKMARK":
                return event["type"], event["object"]

    async def nothing(self, within: float = 0.5) -> None:
        """No event comes (what a watcher must not see)."""
        with pytest.raises(TimeoutError):
            await self.next(within)


_CM = "/api/v1/namespaces/default/configmaps"


def _configmap(name: str, labels: dict[str, str], **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data}


async def _mutate(api: Rest, name: str, mutation: int) -> dict[str, Any]:
    out: dict[str, Any] = await _ok(api, "PATCH", f"{_CM}/{name}", {"data": {"mutation": str(mutation)}},
                                    content_type=MERGE)
    return out


async def test_watch_configmaps_with_multiple_watchers(api: Rest) -> None:
    """[sig-api-machinery] Watchers should observe add, update, and delete watch notifications on configmaps."""
    label = "watch-this-configmap"
    async with _Watch(api, _CM, labelSelector=f"{label}=multiple-watchers-A") as watch_a, \
            _Watch(api, _CM, labelSelector=f"{label}=multiple-watchers-B") as watch_b, \
            _Watch(api, _CM, labelSelector=f"{label} in (multiple-watchers-A,multiple-watchers-B)") as watch_ab:
        await _ok(api, "POST", _CM, _configmap("e2e-watch-test-configmap-a", {label: "multiple-watchers-A"}))
        for w in (watch_a, watch_ab):
            assert (await w.next())[0] == "ADDED"
        await watch_b.nothing()
        for mutation in (1, 2):
            await _mutate(api, "e2e-watch-test-configmap-a", mutation)
            for w in (watch_a, watch_ab):
                kind, obj = await w.next()
                assert kind == "MODIFIED" and obj["data"]["mutation"] == str(mutation)
        await _ok(api, "DELETE", f"{_CM}/e2e-watch-test-configmap-a")
        for w in (watch_a, watch_ab):
            assert (await w.next())[0] == "DELETED"
        await _ok(api, "POST", _CM, _configmap("e2e-watch-test-configmap-b", {label: "multiple-watchers-B"}))
        for w in (watch_b, watch_ab):
            assert (await w.next())[0] == "ADDED"
        await watch_a.nothing()
        await _ok(api, "DELETE", f"{_CM}/e2e-watch-test-configmap-b")
        for w in (watch_b, watch_ab):
            assert (await w.next())[0] == "DELETED"


async def test_watch_configmaps_from_resource_version(api: Rest) -> None:
    """[sig-api-machinery] Watchers should be able to start watching from a specific resource version."""
    labels = {"watch-this-configmap": "from-resource-version"}
    await _ok(api, "POST", _CM, _configmap("e2e-watch-test-resource-version", labels))
    first = await _mutate(api, "e2e-watch-test-resource-version", 1)
    await _mutate(api, "e2e-watch-test-resource-version", 2)
    await _ok(api, "DELETE", f"{_CM}/e2e-watch-test-resource-version")
    async with _Watch(api, _CM, labelSelector="watch-this-configmap=from-resource-version",
                      resourceVersion=first["metadata"]["resourceVersion"]) as watch:
        kind, obj = await watch.next()
        assert kind == "MODIFIED" and obj["data"]["mutation"] == "2"
        kind, obj = await watch.next()
        assert kind == "DELETED" and obj["data"]["mutation"] == "2"


async def test_watch_configmaps_closed_and_restarted(api: Rest) -> None:
    """[sig-api-machinery] Watchers should be able to restart watching from the last resource version observed by
    the previous watch."""
    selector = "watch-this-configmap=watch-closed-and-restarted"
    async with _Watch(api, _CM, labelSelector=selector) as watch:
        await _ok(api, "POST", _CM, _configmap("e2e-watch-test-watch-closed",
                                               {"watch-this-configmap": "watch-closed-and-restarted"}))
        await _mutate(api, "e2e-watch-test-watch-closed", 1)
        assert (await watch.next())[0] == "ADDED"
        kind, last = await watch.next()
        assert kind == "MODIFIED"
    await _mutate(api, "e2e-watch-test-watch-closed", 2)  # while no watch is open
    await _ok(api, "DELETE", f"{_CM}/e2e-watch-test-watch-closed")
    async with _Watch(api, _CM, labelSelector=selector, resourceVersion=last["metadata"]["resourceVersion"]) as watch:
        kind, obj = await watch.next()
        assert kind == "MODIFIED" and obj["data"]["mutation"] == "2"
        assert (await watch.next())[0] == "DELETED"


async def test_watch_configmaps_label_changed(api: Rest) -> None:
    """[sig-api-machinery] Watchers should observe an object deletion if it stops meeting the requirements of the
    selector."""
    name = "e2e-watch-test-label-changed"
    async with _Watch(api, _CM, labelSelector="watch-this-configmap=label-changed-and-restored") as watch:
        await _ok(api, "POST", _CM, _configmap(name, {"watch-this-configmap": "label-changed-and-restored"}))
        await _mutate(api, name, 1)
        assert (await watch.next())[0] == "ADDED"
        assert (await watch.next())[0] == "MODIFIED"
        await _ok(api, "PATCH", f"{_CM}/{name}", {"metadata": {"labels": {"watch-this-configmap": "wrong-value"}}},
                  content_type=MERGE)
        assert (await watch.next())[0] == "DELETED"
        await _mutate(api, name, 2)  # not seen: out of the selector
        await watch.nothing()
        await _ok(api, "PATCH", f"{_CM}/{name}",
                  {"metadata": {"labels": {"watch-this-configmap": "label-changed-and-restored"}}},
                  content_type=MERGE)
        kind, obj = await watch.next()
        assert kind == "ADDED" and obj["data"]["mutation"] == "2"
        await _mutate(api, name, 3)
        kind, obj = await watch.next()
        assert kind == "MODIFIED" and obj["data"]["mutation"] == "3"
        await _ok(api, "DELETE", f"{_CM}/{name}")
        assert (await watch.next())[0] == "DELETED"


async def test_watch_consistency(api: Rest) -> None:
    """[sig-api-machinery] Watchers should receive events on concurrent watches in same order."""
    start = (await _ok(api, "GET", _CM))["metadata"]["resourceVersion"]
    writes = 50

    async def produce() -> None:
        for i in range(writes):
            name = f"e2e-watch-test-{i % 5}"
            code, _, _ = await api.call("POST", _CM, _configmap(name, {"watch": "consistency"}))
            if code == 409:
                await _ok(api, "DELETE", f"{_CM}/{name}")

    producer = asyncio.create_task(produce())
    seen: list[str] = []
    watches: list[tuple[_Watch, int]] = []
    try:
        async with _Watch(api, _CM, resourceVersion=start, labelSelector="watch=consistency") as first:
            while len(seen) < writes:
                _, obj = await first.next()
                seen.append(obj["metadata"]["resourceVersion"])
                if len(seen) % 10 == 1:  # a watch from each tenth event's version
                    w = _Watch(api, _CM, resourceVersion=seen[-1], labelSelector="watch=consistency")
                    watches.append((await w.__aenter__(), len(seen)))
            for w, after in watches:
                for expected in seen[after:]:
                    _, obj = await w.next()
                    assert obj["metadata"]["resourceVersion"] == expected
    finally:
        await producer
        for w, _ in watches:
            await w.__aexit__()


# ---------------------------------------------------------------- chunking


_TEMPLATES = "/api/v1/namespaces/default/podtemplates"


async def _templates(api: Rest, count: int) -> None:
    sem = asyncio.Semaphore(16)

    async def make(i: int) -> None:
        async with sem:
            await _ok(api, "POST", _TEMPLATES, {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {
                "name": f"template-{i:04d}"}, "template": {"spec": {"containers": [
                    {"name": "test", "image": "busybox"}]}}})

    await asyncio.gather(*(make(i) for i in range(count)))


async def test_api_chunking_return_chunks_of_results_for_list_calls(api: Rest) -> None:
    """[sig-api-machinery] Servers with support for API chunking should return chunks of results for list calls."""
    total, limit = 400, 17
    await _templates(api, total)
    found, token, version = 0, "", ""
    while True:
        query = {"limit": str(limit), **({"continue": token} if token else {})}
        page = await _ok(api, "GET", _TEMPLATES, query=query)
        items, meta = page["items"], page["metadata"]
        assert len(items) <= limit
        found += len(items)
        version = version or meta["resourceVersion"]
        assert meta["resourceVersion"] == version  # every page at the first one's version
        token = meta.get("continue", "")
        if not token:
            assert "remainingItemCount" not in meta
            break
        assert len(items) == limit and meta["remainingItemCount"] == total - found, meta
    assert found == total
    assert len((await _ok(api, "GET", _TEMPLATES))["items"]) == total


async def test_api_chunking_continue_listing_from_the_last_key_even_if_the_original_version_has_been_compacted_away(
        api: Rest, rest: APIServer) -> None:
    """[sig-api-machinery] Servers with support for API chunking should support continue listing from the last key
    if the original version has been compacted away, though the list is inconsistent [Slow]."""
    total, limit = 200, 40
    await _templates(api, total)
    first = await _ok(api, "GET", _TEMPLATES, query={"limit": str(limit)})
    token = first["metadata"]["continue"]
    # writes after the first page, then the compaction the test waits for upstream
    await _ok(api, "DELETE", f"{_TEMPLATES}/template-0199")
    written = await _ok(api, "POST", _TEMPLATES, {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {
        "name": "template-9999"}, "template": {"spec": {"containers": [{"name": "test", "image": "busybox"}]}}})
    assert rest._storage is not None
    await rest._storage.compact(int(written["metadata"]["resourceVersion"]))
    code, status, _ = await api.call("GET", _TEMPLATES, query={"limit": str(limit), "continue": token})
    assert code == 410 and status["reason"] == "Expired", status
    assert "Continuing with the provided token results in an inconsistent list" in status["message"]
    inconsistent = status["metadata"]["continue"]
    page = await _ok(api, "GET", _TEMPLATES, query={"limit": str(limit), "continue": inconsistent})
    assert len(page["items"]) == limit and page["items"][0]["metadata"]["name"] == "template-0040"
    assert int(page["metadata"]["resourceVersion"]) >= int(written["metadata"]["resourceVersion"])
    version, found = page["metadata"]["resourceVersion"], limit + len(page["items"])
    assert page["metadata"]["remainingItemCount"] == total - found  # one gone, one more: the same count
    token = page["metadata"]["continue"]
    while token:
        page = await _ok(api, "GET", _TEMPLATES, query={"limit": str(limit), "continue": token})
        assert page["metadata"]["resourceVersion"] == version
        found += len(page["items"])
        token = page["metadata"].get("continue", "")
    assert found == total


# ---------------------------------------------------------------- the garbage collector


_RC = "/api/v1/namespaces/default/replicationcontrollers"
_PODS = "/api/v1/namespaces/default/pods"
_DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
_REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"


def _rc(name: str, replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": labels, "template": {"metadata": {"labels": labels}, "spec": {
            "terminationGracePeriodSeconds": 0, "containers": [{"name": "nginx", "image": "nginx"}]}}}}


def _deployment(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {
        "replicas": 2, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "containers": [{"name": "nginx", "image": "nginx"}]}}}}


async def _count(api: Rest, path: str, selector: str) -> int:
    return len((await _ok(api, "GET", path, query={"labelSelector": selector}))["items"])


async def _until_count(api: Rest, path: str, selector: str, wanted: int, timeout: float = 30) -> None:
    await until(lambda: _count(api, path, selector), timeout=timeout, what=f"{wanted} of {path}?{selector}",
                check=lambda n: n == wanted)


async def _delete_with(api: Rest, path: str, policy: str) -> None:
    await _ok(api, "DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})


async def test_garbage_collector_delete_deployment_propagation_policy_background(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should delete RS created by deployment when not orphaning."""
    await _ok(api, "POST", _DEPLOYMENTS, _deployment("simpletest.deployment", {"app": "gc-test"}))
    await _until_count(api, _REPLICASETS, "app=gc-test", 1)
    await _until_count(api, _PODS, "app=gc-test", 2)
    await _delete_with(api, f"{_DEPLOYMENTS}/simpletest.deployment", "Background")
    await _until_count(api, _REPLICASETS, "app=gc-test", 0)
    await _until_count(api, _PODS, "app=gc-test", 0)


async def test_garbage_collector_delete_replication_controller_propagation_policy_background(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should delete pods created by rc when not orphaning."""
    await _ok(api, "POST", _RC, _rc("simpletest.rc", 2, {"app": "gc-test"}))
    await _until_count(api, _PODS, "app=gc-test", 2)
    await _delete_with(api, f"{_RC}/simpletest.rc", "Background")
    await _until_count(api, _PODS, "app=gc-test", 0)


async def test_garbage_collector_delete_replication_controller_after_owned_pods(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should keep the rc around until all its pods are deleted if the
    deleteOptions says so."""
    await _ok(api, "POST", _PODS, {**_pod("holder", labels={"app": "gc-test"})})
    await _ok(api, "POST", _RC, _rc("simpletest.rc", 10, {"app": "gc-test"}))

    # Settled: ten pods, every one the RC's (the holder adopted, or created past and the
    # surplus deleted — which may be the holder: a CI run picked it while it went).
    async def owned_pods() -> list[dict[str, Any]]:
        items = (await _ok(api, "GET", _PODS, query={"labelSelector": "app=gc-test"}))["items"]
        return [p for p in items if p["metadata"].get("ownerReferences") and
                "deletionTimestamp" not in p["metadata"]] if len(items) == 10 else []
    held = await until(owned_pods, what="ten pods the RC owns", timeout=30, check=lambda ps: len(ps) == 10)
    # a pod the RC owns that a finalizer holds: the RC must wait for it
    rc = await _ok(api, "GET", f"{_RC}/simpletest.rc")
    owned = held[0]
    await _ok(api, "PATCH", f"{_PODS}/{owned['metadata']['name']}", {"metadata": {"finalizers": ["example.com/x"]}},
              content_type=MERGE)
    await _delete_with(api, f"{_RC}/simpletest.rc", "Foreground")
    deleting = await _ok(api, "GET", f"{_RC}/simpletest.rc")
    assert deleting["metadata"]["uid"] == rc["metadata"]["uid"] and "deletionTimestamp" in deleting["metadata"]
    assert "foregroundDeletion" in deleting["metadata"]["finalizers"]
    await until(lambda: _count(api, _PODS, "app=gc-test"), timeout=30, what="all but the held pod gone",
                check=lambda n: n == 1)
    assert (await api.call("GET", f"{_RC}/simpletest.rc"))[0] == 200  # still there: a pod remains
    await _ok(api, "PATCH", f"{_PODS}/{owned['metadata']['name']}", {"metadata": {"finalizers": None}},
              content_type=MERGE)
    await _gone(api, f"{_RC}/simpletest.rc")
    await _until_count(api, _PODS, "app=gc-test", 0)


async def test_garbage_collector_dependency_cycle(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should not be blocked by dependency circle."""
    pods = [await _ok(api, "POST", _PODS, _pod(f"pod{i}", labels={"gc": "cycle"})) for i in (1, 2, 3)]

    def ref(pod: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"],
                "controller": True, "blockOwnerDeletion": True}

    for dependent, owner in ((0, 2), (1, 0), (2, 1)):  # pod1 <- pod3, pod2 <- pod1, pod3 <- pod2
        await _ok(api, "PATCH", f"{_PODS}/pod{dependent + 1}",
                  {"metadata": {"ownerReferences": [ref(pods[owner])]}}, content_type=MERGE)
    await _ok(api, "DELETE", f"{_PODS}/pod1")
    await _until_count(api, _PODS, "gc=cycle", 0)


async def test_garbage_collector_multiple_owners(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should not delete dependents that have both valid owner and owner
    that's waiting for dependents to be deleted."""
    await _ok(api, "POST", _RC, _rc("simpletest-rc-to-be-deleted", 10, {"app": "gc-test"}))
    stays = await _ok(api, "POST", _RC, _rc("simpletest-rc-to-stay", 0, {"app": "gc-test-stays"}))
    await _until_count(api, _PODS, "app=gc-test", 10)
    pods = (await _ok(api, "GET", _PODS, query={"labelSelector": "app=gc-test"}))["items"]
    for pod in pods[:5]:
        refs = [*pod["metadata"]["ownerReferences"], {
            "apiVersion": "v1", "kind": "ReplicationController", "name": "simpletest-rc-to-stay",
            "uid": stays["metadata"]["uid"]}]
        await _ok(api, "PATCH", f"{_PODS}/{pod['metadata']['name']}", {"metadata": {"ownerReferences": refs}},
                  content_type=MERGE)
    await _delete_with(api, f"{_RC}/simpletest-rc-to-be-deleted", "Foreground")
    await _gone(api, f"{_RC}/simpletest-rc-to-be-deleted")
    left = (await _ok(api, "GET", _PODS, query={"labelSelector": "app=gc-test"}))["items"]
    assert sorted(p["metadata"]["name"] for p in left) == sorted(p["metadata"]["name"] for p in pods[:5])
    for pod in left:
        assert "deletionTimestamp" not in pod["metadata"]
        assert [r["name"] for r in pod["metadata"]["ownerReferences"]] == ["simpletest-rc-to-stay"]


async def test_garbage_collector_delete_deployment_propagation_policy_orphan(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should orphan RS created by deployment when
    deleteOptions.PropagationPolicy is Orphan."""
    await _ok(api, "POST", _DEPLOYMENTS, _deployment("simpletest.deployment", {"app": "gc-test"}))
    await _until_count(api, _REPLICASETS, "app=gc-test", 1)
    await _delete_with(api, f"{_DEPLOYMENTS}/simpletest.deployment", "Orphan")
    await _gone(api, f"{_DEPLOYMENTS}/simpletest.deployment")
    replicasets = (await _ok(api, "GET", _REPLICASETS, query={"labelSelector": "app=gc-test"}))["items"]
    assert len(replicasets) == 1 and not replicasets[0]["metadata"].get("ownerReferences")
    await _until_count(api, _PODS, "app=gc-test", 2)


async def test_garbage_collector_delete_replication_controller_propagation_policy_orphan(api: Rest) -> None:
    """[sig-api-machinery] Garbage collector should orphan pods created by rc if delete options say so."""
    await _ok(api, "POST", _RC, _rc("simpletest.rc", 10, {"app": "gc-test"}))
    await _until_count(api, _PODS, "app=gc-test", 10)
    await _delete_with(api, f"{_RC}/simpletest.rc", "Orphan")
    await _gone(api, f"{_RC}/simpletest.rc")
    pods = (await _ok(api, "GET", _PODS, query={"labelSelector": "app=gc-test"}))["items"]
    assert len(pods) == 10 and not any(p["metadata"].get("ownerReferences") for p in pods)


async def test_status_bodies_as_upstream_writes_them(api: Rest) -> None:
    """Beyond the list: errors byte for byte as upstream's — field order, group-qualified
    resources, details with group and kind, typed causes, one field error unbracketed."""
    body = _deployment("web", {"app": "web"})
    await _ok(api, "POST", _DEPLOYMENTS, body)
    async with api.session.post(api.base + _DEPLOYMENTS, data=json.dumps(body),
                                headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 409
        assert await resp.text() == (
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"deployments.apps \\"web\\" already exists","reason":"AlreadyExists",'
            '"details":{"name":"web","group":"apps","kind":"deployments"},"code":409}')
    code, status, _ = await api.call("GET", f"{_DEPLOYMENTS}/nope")
    assert code == 404 and status["message"] == 'deployments.apps "nope" not found'
    assert status["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}
    bad = _deployment("bad", {"app": "bad"})
    bad["spec"]["replicas"] = -1
    code, status, _ = await api.call("POST", _DEPLOYMENTS, bad)
    assert code == 422 and status["message"] == ('Deployment.apps "bad" is invalid: spec.replicas: Invalid value: -1: '
                                                 "must be greater than or equal to 0"), status
    assert status["details"] == {"name": "bad", "group": "apps", "kind": "Deployment", "causes": [{
        "reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0",
        "field": "spec.replicas"}]}
    assert list(status) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]

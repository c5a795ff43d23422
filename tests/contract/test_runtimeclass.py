"""RuntimeClasses (node.k8s.io/v1) against the API: the resource's operations and the
RuntimeClass admission plugin, over REST on a real etcd. Names follow upstream's
conformance tests ([sig-node] RuntimeClass); those that need a pod scheduled and run are
tests/e2e/test_runtimeclass.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from tests.contract.test_admission_webhooks import in_force
from tests.contract.test_crds import Rest
from tests.wait import until

RCS = "/apis/node.k8s.io/v1/runtimeclasses"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


def _class(name: str, handler: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name, "labels": {
        "test": "rc"}}, "handler": handler, **extra}


def _pod(name: str, runtime_class: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"runtimeClassName": runtime_class, "containers": [{"name": "c", "image": "busybox"}]}}


async def test_runtimeclass_api(http: Rest) -> None:
    """RuntimeClass API ([sig-node] RuntimeClass should support RuntimeClasses API operations)."""
    code, groups, _ = await http.call("GET", "/apis/node.k8s.io")
    assert code == 200 and "v1" in [v["version"] for v in groups["versions"]]
    code, listing, _ = await http.call("GET", "/apis/node.k8s.io/v1")
    assert "runtimeclasses" in [r["name"] for r in listing["resources"]]
    code, made, _ = await http.call("POST", RCS, _class("rc-1", "handler-1"))
    assert code == 201, made
    code, body, _ = await http.call("POST", RCS, _class("rc-1", "handler-1"))
    assert code == 409 and body["reason"] == "AlreadyExists"
    code, _, _ = await http.call("POST", RCS, _class("rc-2", "handler-2"))
    async with http.session.get(http.base + RCS, params={"watch": "1", "labelSelector": "test=rc"},
                                timeout=aiohttp.ClientTimeout(total=20)) as watch:
        code, _, _ = await http.call("POST", RCS, _class("rc-3", "handler-3"))
        code, got, _ = await http.call("GET", f"{RCS}/rc-1")
        assert got["metadata"]["uid"] == made["metadata"]["uid"]
        code, listed, _ = await http.call("GET", RCS, query={"labelSelector": "test=rc"})
        assert len(listed["items"]) == 3
        code, patched, _ = await http.call("PATCH", f"{RCS}/rc-1", {"metadata": {"annotations": {"patched": "true"}}},
                                           content_type="application/merge-patch+json")
        assert code == 200 and patched["metadata"]["annotations"] == {"patched": "true"}
        patched["metadata"]["annotations"]["updated"] = "true"
        code, updated, _ = await http.call("PUT", f"{RCS}/rc-1", patched)
        assert code == 200 and updated["metadata"]["annotations"]["updated"] == "true"
        seen: set[str] = set()
        while not {"ADDED", "MODIFIED"} <= seen:
            seen.add(json.loads(await watch.content.readline())["type"])
    code, body, _ = await http.call("PUT", f"{RCS}/rc-1", {**updated, "handler": "other"})
    assert code == 422 and body["details"]["causes"][0]["message"] == 'Invalid value: "other": field is immutable'
    code, _, _ = await http.call("DELETE", f"{RCS}/rc-1")
    assert (await http.call("GET", f"{RCS}/rc-1"))[0] == 404
    code, listed, _ = await http.call("GET", RCS, query={"labelSelector": "test=rc"})
    assert len(listed["items"]) == 2
    await http.call("DELETE", RCS, query={"labelSelector": "test=rc"})
    code, listed, _ = await http.call("GET", RCS, query={"labelSelector": "test=rc"})
    assert listed["items"] == []


async def test_pod_with_the_non_existing_runtimeclass_is_rejected(http: Rest) -> None:
    """Pod with the non-existing RuntimeClass is rejected ([sig-node] RuntimeClass should
    reject a Pod requesting a non-existent RuntimeClass)."""
    code, body, _ = await http.call("POST", PODS, _pod("p", "nonexistent"))
    assert code == 403 and body["message"] == 'pods "p" is forbidden: pod rejected: RuntimeClass "nonexistent" ' \
                                              "not found", body


async def test_pod_with_the_deleted_runtimeclass_is_rejected(http: Rest) -> None:
    """Pod with the deleted RuntimeClass is rejected ([sig-node] RuntimeClass should reject a
    Pod requesting a deleted RuntimeClass)."""
    code, made, _ = await http.call("POST", RCS, _class("delete-me", "runc"))
    assert code == 201
    code, _, _ = await http.call("DELETE", f"{RCS}/delete-me")
    assert (await http.call("GET", f"{RCS}/delete-me"))[0] == 404

    async def refused() -> bool:  # once the apiserver's cache has seen the delete, as upstream's informer
        code, _, _ = await http.call("POST", PODS, _pod("p", "delete-me"), query={"dryRun": "All"})
        return code == 403
    await until(refused, timeout=10, what="the deleted class refused")


async def test_runtimeclass_admission_overhead_and_scheduling(http: Rest) -> None:
    """The admission plugin: the class's overhead set (another refused, one without a class
    refused), its node selector merged (a conflict refused) and tolerations added."""
    code, fast, _ = await http.call("POST", RCS, _class(
        "fast", "runc", overhead={"podFixed": {"cpu": "10m", "memory": "1Mi"}},
        scheduling={"nodeSelector": {"runtime": "fast"}, "tolerations": [{"key": "runtime", "operator": "Exists"}]}))
    await in_force(http, RCS, fast)  # admission reads classes from the apiserver's cache
    code, made, _ = await http.call("POST", PODS, _pod("ok", "fast"))
    assert code == 201, made
    spec = made["spec"]
    assert spec["overhead"] == {"cpu": "10m", "memory": "1Mi"} and spec["nodeSelector"] == {"runtime": "fast"}
    assert {"key": "runtime", "operator": "Exists"} in spec["tolerations"]
    other = _pod("other", "fast")
    other["spec"]["overhead"] = {"cpu": "1"}
    code, body, _ = await http.call("POST", PODS, other)
    assert code == 403 and body["message"].endswith("pod rejected: Pod's Overhead doesn't match RuntimeClass's "
                                                    "defined Overhead"), body
    conflict = _pod("conflict", "fast")
    conflict["spec"]["nodeSelector"] = {"runtime": "slow"}
    code, body, _ = await http.call("POST", PODS, conflict)
    assert code == 403 and "conflict: runtimeClass.scheduling.nodeSelector[runtime] = fast; " \
                           "pod.spec.nodeSelector[runtime] = slow" in body["message"], body
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
            "spec": {"overhead": {"cpu": "1"}, "containers": [{"name": "c", "image": "busybox"}]}}
    code, body, _ = await http.call("POST", PODS, bare)
    assert code == 403 and body["message"].endswith("pod rejected: Pod Overhead set without corresponding "
                                                    "RuntimeClass defined Overhead"), body

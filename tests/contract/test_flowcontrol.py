"""API Priority and Fairness against a real apiserver: the two `[sig-api-machinery] API
priority and fairness` conformance tests (upstream's test/e2e/apimachinery/flowcontrol.go)
mirrored, the bootstrap configuration, classification as the response headers tell it, and
a level that rejects: 429 with Retry-After for its flow while everyone else is served.
Who asks is told apart by impersonation (the test's apiserver authorizes everything)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from tests.conftest import apiserver_config
from tests.contract.test_crds import Rest
from tests.wait import until

GV = "/apis/flowcontrol.apiserver.k8s.io/v1"
MERGE = "application/merge-patch+json"


async def _ok(api: Rest, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    code, out, _ = await api.call(method, path, body, **kw)
    assert code < 300, f"{method} {path}: {code} {out}"
    return out


async def _api_operations(api: Rest, plural: str, kind: str, spec: dict[str, Any]) -> None:
    """What both conformance tests do with their kind: discovery, then every verb."""
    groups = (await _ok(api, "GET", "/apis"))["groups"]
    assert any(g["name"] == "flowcontrol.apiserver.k8s.io" and
               any(v["groupVersion"] == "flowcontrol.apiserver.k8s.io/v1" for v in g["versions"]) for g in groups)
    resources = {r["name"]: r for r in (await _ok(api, "GET", GV))["resources"]}
    assert plural in resources and f"{plural}/status" in resources
    assert set(resources[plural]["verbs"]) >= {"create", "delete", "deletecollection", "get", "list", "patch",
                                               "update", "watch"}
    path = f"{GV}/{plural}"
    for i in (1, 2, 3):
        await _ok(api, "POST", path, {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": kind, "metadata": {
            "name": f"e2e-example-{i}", "labels": {"e2e": "set"}}, "spec": spec})
    got = await _ok(api, "GET", f"{path}/e2e-example-1")
    assert got["spec"]["priorityLevelConfiguration" if kind == "FlowSchema" else "type"]
    listed = await _ok(api, "GET", path, query={"labelSelector": "e2e=set"})
    assert len(listed["items"]) == 3
    async with api.session.get(api.base + path, params={
            "watch": "1", "labelSelector": "e2e=set", "resourceVersion": listed["metadata"]["resourceVersion"]}) as w:
        patched = await _ok(api, "PATCH", f"{path}/e2e-example-1", {"metadata": {"annotations": {"patched": "true"}}},
                            content_type=MERGE)
        assert patched["metadata"]["annotations"]["patched"] == "true"
        event = await asyncio.wait_for(w.content.readline(), 10)
        assert b'"MODIFIED"' in event and b'"patched"' in event
    patched["metadata"]["annotations"]["updated"] = "true"
    updated = await _ok(api, "PUT", f"{path}/e2e-example-1", patched)
    assert updated["metadata"]["annotations"]["updated"] == "true"
    status = await _ok(api, "GET", f"{path}/e2e-example-1/status")
    condition = {"type": "StatusPatched", "status": "True", "reason": "E2E", "message": "Set from an e2e test"}
    patched = await _ok(api, "PATCH", f"{path}/e2e-example-1/status", {"status": {"conditions": [condition]}},
                        content_type=MERGE)
    assert patched["status"]["conditions"][0]["type"] == "StatusPatched"
    status = patched
    status["status"]["conditions"][0]["type"] = "StatusUpdated"
    updated = await _ok(api, "PUT", f"{path}/e2e-example-1/status", status)
    assert updated["status"]["conditions"][0]["type"] == "StatusUpdated"
    await _ok(api, "DELETE", f"{path}/e2e-example-1")
    await _ok(api, "DELETE", path, query={"labelSelector": "e2e=set"})
    assert (await _ok(api, "GET", path, query={"labelSelector": "e2e=set"}))["items"] == []


async def test_priority_and_fairness_flowschema_api(http: Rest) -> None:
    """[sig-api-machinery] API priority and fairness should support FlowSchema API operations."""
    await _api_operations(http, "flowschemas", "FlowSchema", {
        "priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 5000,
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "e2e"}}], "nonResourceRules": [
            {"verbs": ["get"], "nonResourceURLs": ["/e2e"]}]}]})


async def test_priority_and_fairness_prioritylevelconfiguration_api(http: Rest) -> None:
    """[sig-api-machinery] API priority and fairness should support PriorityLevelConfiguration API operations."""
    await _api_operations(http, "prioritylevelconfigurations", "PriorityLevelConfiguration", {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 2, "limitResponse": {"type": "Reject"}}})


async def test_bootstrap_configuration_defaults_and_validation(http: Rest) -> None:
    levels = {o["metadata"]["name"]: o for o in (await _ok(http, "GET", f"{GV}/prioritylevelconfigurations"))["items"]}
    assert {"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high", "workload-low",
            "global-default"} <= set(levels)
    assert levels["catch-all"]["spec"]["limited"]["limitResponse"] == {"type": "Reject"}
    schemas = {o["metadata"]["name"]: o for o in (await _ok(http, "GET", f"{GV}/flowschemas"))["items"]}
    assert schemas["exempt"]["spec"]["matchingPrecedence"] == 1
    assert schemas["system-node-high"]["spec"]["priorityLevelConfiguration"] == {"name": "node-high"}
    # defaults: a Queue level's queuing, a schema's precedence
    made = await _ok(http, "POST", f"{GV}/prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "queued"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}})
    assert made["spec"]["limited"] == {"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {
        "type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}
    code, status, _ = await http.call("POST", f"{GV}/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "bad"},
        "spec": {"matchingPrecedence": 1, "distinguisherMethod": {"type": "ByColour"}, "rules": [
            {"subjects": [], "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}})
    assert code == 422, status
    message = status["message"]
    assert "spec.priorityLevelConfiguration.name: Required value" in message
    assert "only the schema named 'exempt' may have matchingPrecedence 1" in message
    assert 'spec.distinguisherMethod.type: Unsupported value: "ByColour"' in message
    assert "spec.rules[0].subjects: Required value" in message
    assert "resource rules that are not cluster scoped must supply at least one namespace" in message
    # a schema says whether the level it names exists
    await _ok(http, "POST", f"{GV}/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "lost"},
        "spec": {"priorityLevelConfiguration": {"name": "nowhere"}, "rules": [{
            "subjects": [{"kind": "User", "user": {"name": "x"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}]}})

    def dangling(reply: tuple[int, Any, Any]) -> dict[str, Any]:
        return next((c for c in (reply[1].get("status") or {}).get("conditions", []) if c["type"] == "Dangling"), {})

    reply = await until(lambda: http.call("GET", f"{GV}/flowschemas/lost"), timeout=20, what="Dangling",
                        check=lambda r: dangling(r).get("status") == "True")
    assert dangling(reply)["message"] == ('This FlowSchema references the PriorityLevelConfiguration object named '
                                          '"nowhere" but there is no such object')
    await until(lambda: http.call("GET", f"{GV}/flowschemas/global-default"), timeout=20, what="Found",
                check=lambda r: dangling(r).get("reason") == "Found")


@pytest.fixture
async def small(etcd: EtcdServer, prefix: str) -> AsyncIterator[Rest]:
    """An apiserver with few seats (10 to share among the levels)."""
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0", max_requests_inflight=10,
                                        max_mutating_requests_inflight=0))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Rest(server, session)
    finally:
        await server.stop(grace=0)


async def _as(api: Rest, user: str, path: str) -> tuple[int, Any, Any]:
    async with api.session.get(api.base + path, headers={"Impersonate-User": user}) as resp:
        return resp.status, await resp.json(), resp.headers


async def test_a_level_that_rejects_refuses_its_flow_with_429_and_serves_the_others(small: Rest) -> None:
    schemas = {o["metadata"]["name"]: o for o in (await _ok(small, "GET", f"{GV}/flowschemas"))["items"]}
    # anyone else's requests: the global-default level, named in the headers
    code, _, headers = await _as(small, "quiet", "/api/v1/namespaces")
    assert code == 200 and headers["X-Kubernetes-PF-FlowSchema-UID"] == schemas["global-default"]["metadata"]["uid"]
    level = await _ok(small, "POST", f"{GV}/prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "one-seat"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}})
    schema = await _ok(small, "POST", f"{GV}/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "noisy"},
        "spec": {"priorityLevelConfiguration": {"name": "one-seat"}, "matchingPrecedence": 100,
                 "distinguisherMethod": {"type": "ByUser"}, "rules": [{
                     "subjects": [{"kind": "User", "user": {"name": "noisy"}}],
                     "resourceRules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["namespaces"],
                                        "clusterScope": True}]}]}})
    # a burst from each: the noisy user's level has one seat and no queue
    for _ in range(20):
        noisy = await asyncio.gather(*(_as(small, "noisy", "/api/v1/namespaces") for _ in range(20)))
        if any(code == 429 for code, _, _ in noisy):
            break
    quiet = await asyncio.gather(*(_as(small, "quiet", "/api/v1/namespaces") for _ in range(20)))
    refused = [(body, headers) for code, body, headers in noisy if code == 429]
    assert refused and any(code == 200 for code, _, _ in noisy), [code for code, _, _ in noisy]
    body, headers = refused[0]
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
                    "details": {"retryAfterSeconds": 1}, "code": 429}, body
    assert headers["Retry-After"] == "1"
    assert headers["X-Kubernetes-PF-FlowSchema-UID"] == schema["metadata"]["uid"]
    assert headers["X-Kubernetes-PF-PriorityLevel-UID"] == level["metadata"]["uid"]
    assert all(code == 200 for code, _, _ in quiet)
    # and /metrics says so by upstream's names
    metrics = await _metrics(small)
    noisy_labels = {"flow_schema": "noisy", "priority_level": "one-seat"}
    noisy_key = _k(**noisy_labels)
    assert metrics["apiserver_flowcontrol_rejected_requests_total"][_k(**noisy_labels, reason="concurrency-limit")] \
        >= len(refused)
    assert metrics["apiserver_flowcontrol_dispatched_requests_total"][noisy_key] >= 1
    others = {"flow_schema": "global-default", "priority_level": "global-default"}
    quiet_key = _k(**others)
    assert metrics["apiserver_flowcontrol_dispatched_requests_total"][quiet_key] >= 21
    assert metrics["apiserver_flowcontrol_request_wait_duration_seconds_count"][_k(**others, execute="true")] >= 21
    assert metrics["apiserver_flowcontrol_request_execution_seconds_count"][_k(**others, type="regular")] >= 21
    assert metrics["apiserver_flowcontrol_current_executing_requests"][noisy_key] == 0  # all ended
    assert metrics["apiserver_flowcontrol_current_inqueue_requests"][quiet_key] == 0
    assert metrics["apiserver_flowcontrol_nominal_limit_seats"][_k(priority_level="one-seat")] == 1
    assert _k(priority_level="exempt") not in metrics["apiserver_flowcontrol_nominal_limit_seats"]


async def test_a_full_queue_answers_429_and_is_counted(small: Rest) -> None:
    await _ok(small, "POST", f"{GV}/prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "one-queue"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "limitResponse": {"type": "Queue", "queuing": {
                "queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}})
    await _ok(small, "POST", f"{GV}/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "queued"},
        "spec": {"priorityLevelConfiguration": {"name": "one-queue"}, "matchingPrecedence": 100, "rules": [{
            "subjects": [{"kind": "User", "user": {"name": "queued"}}],
            "resourceRules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["namespaces"],
                               "clusterScope": True}]}]}})
    for _ in range(20):  # one executing, one queued, the rest refused
        codes = [code for code, _, _ in await asyncio.gather(*(_as(small, "queued", "/api/v1/namespaces")
                                                                for _ in range(20)))]
        if 429 in codes:
            break
    assert 429 in codes and 200 in codes, codes
    metrics = await _metrics(small)
    labels = {"flow_schema": "queued", "priority_level": "one-queue"}
    assert metrics["apiserver_flowcontrol_rejected_requests_total"][_k(**labels, reason="queue-full")] >= 1
    assert metrics["apiserver_flowcontrol_request_wait_duration_seconds_count"][_k(**labels, execute="false")] >= 1


def _k(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


async def _metrics(api: Rest) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """/metrics as {sample name: {sorted labels: value}}."""
    async with api.session.get(api.base + "/metrics") as resp:
        text = await resp.text()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


async def test_priority_and_fairness_can_be_switched_off(etcd: EtcdServer, prefix: str) -> None:
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        enable_priority_and_fairness=False))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{server.rest_address}/api/v1/namespaces") as resp:
                assert resp.status == 200 and "X-Kubernetes-PF-FlowSchema-UID" not in resp.headers
    finally:
        await server.stop(grace=0)

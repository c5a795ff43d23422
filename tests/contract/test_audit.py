"""Audit logging against a real apiserver: with the policy `kubeling up` uses, every write
of a run appears once per stage with who, what and how it ended, a Secret's content never;
with a policy asking for everything, every stage with the request's and the response's
objects; the gRPC front end audited alike; a bad policy refused at start; managed fields
left out when asked; the webhook backend's batches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from apiserver.audit import DEFAULT_POLICY
from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling.client import Client
from kubeling.options import ConfigError
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.conftest import apiserver_config
from tests.wait import until

SECRET_TEXT = "the-launch-codes-1234"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def _started(etcd: EtcdServer, prefix: str, tmp_path: Path, policy: dict[str, Any],
                   tokens: bool = True) -> APIServer:
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    (tmp_path / "tokens.csv").write_text('admin-token,admin,uid-admin,"system:masters"\nalice-token,alice,uid-alice\n')
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        audit_policy_file=str(tmp_path / "policy.yaml"),
                                        audit_log_path=str(tmp_path / "audit" / "audit.log"),
                                        token_auth_file=str(tmp_path / "tokens.csv") if tokens else ""))
    await server.start()
    return server


@pytest.fixture
async def audited(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[APIServer]:
    server = await _started(etcd, prefix, tmp_path, DEFAULT_POLICY)
    try:
        yield server
    finally:
        await server.stop(grace=0)


async def _call(session: aiohttp.ClientSession, server: APIServer, method: str, path: str, body: Any = None,
                token: str = "alice-token", content_type: str = "application/json") -> tuple[int, Any]:
    async with session.request(method, f"http://{server.rest_address}{path}",
                               data=None if body is None else json.dumps(body),
                               headers={"Authorization": f"Bearer {token}", "Content-Type": content_type,
                                        "User-Agent": "audit-test/1.0"}) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else text


async def test_every_write_is_audited_once_per_stage_and_secrets_never(audited: APIServer, tmp_path: Path) -> None:
    ns = "/api/v1/namespaces/default"
    async with aiohttp.ClientSession() as session:
        writes = [
            ("POST", f"{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                                          "data": {"k": "v"}}, 201, "create", "configmaps", "cm"),
            ("PATCH", f"{ns}/configmaps/cm", {"data": {"k": "w"}}, 200, "patch", "configmaps", "cm"),
            ("POST", f"{ns}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                       "stringData": {"code": SECRET_TEXT}}, 201, "create", "secrets", "s"),
            ("PUT", f"{ns}/secrets/s", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                        "stringData": {"code": SECRET_TEXT + "-2"}}, 200, "update", "secrets", "s"),
            ("POST", f"{ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, 201, "create",
             "pods", "p"),
            ("POST", "/api/v1/namespaces/nowhere/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                               "metadata": {"name": "lost"}}, 404, "create",
             "configmaps", ""),
            ("DELETE", f"{ns}/secrets/s", None, 200, "delete", "secrets", "s"),
            ("DELETE", f"{ns}/configmaps/cm", None, 200, "delete", "configmaps", "cm"),
        ]
        for method, path, body, code, *_ in writes:
            content = "application/merge-patch+json" if method == "PATCH" else "application/json"
            got, answer = await _call(session, audited, method, path, body, content_type=content)
            assert got == code, answer
        assert (await _call(session, audited, "GET", f"{ns}/pods/p"))[0] == 200
        assert (await _call(session, audited, "GET", "/healthz"))[0] in (200, 500)  # left out by the policy
    text = (tmp_path / "audit" / "audit.log").read_text()
    assert SECRET_TEXT not in text and "dGhlLWxhdW5jaC1jb2Rlcy0xMjM0" not in text  # nor its base64
    events = _events(tmp_path / "audit" / "audit.log")
    mine = [e for e in events if e["user"]["username"] == "alice"]
    for method, path, _, code, verb, resource, name in writes:
        found = [e for e in mine if e["verb"] == verb and e["objectRef"].get("resource") == resource
                 and e["objectRef"].get("name", "") == name and e["requestURI"] == path]
        assert [e["stage"] for e in found] == ["ResponseComplete"], (method, path, found)  # RequestReceived omitted
        event = found[0]
        assert event["responseStatus"]["code"] == code and event["userAgent"] == "audit-test/1.0"
        assert event["sourceIPs"] == ["127.0.0.1"] and event["annotations"]["authorization.k8s.io/decision"] == "allow"
        assert event["level"] == ("Metadata" if resource in ("secrets", "configmaps") else "RequestResponse")
        if resource in ("secrets", "configmaps"):
            assert "requestObject" not in event and "responseObject" not in event
    created = next(e for e in mine if e["verb"] == "create" and e["objectRef"].get("name") == "p")
    assert created["requestObject"]["metadata"]["name"] == "p" and created["responseObject"]["metadata"]["uid"]
    assert created["objectRef"] == {"resource": "pods", "namespace": "default", "name": "p", "apiVersion": "v1"}
    lost = next(e for e in mine if e["objectRef"].get("namespace") == "nowhere")
    assert lost["responseStatus"]["reason"] == "NotFound" and lost["responseStatus"]["status"] == "Failure"
    read = next(e for e in mine if e["verb"] == "get")
    assert read["level"] == "Metadata" and "responseObject" not in read
    assert not any(e.get("requestURI") == "/healthz" for e in events)
    assert not any(e["user"]["username"] == "admin" and e["verb"] == "update" and
                   e["objectRef"].get("resource") == "leases" for e in events)


async def test_a_policy_of_everything_records_every_stage_and_the_grpc_front_end(
        etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}]}]}
    server = await _started(etcd, prefix, tmp_path, policy, tokens=False)  # gRPC callers: anonymous
    try:
        async with Client(server.address) as client:
            await client.configmaps.create(core_pb2.ConfigMap(
                metadata=meta_pb2.ObjectMeta(name="over-grpc", namespace="default"), data={"a": "b"}))
    finally:
        await server.stop(grace=0)
    events = [e for e in _events(tmp_path / "audit" / "audit.log") if e["objectRef"].get("resource") == "configmaps"]
    created = [e for e in events if e["verb"] == "create"]
    assert [e["stage"] for e in created] == ["RequestReceived", "ResponseComplete"]
    assert len({e["auditID"] for e in created}) == 1
    done = created[-1]
    assert done["user"]["username"] == "system:anonymous" and done["requestURI"].endswith("/CREATE")
    assert done["requestObject"]["metadata"]["name"] == "over-grpc" and done["responseObject"]["data"] == {"a": "b"}
    assert done["responseStatus"]["code"] == 201
    assert done["sourceIPs"] == ["127.0.0.1"]


async def test_managed_fields_are_left_out_when_the_policy_says_so(etcd: EtcdServer, prefix: str,
                                                                     tmp_path: Path) -> None:
    """omitManagedFields: the policy's, and a rule's that overrides it."""
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitManagedFields": True, "rules": [
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}],
         "namespaces": ["kept"], "omitManagedFields": False},
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}]}]}
    server = await _started(etcd, prefix, tmp_path, policy)
    try:
        async with aiohttp.ClientSession() as session:
            for namespace in ("default", "kept"):
                if namespace != "default":
                    await _call(session, server, "POST", "/api/v1/namespaces",
                                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                                token="admin-token")
                code, _ = await _call(session, server, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                       "data": {"k": "v"}}, token="admin-token")
                assert code == 201
            code, _ = await _call(session, server, "GET", "/api/v1/namespaces/default/configmaps",
                                  token="admin-token")
            assert code == 200
    finally:
        await server.stop(grace=0)
    done = {(e["objectRef"].get("namespace"), e["verb"]): e for e in _events(tmp_path / "audit" / "audit.log")
            if e["stage"] == "ResponseComplete" and e["objectRef"].get("resource") == "configmaps"}
    omitted, kept = done[("default", "create")], done[("kept", "create")]
    assert omitted["responseObject"]["metadata"]["name"] == "c"
    assert "managedFields" not in omitted["responseObject"]["metadata"]
    assert kept["responseObject"]["metadata"]["managedFields"][0]["manager"] == "audit-test"
    listed = done[("default", "list")]["responseObject"]
    assert listed["items"] and all("managedFields" not in i["metadata"] for i in listed["items"])


async def test_a_bad_policy_is_refused_at_start(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Everything"}]}
    with pytest.raises(ConfigError, match=r'--audit-policy-file: .*rules\[0\].level: Unsupported value: "Everything"'):
        await _started(etcd, prefix, tmp_path, policy)


async def test_pod_security_audit_mode_annotates_the_events(audited: APIServer, tmp_path: Path) -> None:
    """A namespace that audits at restricted: a privileged pod is let in (enforce is
    privileged) and its create event says what it would violate."""
    async with aiohttp.ClientSession() as session:
        assert (await _call(session, audited, "POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watched", "labels": {
                "pod-security.kubernetes.io/audit": "restricted"}}}))[0] == 201
        code, _ = await _call(session, audited, "POST", "/api/v1/namespaces/watched/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"}, "spec": {"containers": [
                {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]}})
        assert code == 201
    event = next(e for e in _events(tmp_path / "audit" / "audit.log")
                 if e["verb"] == "create" and e["objectRef"].get("name") == "root")
    annotations = event["annotations"]
    assert annotations["pod-security.kubernetes.io/enforce-policy"] == "privileged:latest"
    violations = annotations["pod-security.kubernetes.io/audit-violations"]
    assert violations.startswith('would violate PodSecurity "restricted:latest": ') and \
        'privileged (container "c" must not set securityContext.privileged=true)' in violations, violations


async def test_events_reach_a_webhook_in_batches_and_a_refused_batch_is_sent_again(
        etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    """The webhook backend (batch mode) as an audit collector sees it: EventLists POSTed to
    the kubeconfig's server; the first answer is a 503, and that batch arrives later."""
    received: list[dict[str, Any]] = []
    answers = iter([503])

    async def collect(request: web.Request) -> web.Response:
        status = next(answers, 200)
        if status == 200:
            received.append(await request.json())
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/audit", collect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    (tmp_path / "webhook.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "audit",
        "clusters": [{"name": "sink", "cluster": {"server": f"http://127.0.0.1:{port}/audit"}}],
        "contexts": [{"name": "audit", "context": {"cluster": "sink", "user": "apiserver"}}],
        "users": [{"name": "apiserver", "user": {}}]}))
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"], "rules": [
        {"level": "Metadata", "resources": [{"group": "", "resources": ["configmaps"]}]}]}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        audit_policy_file=str(tmp_path / "policy.yaml"),
                                        audit_webhook_config_file=str(tmp_path / "webhook.yaml"),
                                        audit_webhook_batch_max_wait=0.2, audit_webhook_initial_backoff=0.1))
    await server.start()
    try:
        async with Client(server.address) as client:
            for i in range(3):
                await client.configmaps.create(core_pb2.ConfigMap(
                    metadata=meta_pb2.ObjectMeta(name=f"c{i}", namespace="default")))

            def delivered() -> list[str]:
                return sorted(e["objectRef"]["name"] for batch in received for e in batch["items"]
                              if e["verb"] == "create")
            await until(delivered, "the three creates delivered", check=lambda names: names == ["c0", "c1", "c2"])
    finally:
        await server.stop(grace=0)
        await runner.cleanup()
    assert all(b["kind"] == "EventList" and b["apiVersion"] == "audit.k8s.io/v1" for b in received)
    event = received[0]["items"][0]
    assert event["stage"] == "ResponseComplete" and event["level"] == "Metadata"
    assert event["responseStatus"]["code"] == 201


async def test_a_bad_webhook_configuration_is_refused_at_start(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(DEFAULT_POLICY))
    (tmp_path / "webhook.yaml").write_text(yaml.safe_dump({"clusters": [{"name": "x", "cluster": {
        "server": "ftp://example"}}]}))
    for overrides, message in (({}, "cluster.server: must be an http"),
                               ({"audit_webhook_mode": "blocking"}, 'Unsupported value: "blocking"')):
        server = APIServer(apiserver_config(etcd, prefix, audit_policy_file=str(tmp_path / "policy.yaml"),
                                            audit_webhook_config_file=str(tmp_path / "webhook.yaml"), **overrides))
        with pytest.raises(ConfigError, match=message):
            await server.start()

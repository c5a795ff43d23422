"""Admission webhooks against their protocol: a real webhook server over TLS with its own
CA (tests/admissionwebhook.py), the apiserver on a real etcd, requests over REST. Names
follow the upstream conformance tests they mirror ([sig-api-machinery]
AdmissionWebhook, test/conformance/testdata/conformance.yaml)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from tests.admissionwebhook import AdmissionWebhookServer, webhook_config
from tests.contract.test_crds import Rest
from tests.wait import until

VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
_ALL = [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "pods"]}]


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[AdmissionWebhookServer]:
    server = AdmissionWebhookServer(tmp_path / "webhook-pki")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _hook(server: AdmissionWebhookServer, path: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": {"url": server.url(path), "caBundle": server.ca_bundle},
            "rules": _ALL, **extra}


async def in_force(http: Rest, collection: str, made: dict[str, Any]) -> None:
    """Wait until the apiserver's watch cache holds what was just written (admission reads
    configurations from it, as upstream's from its informers): a list at that
    resourceVersion answers only then."""
    code, body, _ = await http.call("GET", collection, query={
        "resourceVersion": made["metadata"]["resourceVersion"], "resourceVersionMatch": "NotOlderThan"})
    assert code == 200, body


async def _configure(http: Rest, kind: str, name: str, hooks: list[dict[str, Any]]) -> None:
    collection = VWC if kind.startswith("Validating") else MWC
    code, body, _ = await http.call("POST", collection, webhook_config(kind, name, hooks))
    assert code == 201, body
    await in_force(http, collection, body)


def _configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
            "data": {"a": "b"}}


async def test_configurations_are_validated_as_upstream(http: Rest) -> None:
    code, body, _ = await http.call("POST", VWC, {"metadata": {"name": "bad"}, "webhooks": [
        {"name": "short", "clientConfig": {"url": "http://x/y"}, "timeoutSeconds": 31,
         "rules": [{"operations": ["FETCH"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*", "pods"]}]},
        {"name": "b.example.com", "clientConfig": {}, "sideEffects": "Some", "admissionReviewVersions": ["v3"]}]})
    assert code == 422, body
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes["webhooks[0].name"].endswith("should be a domain with at least three segments separated by dots")
    assert causes["webhooks[0].sideEffects"] == "Required value: must specify one of None, NoneOnDryRun"
    assert causes["webhooks[0].admissionReviewVersions"] == "Required value: must specify one of v1, v1beta1"
    assert causes["webhooks[0].timeoutSeconds"] == \
        "Invalid value: 31: the timeout value must be between 1 and 30 seconds"
    assert causes["webhooks[0].clientConfig.url"] == 'Invalid value: "http": \'https\' is the only allowed URL scheme'
    assert causes["webhooks[0].rules[0].operations[0]"].startswith('Unsupported value: "FETCH"')
    assert "if '*' is present, must not specify other resources without subresources" in \
        causes["webhooks[0].rules[0].resources"]
    assert causes["webhooks[1].clientConfig"] == "Required value: exactly one of url or service is required"
    assert causes["webhooks[1].sideEffects"].startswith('Unsupported value: "Some"')
    assert "must include at least one of v1, v1beta1" in causes["webhooks[1].admissionReviewVersions"]


async def test_defaults_are_upstreams(http: Rest, hooks: AdmissionWebhookServer) -> None:
    await _configure(http, "MutatingWebhookConfiguration", "defaults", [_hook(hooks, "/mutate", "m.example.com")])
    code, body, _ = await http.call("GET", f"{MWC}/defaults")
    hook = body["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"], hook["reinvocationPolicy"],
            hook["namespaceSelector"], hook["objectSelector"], hook["rules"][0]["scope"]) == \
        ("Fail", "Equivalent", 10, "Never", {}, {}, "*")


async def test_should_mutate_configmap_and_pod_and_apply_defaults_after_mutation(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook should mutate configmap / should mutate pod and apply defaults after mutation."""
    await _configure(http, "MutatingWebhookConfiguration", "mutate", [_hook(hooks, "/mutate", "m.example.com")])
    code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap("cm"))
    assert code == 201 and cm["metadata"]["labels"] == {"webhook": "mutated"}, cm
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}
    code, made, _ = await http.call("POST", PODS, pod)
    assert code == 201, made
    sidecar = next(c for c in made["spec"]["containers"] if c["name"] == "sidecar")
    # defaulted after the mutation: busybox is :latest, so Always, as upstream
    assert sidecar["terminationMessagePolicy"] == "File" and sidecar["imagePullPolicy"] == "Always"
    review = hooks.requests("/mutate")[-1]
    assert review["kind"] == {"group": "", "version": "v1", "kind": "Pod"} and review["operation"] == "CREATE"
    assert review["userInfo"]["username"] == "system:anonymous" and review["dryRun"] is False
    # an update goes through it too, with the stored object as oldObject
    cm["data"] = {"a": "c"}
    cm["metadata"]["labels"] = {}
    code, updated, _ = await http.call("PUT", f"{CONFIGMAPS}/cm", cm)
    assert code == 200 and updated["metadata"]["labels"] == {"webhook": "mutated"}
    last = hooks.requests("/mutate")[-1]
    assert last["operation"] == "UPDATE" and last["oldObject"]["data"] == {"a": "b"}


async def test_should_be_able_to_deny_pod_and_configmap_creation(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook should be able to deny pod and configmap creation; warnings reach the client."""
    await _configure(http, "ValidatingWebhookConfiguration", "deny", [
        _hook(hooks, "/deny", "deny.example.com"), _hook(hooks, "/allow", "allow.example.com")])
    code, body, headers = await http.call("POST", CONFIGMAPS, _configmap("deny-me"))
    assert code == 403 and body["reason"] == "Forbidden", body
    assert body["message"] == 'admission webhook "deny.example.com" denied the request: the name is not allowed: ' \
                              "deny-me"
    code, body, headers = await http.call("POST", CONFIGMAPS, _configmap("fine"))
    assert code == 201 and "allowed with a warning" in headers.get("Warning", "")
    code, body, _ = await http.call("DELETE", f"{CONFIGMAPS}/fine")
    assert code == 200
    assert [r["operation"] for r in hooks.requests("/deny")][-1] == "DELETE"


async def test_should_unconditionally_reject_operations_on_fail_closed_webhook(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook should unconditionally reject operations on fail closed webhook; and
    failurePolicy Ignore lets them through. Down, garbage and HTTP errors alike."""
    down = {"name": "down.example.com", "clientConfig": {"url": "https://127.0.0.1:1/x", "caBundle": hooks.ca_bundle},
            "rules": _ALL, "objectSelector": {"matchLabels": {"hook": "down"}}}
    garbage = _hook(hooks, "/garbage", "garbage.example.com", objectSelector={"matchLabels": {"hook": "garbage"}})
    broken = _hook(hooks, "/status-500", "broken.example.com", objectSelector={"matchLabels": {"hook": "500"}})
    await _configure(http, "ValidatingWebhookConfiguration", "fail", [down, garbage, broken])
    for label in ("down", "garbage", "500"):
        code, body, _ = await http.call("POST", CONFIGMAPS, _configmap(f"cm-{label}", hook=label))
        assert code == 500 and body["message"].startswith("Internal error occurred: failed calling webhook"), body
    await _configure(http, "ValidatingWebhookConfiguration", "ignore", [
        {**h, "name": f"i-{label}.example.com", "failurePolicy": "Ignore",
         "objectSelector": {"matchLabels": {"ignore": label}}}
        for h, label in ((down, "down"), (garbage, "garbage"), (broken, "500"))])
    for label in ("down", "garbage", "500"):
        code, body, _ = await http.call("POST", CONFIGMAPS, _configmap(f"ok-{label}", ignore=label))
        assert code == 201, body


async def test_should_honor_timeout(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook should honor timeout: a slow webhook past timeoutSeconds fails the
    write (Fail: the apiserver's deadline, not the webhook's answer) or is ignored (Ignore)."""
    hooks.slow_seconds = 5
    await _configure(http, "ValidatingWebhookConfiguration", "slow", [
        _hook(hooks, "/slow", "slow.example.com", timeoutSeconds=1, objectSelector={"matchLabels": {"slow": "fail"}}),
        _hook(hooks, "/slow", "slow-ignore.example.com", timeoutSeconds=1, failurePolicy="Ignore",
              objectSelector={"matchLabels": {"slow": "ignore"}})])
    code, body, _ = await http.call("POST", CONFIGMAPS, _configmap("slow-1", slow="fail"))
    assert code == 500 and "context deadline exceeded" in body["message"], body
    code, body, _ = await http.call("POST", CONFIGMAPS, _configmap("slow-2", slow="ignore"))
    assert code == 201, body


async def test_selectors_and_match_conditions(http: Rest, hooks: AdmissionWebhookServer) -> None:
    await http.call("POST", "/api/v1/namespaces", {"metadata": {"name": "guarded", "labels": {"guard": "on"}}})
    await _configure(http, "ValidatingWebhookConfiguration", "selective", [
        _hook(hooks, "/deny", "ns.example.com", namespaceSelector={"matchLabels": {"guard": "on"}}),
        _hook(hooks, "/deny", "cond.example.com", matchConditions=[
            {"name": "only-annotated", "expression": "has(object.metadata.annotations) && "
                                                     "'guard' in object.metadata.annotations"}])])
    code, body, _ = await http.call("POST", CONFIGMAPS, _configmap("deny-default"))
    assert code == 201, body  # neither matches
    code, body, _ = await http.call("POST", "/api/v1/namespaces/guarded/configmaps", _configmap("deny-ns"))
    assert code == 403 and '"ns.example.com"' in body["message"]
    annotated = _configmap("deny-annotated")
    annotated["metadata"]["annotations"] = {"guard": "x"}
    code, body, _ = await http.call("POST", CONFIGMAPS, annotated)
    assert code == 403 and '"cond.example.com"' in body["message"]
    code, body, _ = await http.call("POST", VWC, webhook_config("ValidatingWebhookConfiguration", "bad-cel", [
        _hook(hooks, "/deny", "bad.example.com", matchConditions=[{"name": "c", "expression": "object.x ==="}])]))
    assert code == 422 and "compilation failed" in body["details"]["causes"][0]["message"]


async def test_reinvocation_and_dry_run(http: Rest, hooks: AdmissionWebhookServer) -> None:
    await _configure(http, "MutatingWebhookConfiguration", "a-trail", [
        _hook(hooks, "/append", "append.example.com", reinvocationPolicy="IfNeeded")])
    await _configure(http, "MutatingWebhookConfiguration", "b-label", [_hook(hooks, "/mutate", "label.example.com")])
    code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap("trail"))
    assert code == 201 and cm["metadata"]["annotations"]["trail"] == "++", cm  # called again after the label
    assert cm["metadata"]["labels"] == {"webhook": "mutated"}
    before = len(hooks.reviews)
    code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap("dry"), query={"dryRun": "All"})
    assert code == 201 and cm["metadata"]["labels"] == {"webhook": "mutated"}
    assert all(r["dryRun"] for _, r in hooks.reviews[before:])
    code, _, _ = await http.call("GET", f"{CONFIGMAPS}/dry")
    assert code == 404


async def test_should_not_be_able_to_mutate_or_prevent_deletion_of_webhook_configuration_objects(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook should not be able to mutate or prevent deletion of webhook configuration objects."""
    every = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]
    await _configure(http, "ValidatingWebhookConfiguration", "deny-all", [
        {**_hook(hooks, "/deny", "deny-all.example.com"), "rules": every}])
    await _configure(http, "MutatingWebhookConfiguration", "mutate-all", [
        {**_hook(hooks, "/mutate", "mutate-all.example.com"), "rules": every}])
    code, body, _ = await http.call("POST", VWC, webhook_config("ValidatingWebhookConfiguration", "deny-x", [
        _hook(hooks, "/deny", "x.example.com")]))
    assert code == 201 and "labels" not in body["metadata"], body
    for path in (f"{VWC}/deny-x", f"{VWC}/deny-all", f"{MWC}/mutate-all"):
        code, body, _ = await http.call("DELETE", path)
        assert code == 200, body
    assert not [r for _, r in hooks.reviews if "webhookconfigurations" in r["resource"]["resource"]]


async def test_configuration_changes_take_effect_at_once(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """AdmissionWebhook patching/updating a validating webhook should work."""
    await _configure(http, "ValidatingWebhookConfiguration", "toggle", [_hook(hooks, "/deny", "t.example.com")])
    code, _, _ = await http.call("POST", CONFIGMAPS, _configmap("deny-1"))
    assert code == 403
    code, _, _ = await http.call("PATCH", f"{VWC}/toggle", [
        {"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["UPDATE"]}],
        content_type="application/json-patch+json")
    assert code == 200

    async def allowed() -> bool:
        code, _, _ = await http.call("POST", CONFIGMAPS, _configmap("deny-2"))
        return code == 201
    await until(allowed, timeout=2, what="the patched configuration in force")

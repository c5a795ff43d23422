"""Admission webhooks against their protocol: a real webhook server over TLS with its own
CA (tests/admissionwebhook.py), the apiserver on a real etcd, requests over REST. Names
follow the upstream conformance tests they mirror ([sig-api-machinery]
AdmissionWebhook, test/conformance/testdata/conformance.yaml)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from tests.admissionwebhook import AdmissionWebhookServer, webhook_config
from tests.contract.test_crds import Rest, _crd, _define
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


async def test_admission_webhook_mutation_with_defaulting(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, mutation with defaulting ([sig-api-machinery] AdmissionWebhook should
    mutate pod and apply defaults after mutation): a container added by the webhook is defaulted."""
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


async def test_admission_webhook_deny_create(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, deny create ([sig-api-machinery] AdmissionWebhook should be able to
    deny pod and configmap creation): non-compliant pods and configmaps refused, compliant
    ones updated or patched to be non-compliant refused, a hanging webhook times out, a
    namespace the selector leaves out is not asked; warnings reach the client."""
    skip = {"matchExpressions": [{"key": "skip-webhook-admission", "operator": "NotIn", "values": ["yes"]}]}
    await _configure(http, "ValidatingWebhookConfiguration", "deny", [
        _hook(hooks, "/deny", "deny.example.com", namespaceSelector=skip),
        _hook(hooks, "/allow", "allow.example.com"),
        _hook(hooks, "/slow", "hang.example.com", timeoutSeconds=1, objectSelector={"matchLabels": {"hang": "yes"}})])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deny-pod"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    code, body, _ = await http.call("POST", PODS, pod)
    assert code == 403 and "the name is not allowed: deny-pod" in body["message"], body
    code, body, _ = await http.call("POST", CONFIGMAPS, {**_configmap("bad"), "data": {"x": "webhook-disallow"}})
    assert code == 403 and "the object contains unwanted data" in body["message"], body
    code, made, _ = await http.call("POST", CONFIGMAPS, _configmap("good"))
    assert code == 201, made
    code, body, _ = await http.call("PUT", f"{CONFIGMAPS}/good", {**made, "data": {"x": "webhook-disallow"}})
    assert code == 403, body
    code, body, _ = await http.call("PATCH", f"{CONFIGMAPS}/good", {"data": {"x": "webhook-disallow"}},
                                    content_type="application/merge-patch+json")
    assert code == 403, body
    hooks.slow_seconds = 3
    code, body, _ = await http.call("POST", PODS, {**pod, "metadata": {"name": "hang", "labels": {"hang": "yes"}}})
    assert code == 500 and "context deadline exceeded" in body["message"], body
    await http.call("POST", "/api/v1/namespaces", {"metadata": {"name": "exempt",
                                                                "labels": {"skip-webhook-admission": "yes"}}})
    code, body, _ = await http.call("POST", "/api/v1/namespaces/exempt/configmaps",
                                    {**_configmap("bad"), "data": {"x": "webhook-disallow"}})
    assert code == 201, body
    code, body, headers = await http.call("POST", CONFIGMAPS, _configmap("deny-me"))
    assert code == 403 and body["reason"] == "Forbidden", body
    assert body["message"] == 'admission webhook "deny.example.com" denied the request: the name is not allowed: ' \
                              "deny-me"
    code, body, headers = await http.call("POST", CONFIGMAPS, _configmap("fine"))
    assert code == 201 and "allowed with a warning" in headers.get("Warning", "")
    code, body, _ = await http.call("DELETE", f"{CONFIGMAPS}/fine")
    assert code == 200
    assert [r["operation"] for r in hooks.requests("/deny")][-1] == "DELETE"


async def test_admission_webhook_fail_closed(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, fail closed ([sig-api-machinery] AdmissionWebhook should
    unconditionally reject operations on fail closed webhook); and failurePolicy Ignore lets
    them through. Down, garbage and HTTP errors alike."""
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


async def test_admission_webhook_honor_timeout(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, honor timeout ([sig-api-machinery] AdmissionWebhook should honor
    timeout): a slow webhook past timeoutSeconds fails the write (Fail: the apiserver's
    deadline, not the webhook's answer) or is ignored (Ignore); one within it answers."""
    hooks.slow_seconds = 2
    await _configure(http, "ValidatingWebhookConfiguration", "slow", [
        _hook(hooks, "/slow", "slow.example.com", timeoutSeconds=1, objectSelector={"matchLabels": {"slow": "fail"}}),
        _hook(hooks, "/slow", "slow-ignore.example.com", timeoutSeconds=1, failurePolicy="Ignore",
              objectSelector={"matchLabels": {"slow": "ignore"}}),
        _hook(hooks, "/slow", "slow-long.example.com", timeoutSeconds=10,
              objectSelector={"matchLabels": {"slow": "ok"}})])
    code, body, _ = await http.call("POST", CONFIGMAPS, _configmap("slow-3", slow="ok"))
    assert code == 201, body
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


async def test_admission_webhook_admission_control_not_allowed_on_webhook_configuration_objects(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, admission control not allowed on webhook configuration objects
    ([sig-api-machinery] AdmissionWebhook should not be able to mutate or prevent deletion of
    webhook configuration objects)."""
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


async def test_admission_webhook_update_validating_webhook(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, update validating webhook ([sig-api-machinery] AdmissionWebhook
    patching/updating a validating webhook should work): a configuration no longer for
    CREATE lets the create through, at once."""
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


# ------------------------------------------------------------------ the rest of upstream's list

async def test_admission_webhook_discovery_document(http: Rest) -> None:
    """Admission webhook, discovery document: the group, its v1, both configuration kinds."""
    code, groups, _ = await http.call("GET", "/apis")
    group = next(g for g in groups["groups"] if g["name"] == "admissionregistration.k8s.io")
    assert "admissionregistration.k8s.io/v1" in [v["groupVersion"] for v in group["versions"]]
    code, listing, _ = await http.call("GET", "/apis/admissionregistration.k8s.io/v1")
    names = {r["name"] for r in listing["resources"]}
    assert {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} <= names, names


async def _list_and_delete_collection(http: Rest, hooks: AdmissionWebhookServer, kind: str, path: str,
                                      probe: Callable[[str, bool], Awaitable[None]]) -> None:
    """Ten labelled configurations: listed by the label, in force (`probe(name, True)`),
    deleted as a collection, and no longer in force (`probe(name, False)`)."""
    collection = VWC if kind.startswith("Validating") else MWC
    for i in range(10):
        config = webhook_config(kind, f"listed-{i}", [_hook(hooks, path, f"h{i}.example.com")])
        config["metadata"]["labels"] = {"e2e-list-test": "yes"}
        code, body, _ = await http.call("POST", collection, config)
        assert code == 201, body
    await in_force(http, collection, body)
    code, listed, _ = await http.call("GET", collection, query={"labelSelector": "e2e-list-test=yes"})
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == sorted(f"listed-{i}" for i in range(10))
    await probe("deny-while-there", True)
    code, _, _ = await http.call("DELETE", collection, query={"labelSelector": "e2e-list-test=yes"})
    assert code == 200
    code, listed, _ = await http.call("GET", collection, query={"labelSelector": "e2e-list-test=yes"})
    assert listed["items"] == []
    await in_force(http, collection, listed)
    await probe("deny-after", False)


async def test_admission_webhook_list_mutating_webhooks(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, list mutating webhooks: listed by label, deleted as a collection,
    mutating while there and not after."""
    async def probe(name: str, present: bool) -> None:
        code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap(name))
        assert code == 201 and bool(cm["metadata"].get("labels")) == present, cm
    await _list_and_delete_collection(http, hooks, "MutatingWebhookConfiguration", "/mutate", probe)


async def test_admission_webhook_list_validating_webhooks(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, list validating webhooks: listed by label, deleted as a collection,
    the create refused while they are there and allowed after."""
    async def probe(name: str, present: bool) -> None:
        code, body, _ = await http.call("POST", CONFIGMAPS, _configmap(name))
        assert code == (403 if present else 201), body
    await _list_and_delete_collection(http, hooks, "ValidatingWebhookConfiguration", "/deny", probe)


async def test_admission_webhook_update_mutating_webhook(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, update mutating webhook: not for CREATE, not mutated; patched back, mutated."""
    await _configure(http, "MutatingWebhookConfiguration", "toggle", [_hook(hooks, "/mutate", "t.example.com")])
    code, config, _ = await http.call("GET", f"{MWC}/toggle")
    config["webhooks"][0]["rules"][0]["operations"] = ["UPDATE"]
    code, config, _ = await http.call("PUT", f"{MWC}/toggle", config)
    assert code == 200, config
    await in_force(http, MWC, config)
    code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap("plain"))
    assert code == 201 and not cm["metadata"].get("labels"), cm
    code, config, _ = await http.call("PATCH", f"{MWC}/toggle", [
        {"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["CREATE"]}],
        content_type="application/json-patch+json")
    await in_force(http, MWC, config)
    code, cm, _ = await http.call("POST", CONFIGMAPS, _configmap("mutated"))
    assert code == 201 and cm["metadata"]["labels"] == {"webhook": "mutated"}, cm


async def _match_conditions_stored(http: Rest, hooks: AdmissionWebhookServer, kind: str, collection: str) -> None:
    conditions = [{"name": "exclude-skip-me", "expression": "object.metadata.name != 'skip-me'"}]
    await _configure(http, kind, "conditions", [_hook(hooks, "/allow", "c.example.com", matchConditions=conditions)])
    code, config, _ = await http.call("GET", f"{collection}/conditions")
    assert config["webhooks"][0]["matchConditions"] == conditions
    updated = [*conditions, {"name": "only-labelled", "expression": "has(object.metadata.labels)"}]
    config["webhooks"][0]["matchConditions"] = updated
    code, body, _ = await http.call("PUT", f"{collection}/conditions", config)
    assert code == 200, body
    code, config, _ = await http.call("GET", f"{collection}/conditions")
    assert config["webhooks"][0]["matchConditions"] == updated


async def test_mutating_admission_webhook_create_and_update_mutating_webhook_configuration_with_matchconditions(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Mutating Admission webhook, create and update mutating webhook configuration with matchConditions."""
    await _match_conditions_stored(http, hooks, "MutatingWebhookConfiguration", MWC)


async def test_validating_admission_webhook_create_and_update_validating_webhook_configuration_with_matchconditions(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Validating Admission webhook, create and update validating webhook configuration with matchConditions."""
    await _match_conditions_stored(http, hooks, "ValidatingWebhookConfiguration", VWC)


async def _invalid_conditions(http: Rest, hooks: AdmissionWebhookServer, kind: str, collection: str) -> None:
    code, body, _ = await http.call("POST", collection, webhook_config(kind, "bad-cel", [
        _hook(hooks, "/allow", "bad.example.com", matchConditions=[{"name": "c", "expression": "object.x ==="}])]))
    assert code == 422 and "compilation failed" in body["message"], body


async def test_mutating_admission_webhook_reject_mutating_webhook_configurations_with_invalid_matchconditions(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Mutating Admission webhook, reject mutating webhook configurations with invalid matchConditions."""
    await _invalid_conditions(http, hooks, "MutatingWebhookConfiguration", MWC)


async def test_validating_admission_webhook_reject_validating_webhook_configurations_with_invalid_matchconditions(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Validating Admission webhook, reject validating webhook configurations with invalid matchConditions."""
    await _invalid_conditions(http, hooks, "ValidatingWebhookConfiguration", VWC)


async def test_mutating_admission_webhook_mutating_webhook_excluding_object_with_specific_name(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Mutating Admission webhook, mutating webhook excluding object with specific name:
    everything mutated but the configmap named skip-me."""
    conditions = [{"name": "exclude-skip-me", "expression": "object.metadata.name != 'skip-me'"}]
    await _configure(http, "MutatingWebhookConfiguration", "skip",
                     [_hook(hooks, "/mutate", "s.example.com", matchConditions=conditions)])
    code, skipped, _ = await http.call("POST", CONFIGMAPS, _configmap("skip-me"))
    assert code == 201 and not skipped["metadata"].get("labels"), skipped
    code, other, _ = await http.call("POST", CONFIGMAPS, _configmap("other"))
    assert code == 201 and other["metadata"]["labels"] == {"webhook": "mutated"}, other


async def test_admission_webhook_ordered_mutation(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, ordered mutation ([sig-api-machinery] AdmissionWebhook should mutate
    configmap): the second webhook sees what the first added."""
    await _configure(http, "MutatingWebhookConfiguration", "stages", [
        _hook(hooks, "/stage-1", "stage-1.example.com"), _hook(hooks, "/stage-2", "stage-2.example.com")])
    code, cm, _ = await http.call("POST", CONFIGMAPS, {**_configmap("staged"), "data": {"mutation-start": "yes"}})
    assert code == 201 and cm["data"] == {"mutation-start": "yes", "mutation-stage-1": "yes",
                                          "mutation-stage-2": "yes"}, cm


_OPEN_SPEC = {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "data": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def _cr_rules(plural: str, operations: list[str]) -> list[dict[str, Any]]:
    return [{"operations": operations, "apiGroups": ["example.com"], "apiVersions": ["*"], "resources": [plural]}]


async def test_admission_webhook_deny_custom_resource_create_and_delete(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, deny custom resource create and delete: creation, update and
    deletion of custom resources refused by the webhook."""
    await _define(http, _crd("e2etests", "E2eTest", schema=_OPEN_SPEC))
    await _configure(http, "ValidatingWebhookConfiguration", "deny-cr", [
        {**_hook(hooks, "/deny", "cr.example.com"), "rules": _cr_rules("e2etests", ["CREATE", "UPDATE", "DELETE"])}])
    base = "/apis/example.com/v1/namespaces/default/e2etests"
    code, body, _ = await http.call("POST", base, {"apiVersion": "example.com/v1", "kind": "E2eTest",
                                                   "metadata": {"name": "bad"}, "data": {"k": "webhook-disallow"}})
    assert code == 403 and '"cr.example.com" denied the request' in body["message"], body
    code, made, _ = await http.call("POST", base, {"apiVersion": "example.com/v1", "kind": "E2eTest", "metadata": {
        "name": "kept", "labels": {"webhook-e2e-test": "webhook-nondeletable"}}, "data": {"k": "fine"}})
    assert code == 201, made
    code, body, _ = await http.call("PUT", f"{base}/kept", {**made, "data": {"k": "webhook-disallow"}})
    assert code == 403, body
    code, body, _ = await http.call("DELETE", f"{base}/kept")
    assert code == 403 and "the object is not deletable" in body["message"], body


async def test_admission_webhook_deny_custom_resource_definition(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, deny custom resource definition: a CRD create refused."""
    await _configure(http, "ValidatingWebhookConfiguration", "deny-crd", [
        {**_hook(hooks, "/deny", "crd.example.com"), "rules": [
            {"operations": ["CREATE"], "apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["*"],
             "resources": ["customresourcedefinitions"]}]}])
    code, body, _ = await http.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                    _crd("deny-things", "DenyThing"))
    assert code == 403 and '"crd.example.com" denied the request' in body["message"], body


async def test_admission_webhook_mutate_custom_resource(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, mutate custom resource."""
    await _define(http, _crd("mutants", "Mutant", schema=_OPEN_SPEC))
    await _configure(http, "MutatingWebhookConfiguration", "mutate-cr", [
        {**_hook(hooks, "/mutate", "cr.example.com"), "rules": _cr_rules("mutants", ["CREATE"])}])
    code, made, _ = await http.call("POST", "/apis/example.com/v1/namespaces/default/mutants", {
        "apiVersion": "example.com/v1", "kind": "Mutant", "metadata": {"name": "m"}, "data": {"k": "v"}})
    assert code == 201 and made["metadata"]["labels"] == {"webhook": "mutated"}, made


async def test_admission_webhook_mutate_custom_resource_with_different_stored_version(
        http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, mutate custom resource with different stored version: the CRD's
    storage moved to v2, a patch of a v1-stored object mutated and applied."""
    versions = [{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": _OPEN_SPEC}}
                for v in ("v1", "v2")]
    await _define(http, _crd("multis", "Multi", versions=versions))
    await _configure(http, "MutatingWebhookConfiguration", "mutate-multi", [
        {**_hook(hooks, "/mutate", "multi.example.com"), "rules": _cr_rules("multis", ["CREATE", "UPDATE"])}])
    code, made, _ = await http.call("POST", "/apis/example.com/v1/namespaces/default/multis", {
        "apiVersion": "example.com/v1", "kind": "Multi", "metadata": {"name": "m"}, "data": {"mutation-start": "yes"}})
    assert code == 201, made
    code, crd, _ = await http.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/multis.example.com")
    crd["spec"]["versions"][0]["storage"], crd["spec"]["versions"][1]["storage"] = False, True
    code, body, _ = await http.call("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/multis.example.com",
                                    crd)
    assert code == 200, body

    async def patched() -> dict[str, Any] | None:
        code, body, _ = await http.call("PATCH", "/apis/example.com/v2/namespaces/default/multis/m",
                                        {"data": {"new-key": "new-value"}},
                                        content_type="application/merge-patch+json")
        return body if code == 200 else None
    body = await until(patched, timeout=10, what="the patch at v2")
    assert body["data"]["new-key"] == "new-value" and body["metadata"]["labels"] == {"webhook": "mutated"}, body


async def test_admission_webhook_mutate_custom_resource_with_pruning(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, mutate custom resource with pruning: of two fields the webhook adds,
    the one the schema does not have is pruned."""
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "mutated": {"type": "boolean"}}}}}
    await _define(http, _crd("pruned", "Pruned", schema=schema))
    await _configure(http, "MutatingWebhookConfiguration", "prune", [
        {**_hook(hooks, "/add-fields", "prune.example.com"), "rules": _cr_rules("pruned", ["CREATE"])}])
    code, made, _ = await http.call("POST", "/apis/example.com/v1/namespaces/default/pruned", {
        "apiVersion": "example.com/v1", "kind": "Pruned", "metadata": {"name": "p"}, "spec": {}})
    assert code == 201 and made["spec"] == {"mutated": True}, made


async def test_admission_webhook_deny_attach(http: Rest, hooks: AdmissionWebhookServer) -> None:
    """Admission webhook, deny attach: a webhook for CONNECT on pods/attach refuses the attach
    (asked with PodAttachOptions, before the pod's kubelet is looked for)."""
    await _configure(http, "ValidatingWebhookConfiguration", "deny-attach", [
        {**_hook(hooks, "/deny", "attach.example.com"), "rules": [
            {"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/attach"]}]}])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deny-attach"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    code, body, _ = await http.call("POST", PODS, pod)
    assert code == 201, body
    code, body, _ = await http.call("POST", f"{PODS}/deny-attach/attach", query={"stdin": "true", "stdout": "true"})
    assert code == 403 and "attaching to pod 'deny-attach' is not allowed" in body["message"], body
    review = hooks.requests("/deny")[-1]
    assert review["operation"] == "CONNECT" and review["subResource"] == "attach", review
    assert review["kind"] == {"group": "", "version": "v1", "kind": "PodAttachOptions"}
    assert review["object"]["stdin"] is True and review["name"] == "deny-attach"

"""ValidatingAdmissionPolicies against their protocol: policies and bindings written over
REST, enforced on writes by the apiserver on a real etcd. Names follow the upstream
conformance tests they mirror ([sig-api-machinery] ValidatingAdmissionPolicy)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from tests.contract.test_admission_webhooks import in_force
from tests.contract.test_crds import Rest, _crd, _define
from tests.wait import until

GROUP = "/apis/admissionregistration.k8s.io/v1"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": [
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["deployments"]}]}, **spec}}


def _binding(name: str, policy: str, actions: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": actions, **spec}}


async def _make(http: Rest, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    code, made, _ = await http.call("POST", f"{GROUP}/{plural}", body)
    assert code == 201, made
    await in_force(http, f"{GROUP}/{plural}", made)
    return made


async def test_validatingadmissionpolicy(http: Rest) -> None:
    """ValidatingAdmissionPolicy ([sig-api-machinery] ValidatingAdmissionPolicy should validate
    against a Deployment): a ConfigMap gives the maximum replicas (params), Deny refuses past
    it with upstream's message."""
    code, _, _ = await http.call("POST", "/api/v1/namespaces/default/configmaps", {
        "metadata": {"name": "limits"}, "data": {"maxReplicas": "3"}})
    assert code == 201
    await _make(http, "validatingadmissionpolicies", _policy(
        "max-replicas", paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        validations=[{"expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                      "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'"}]))
    await _make(http, "validatingadmissionpolicybindings", _binding(
        "max-replicas", "max-replicas", ["Deny"], paramRef={"name": "limits", "parameterNotFoundAction": "Deny"}))
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("big", 5))
    assert code == 422 and body["reason"] == "Invalid", body
    assert body["message"] == "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied " \
                              "request: at most 3 replicas"
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("small", 2))
    assert code == 201, body
    # the parameter gone: parameterNotFoundAction Deny refuses
    await http.call("DELETE", "/api/v1/namespaces/default/configmaps/limits")

    async def refused() -> str | None:  # once the apiserver's cache has seen the delete
        code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("small-2", 1), query={"dryRun": "All"})
        return body["message"] if code == 422 else None
    message = await until(refused, timeout=10, what="the parameter's absence in force")
    assert "no params found for policy binding with `Deny` parameterNotFoundAction" in message


async def test_validatingadmissionpolicy_variables(http: Rest) -> None:
    """ValidatingAdmissionPolicy ([sig-api-machinery] ValidatingAdmissionPolicy should allow
    expressions to refer variables)."""
    await _make(http, "validatingadmissionpolicies", _policy(
        "odd", variables=[{"name": "replicas", "expression": "object.spec.replicas"},
                          {"name": "oddReplicas", "expression": "variables.replicas % 2 == 1"}],
        validations=[{"expression": "variables.replicas > 1"}, {"expression": "variables.oddReplicas",
                                                                  "reason": "Forbidden"}]))
    await _make(http, "validatingadmissionpolicybindings", _binding("odd", "odd", ["Deny"]))
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("one", 1))
    assert code == 422 and body["message"].endswith("denied request: failed expression: variables.replicas > 1")
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("two", 2))
    assert code == 403 and body["message"].endswith("failed expression: variables.oddReplicas"), body
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("three", 3))
    assert code == 201, body


async def test_warn_and_audit_actions_and_failure_policy(http: Rest) -> None:
    await _make(http, "validatingadmissionpolicies", _policy(
        "warned", validations=[{"expression": "object.metadata.name.startsWith('ok-')", "message": "want ok-"}]))
    await _make(http, "validatingadmissionpolicybindings", _binding("warned", "warned", ["Warn", "Audit"]))
    code, body, headers = await http.call("POST", DEPLOYMENTS, _deployment("named", 1))
    assert code == 201, body
    assert "Validation failed for ValidatingAdmissionPolicy 'warned' with binding 'warned': want ok-" in \
        headers.get("Warning", "")
    # an expression that cannot be evaluated: Fail refuses, Ignore lets it through
    await _make(http, "validatingadmissionpolicies", _policy(
        "broken", failurePolicy="Fail", validations=[{"expression": "object.spec.nothing.here == 1"}]))
    await _make(http, "validatingadmissionpolicybindings", _binding("broken", "broken", ["Deny"]))
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("ok-x", 1))
    assert code == 422 and "expression 'object.spec.nothing.here == 1' resulted in error" in body["message"], body
    code, policy, _ = await http.call("GET", f"{GROUP}/validatingadmissionpolicies/broken")
    policy["spec"]["failurePolicy"] = "Ignore"
    code, body, _ = await http.call("PUT", f"{GROUP}/validatingadmissionpolicies/broken", policy)
    assert code == 200, body
    await in_force(http, f"{GROUP}/validatingadmissionpolicies", body)
    code, body, _ = await http.call("POST", DEPLOYMENTS, _deployment("ok-y", 1))
    assert code == 201, body


async def test_policies_are_validated_as_upstream(http: Rest) -> None:
    code, body, _ = await http.call("POST", f"{GROUP}/validatingadmissionpolicies", {
        "metadata": {"name": "bad"}, "spec": {"validations": [{"expression": "object.spec.replicas >"}],
                                              "variables": [{"name": "1x", "expression": "1"}]}})
    assert code == 422, body
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes["spec.matchConstraints"] == "Required value"
    assert "compilation failed" in causes["spec.validations[0].expression"]
    assert causes["spec.variables[0].name"] == 'Invalid value: "1x": name is not a valid CEL identifier'
    code, body, _ = await http.call("POST", f"{GROUP}/validatingadmissionpolicybindings", _binding(
        "b", "p", ["Deny", "Warn"], paramRef={"name": "x"}))
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert code == 422 and causes["spec.paramRef.parameterNotFoundAction"] == "Required value"
    assert "must not contain both Deny and Warn" in causes["spec.validationActions"]


async def _api_operations(http: Rest, plural: str, template: dict[str, Any], patch: dict[str, Any],
                          update: Callable[[dict[str, Any]], None], status: bool) -> None:
    """What upstream's API-operations tests do: discovery, create (three), get, list, watch,
    patch, update, status (read, patch, update), delete, deletecollection."""
    code, groups, _ = await http.call("GET", "/apis/admissionregistration.k8s.io")
    assert "v1" in [v["version"] for v in groups["versions"]]
    code, listing, _ = await http.call("GET", GROUP)
    names = {r["name"] for r in listing["resources"]}
    assert plural in names and (not status or f"{plural}/status" in names), names
    label = {"example-e2e-label": "x1"}
    template = {**template, "metadata": {"generateName": "e2e-example-", "labels": label}}
    made = [await _make(http, plural, template) for _ in range(3)]
    name, base = made[-1]["metadata"]["name"], f"{GROUP}/{plural}"
    code, read, _ = await http.call("GET", f"{base}/{name}")
    assert read["metadata"]["uid"] == made[-1]["metadata"]["uid"]
    code, listed, _ = await http.call("GET", base, query={"labelSelector": "example-e2e-label=x1"})
    assert len(listed["items"]) == 3
    async with http.session.get(http.base + base, params={"watch": "1", "labelSelector": "example-e2e-label=x1",
                                                          "resourceVersion": listed["metadata"]["resourceVersion"]},
                                timeout=aiohttp.ClientTimeout(total=20)) as watch:
        code, patched, _ = await http.call("PATCH", f"{base}/{name}", patch,
                                           content_type="application/merge-patch+json")
        assert code == 200 and patched["metadata"]["annotations"] == {"patched": "true"}, patched
        while True:
            event = json.loads(await watch.content.readline())
            assert event["type"] == "MODIFIED", event
            if (event["object"]["metadata"].get("annotations") or {}).get("patched") == "true":
                break
    update(patched)
    patched["metadata"]["annotations"]["updated"] = "true"
    code, updated, _ = await http.call("PUT", f"{base}/{name}", patched)
    assert code == 200 and updated["metadata"]["annotations"]["updated"] == "true", updated
    if status:
        code, read, _ = await http.call("GET", f"{base}/{name}/status")
        assert code == 200 and read["kind"] == "ValidatingAdmissionPolicy" and read["metadata"]["name"] == name
        condition = {"type": "PatchStatusFailed", "status": "False", "reason": "e2e", "message": "Set from an e2e "
                     "test", "lastTransitionTime": "2024-01-01T00:00:00Z"}
        code, patched, _ = await http.call("PATCH", f"{base}/{name}/status", {"status": {"conditions": [condition]}},
                                           content_type="application/merge-patch+json")
        assert code == 200 and patched["status"]["conditions"][0]["type"] == "PatchStatusFailed", patched
        patched["status"]["conditions"].append({**condition, "type": "StatusUpdateFailed"})
        code, updated, _ = await http.call("PUT", f"{base}/{name}/status", patched)
        assert code == 200 and [c["type"] for c in updated["status"]["conditions"]] == [
            "PatchStatusFailed", "StatusUpdateFailed"], updated
    code, _, _ = await http.call("DELETE", f"{base}/{name}")
    assert code == 200
    code, _, _ = await http.call("GET", f"{base}/{name}")
    assert code == 404
    code, listed, _ = await http.call("GET", base, query={"labelSelector": "example-e2e-label=x1"})
    assert len(listed["items"]) == 2
    code, _, _ = await http.call("DELETE", base, query={"labelSelector": "example-e2e-label=x1"})
    code, listed, _ = await http.call("GET", base, query={"labelSelector": "example-e2e-label=x1"})
    assert code == 200 and listed["items"] == []


async def test_validatingadmissionpolicy_api(http: Rest) -> None:
    """ValidatingAdmissionPolicy API ([sig-api-machinery] ValidatingAdmissionPolicy should
    support ValidatingAdmissionPolicy API operations)."""
    policy = _policy("unused", validations=[{"expression": "object.spec.replicas <= 100"}])

    def update(p: dict[str, Any]) -> None:
        assert p["spec"]["failurePolicy"] == "Ignore"
        p["spec"]["failurePolicy"] = "Fail"
    await _api_operations(http, "validatingadmissionpolicies", policy,
                          {"metadata": {"annotations": {"patched": "true"}}, "spec": {"failurePolicy": "Ignore"}},
                          update, status=True)


async def test_validatingadmissionpolicybinding_api(http: Rest) -> None:
    """ValidatingadmissionPolicyBinding API ([sig-api-machinery] ValidatingAdmissionPolicy
    should support ValidatingAdmissionPolicyBinding API operations)."""
    binding = _binding("unused", "replicalimit-policy.example.com", ["Deny"])

    def update(b: dict[str, Any]) -> None:
        assert b["spec"]["validationActions"] == ["Warn"]
        b["spec"]["validationActions"] = ["Deny"]
    await _api_operations(http, "validatingadmissionpolicybindings", binding,
                          {"metadata": {"annotations": {"patched": "true"}}, "spec": {"validationActions": ["Warn"]}},
                          update, status=False)


async def _type_checked(http: Rest, name: str) -> list[dict[str, str]]:
    async def checked() -> list[dict[str, str]] | None:
        code, policy, _ = await http.call("GET", f"{GROUP}/validatingadmissionpolicies/{name}")
        typing = (policy.get("status") or {}).get("typeChecking")
        return None if typing is None else list(typing.get("expressionWarnings") or [])
    found: list[dict[str, str]] = await until(checked, timeout=10, check=lambda v: v is not None,
                                              what=f"{name} type-checked")
    return found


async def test_should_type_check_validation_expressions(http: Rest) -> None:
    """ValidatingAdmissionPolicy should type check validation expressions (upstream's, not
    in the conformance list): none for a correct policy, one per confused expression."""
    await _make(http, "validatingadmissionpolicies", _policy(
        "correct", validations=[{"expression": "object.spec.replicas > 1"}]))
    assert await _type_checked(http, "correct") == []
    await _make(http, "validatingadmissionpolicies", _policy("confused", validations=[
        {"expression": "object.spec.replicas > '1'",
         "messageExpression": "'wants replicas > 1, got ' + object.spec.replicas"}]))
    warnings = await _type_checked(http, "confused")
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[0].expression",
                                                 "spec.validations[0].messageExpression"], warnings
    assert "found no matching overload for '_>_' applied to '(int, string)'" in warnings[0]["warning"]
    assert "found no matching overload for '_+_' applied to '(string, int)'" in warnings[1]["warning"]


async def test_should_type_check_a_crd(http: Rest) -> None:
    """ValidatingAdmissionPolicy should type check a CRD: its schema's types, and a field it lacks."""
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"}, "cronSpec": {"type": "string"}}}}}
    await _define(http, _crd("crontabs", "CronTab", schema=schema))
    policy = _policy("crd-policy", validations=[{"expression": "object.spec.replicas > '1'"},
                                                {"expression": "object.spec.maxRetries < 10"}])
    policy["spec"]["matchConstraints"]["resourceRules"] = [
        {"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["crontabs"]}]
    await _make(http, "validatingadmissionpolicies", policy)
    warnings = await _type_checked(http, "crd-policy")
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[0].expression",
                                                 "spec.validations[1].expression"], warnings
    assert "found no matching overload for '_>_' applied to '(int, string)'" in warnings[0]["warning"]
    assert "undefined field 'maxRetries'" in warnings[1]["warning"]

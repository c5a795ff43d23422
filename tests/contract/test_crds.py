"""CustomResourceDefinitions against their protocol: the real kubectl and the official
Python client on the REST API, the project's own client on gRPC, the apiserver on a real
etcd. Names follow the upstream conformance tests they mirror where one exists
(test/conformance/testdata/conformance.yaml, [sig-api-machinery] CustomResource*)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import scheme
from kubeling.kubeconfig import write_kubeconfig
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl
from tests.wait import until

CRONTAB_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec:
                  type: string
                image:
                  type: string
                replicas:
                  type: integer
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
"""

CRONTAB = """
apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
"""


def _kubectl(server: APIServer, tmp_path: Path) -> Kubectl:
    return Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.rest_address))


class Rest:
    """Raw HTTP against the REST API (what kubectl hides: statuses, headers, bodies)."""

    def __init__(self, server: APIServer, session: aiohttp.ClientSession) -> None:
        self.base = f"http://{server.rest_address}"
        self.session = session

    async def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                   query: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        data = None if body is None else body if isinstance(body, (str, bytes)) else json.dumps(body)
        async with self.session.request(method, self.base + path, data=data, params=query,
                                        headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
            return resp.status, parsed, resp.headers


@pytest.fixture
async def http(rest: APIServer) -> Any:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


async def _established(http: Rest, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        code, crd, _ = await http.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = {c["type"]: c for c in (crd.get("status") or {}).get("conditions", [])} if code == 200 else {}
        return crd if conditions.get("Established", {}).get("status") == "True" else None
    return await until(check, timeout=20, what=f"{name} Established")


async def test_kubectl_crontab_from_the_documentation(rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """The task "Extend the Kubernetes API with CustomResourceDefinitions", step by step."""
    kubectl = _kubectl(rest, tmp_path)
    (tmp_path / "crd.yaml").write_text(CRONTAB_CRD)
    _, out, _ = await kubectl("apply", "-f", str(tmp_path / "crd.yaml"))
    assert "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created" in out
    crd = await _established(http, "crontabs.stable.example.com")
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert crd["status"]["acceptedNames"]["kind"] == "CronTab"
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["spec"]["names"]["listKind"] == "CronTabList"
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]

    (tmp_path / "ct.yaml").write_text(CRONTAB)
    _, out, _ = await kubectl("apply", "-f", str(tmp_path / "ct.yaml"))
    assert "crontab.stable.example.com/my-new-cron-object created" in out
    _, out, _ = await kubectl("get", "crontab")
    assert out.split()[:4] == ["NAME", "AGE", "my-new-cron-object", out.split()[3]]
    _, out, _ = await kubectl("get", "ct", "-o", "yaml")
    got = yaml.safe_load(out)["items"][0]
    assert got["apiVersion"] == "stable.example.com/v1" and got["kind"] == "CronTab"
    assert got["spec"] == {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}
    assert got["metadata"]["generation"] == 1 and got["metadata"]["uid"]

    _, out, _ = await kubectl("api-resources", "--api-group=stable.example.com")
    assert "crontabs" in out and "ct" in out and "CronTab" in out

    # etcd holds the object as JSON under upstream's key
    kv, _ = await rest.registries[next(r for r in rest.scheme if r.plural == "crontabs")].storage.get(
        f"{rest.config.etcd_prefix}/stable.example.com/crontabs/default/my-new-cron-object".encode())
    assert kv is not None and json.loads(kv.value)["kind"] == "CronTab"

    _, out, _ = await kubectl("delete", "-f", str(tmp_path / "crd.yaml"))
    await until(lambda: http.call("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs"),
                timeout=20, what="crontabs no longer served",
                check=lambda answer: answer[0] == 404)
    code, _, _ = await http.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                        "crontabs.stable.example.com")
    assert code == 404
    # the custom resource went with its definition
    kv, _ = await rest.registries[next(iter(rest.registries))].storage.get(
        f"{rest.config.etcd_prefix}/stable.example.com/crontabs/default/my-new-cron-object".encode())
    assert kv is None


# ------------------------------------------------------------------ helpers for the rules below

def _crd(plural: str, kind: str, *, group: str = "example.com", scope: str = "Namespaced",
         schema: dict[str, Any] | None = None, versions: list[dict[str, Any]] | None = None,
         **names: Any) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind, **names},
                     "versions": versions or [{"name": "v1", "served": True, "storage": True,
                                               "schema": {"openAPIV3Schema": schema or {"type": "object"}}}]}}


async def _define(http: Rest, crd: dict[str, Any]) -> dict[str, Any]:
    code, body, _ = await http.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 201, body
    return await _established(http, crd["metadata"]["name"])


WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "color": {"type": "string", "enum": ["red", "green"], "default": "red"},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "port": {"x-kubernetes-int-or-string": True},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "replicas": {"type": "integer", "default": 1},
            "limit": {"type": "integer", "default": 5}},
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.limit", "message": "replicas must not exceed limit"},
                {"rule": "!has(self.name) || self.name != 'nope'",
                 "messageExpression": "'name ' + self.name + ' is taken'"}]},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                    "selector": {"type": "string"},
                                                    "phase": {"type": "string"}}}}}


def _widgets(**extra: Any) -> dict[str, Any]:
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": WIDGET_SCHEMA},
               "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                        "statusReplicasPath": ".status.replicas",
                                                        "labelSelectorPath": ".status.selector"}},
               "additionalPrinterColumns": [
                   {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                   {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                   {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
                   {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
               "selectableFields": [{"jsonPath": ".spec.color"}], **extra}
    return _crd("widgets", "Widget", versions=[version], shortNames=["wd"], categories=["all"])


WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def _widget(object_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": object_name},
            "spec": {"size": 3, **spec}}


# ------------------------------------------------------------------ the definition's own rules

async def test_definitions_are_validated_with_upstreams_messages(rest: APIServer, http: Rest) -> None:
    post = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    bad = _crd("things", "Thing")
    bad["metadata"]["name"] = "wrong.example.com"
    code, body, _ = await http.call("POST", post, bad)
    assert code == 422 and body["reason"] == "Invalid"
    assert 'metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group' \
        in body["message"]
    assert body["details"]["kind"] == "CustomResourceDefinition"

    two = _crd("things", "Thing", versions=[
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}])
    code, body, _ = await http.call("POST", post, two)
    assert code == 422 and "must have exactly one version marked as storage version" in body["message"]

    code, body, _ = await http.call("POST", post, _crd("things", "Thing", group="nodot"))
    assert code == 422 and 'spec.group: Invalid value: "nodot": should be a domain with at least one dot' \
        in body["message"]

    non_structural = _crd("things", "Thing", schema={"type": "object", "properties": {
        "spec": {"properties": {"a": {"type": "string"}}},
        "status": {"type": "object", "properties": {"b": {"type": "string"}},
                   "additionalProperties": {"type": "string"}}}})
    code, body, _ = await http.call("POST", post, non_structural)
    assert code == 422, body
    assert "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty " \
           "for specified object fields" in body["message"]
    assert "properties[status].additionalProperties: Forbidden: additionalProperties and properties are mutual " \
           "exclusive" in body["message"]

    missing = _crd("things", "Thing", versions=[{"name": "v1", "served": True, "storage": True}])
    code, body, _ = await http.call("POST", post, missing)
    assert code == 422 and "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required" \
        in body["message"]

    cel = _crd("things", "Thing", schema={"type": "object", "x-kubernetes-validations": [{"rule": "self.a =="}]})
    code, body, _ = await http.call("POST", post, cel)
    assert code == 422 and "x-kubernetes-validations[0].rule" in body["message"] and "compilation failed" \
        in body["message"]

    bad_default = _crd("things", "Thing", schema={"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}}}})
    code, body, _ = await http.call("POST", post, bad_default)
    assert code == 422 and "properties[n].default" in body["message"]
    # nothing of the refused definitions was stored
    code, listed, _ = await http.call("GET", post)
    assert code == 200 and listed["items"] == []


async def test_names_in_use_are_not_accepted(rest: APIServer, http: Rest) -> None:
    """Upstream's naming controller: a second definition of the group asking for a plural
    another holds gets NamesAccepted False (PluralConflict) and is not served."""
    await _define(http, _crd("gadgets", "Gadget", shortNames=["gd"]))
    clash = _crd("gizmos", "Gizmo", singular="gadgets")
    code, body, _ = await http.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", clash)
    assert code == 201, body

    async def conditions() -> dict[str, Any] | None:
        _, crd, _ = await http.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                           "gizmos.example.com")
        found = {c["type"]: c for c in (crd.get("status") or {}).get("conditions", [])}
        return found if "NamesAccepted" in found else None
    found = await until(conditions, timeout=20, what="gizmos judged")
    assert found["NamesAccepted"]["status"] == "False"
    assert found["NamesAccepted"]["reason"] == "SingularConflict"
    assert found["NamesAccepted"]["message"] == '"gadgets" is already in use'
    assert found["Established"]["status"] == "False" and found["Established"]["reason"] == "NotAccepted"
    code, _, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/gizmos")
    assert code == 404


# ------------------------------------------------------------------ custom resources

async def test_schema_validation_pruning_and_defaulting(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI / FieldValidation: pruning and
    defaults from the structural schema, field errors with their paths."""
    await _define(http, _widgets())
    code, body, headers = await http.call("POST", WIDGETS, _widget("a", unknown=1, extra={"free": {"x": 1}}))
    assert code == 201, body
    assert "unknown" not in body["spec"] and body["spec"]["extra"] == {"free": {"x": 1}}
    assert body["spec"]["color"] == "red" and body["spec"]["replicas"] == 1  # defaults
    assert 'unknown field \\"spec.unknown\\"' in headers.get("Warning", "")

    code, body, _ = await http.call("POST", WIDGETS, _widget("b", unknown=1), query={"fieldValidation": "Strict"})
    assert code == 400 and 'strict decoding error: unknown field "spec.unknown"' in body["message"]

    code, body, _ = await http.call("POST", WIDGETS, _widget("c", size="big", color="blue", name="ABC"))
    assert code == 422, body
    message = body["message"]
    assert message.startswith('Widget.example.com "c" is invalid: ')
    assert 'spec.size: Invalid value: "big": spec.size in body must be of type integer: "string"' in message
    assert 'spec.color: Unsupported value: "blue": supported values: "red", "green"' in message
    assert "spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'" in message
    causes = {c["field"] for c in body["details"]["causes"]}
    assert {"spec.size", "spec.color", "spec.name"} <= causes

    code, body, _ = await http.call("POST", WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                                                      "metadata": {"name": "d"}, "spec": {"size": 11}})
    assert code == 422 and "spec.size in body should be less than or equal to 10" in body["message"]
    code, body, _ = await http.call("POST", WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                                                      "metadata": {"name": "d"}, "spec": {}})
    assert code == 422 and "spec.size: Required value" in body["message"]
    code, body, _ = await http.call("POST", WIDGETS, _widget("e", tags=["a", "a"], port=[1]))
    assert code == 422 and 'spec.tags[1]: Duplicate value: "a"' in body["message"]
    assert "spec.port in body must be of type integer,string" in body["message"]

    # CEL: a rule broken, a messageExpression, and nothing stored of what was refused
    code, body, _ = await http.call("POST", WIDGETS, _widget("f", replicas=9))
    assert code == 422 and 'spec: Invalid value: "object": replicas must not exceed limit' in body["message"]
    code, body, _ = await http.call("POST", WIDGETS, _widget("g", name="nope"))
    assert code == 422 and "name nope is taken" in body["message"]
    code, listed, _ = await http.call("GET", WIDGETS)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]


async def test_cel_transition_rules_judge_updates_against_the_old_object(rest: APIServer, http: Rest) -> None:
    """x-kubernetes-validations with oldSelf: skipped on create, judged on every update
    (map-list items against the old item with the same keys)."""
    schema = {"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"size": {"type": "integer"},
                       "zone": {"type": "string", "maxLength": 16,
                                "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                                              "message": "zone is immutable"}]},
                       # items of a map list are correlated by their keys, wherever they moved
                       "mounts": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "required": ["name"], "properties": {
                                      "name": {"type": "string", "maxLength": 16},
                                      "path": {"type": "string", "maxLength": 64}},
                                      "x-kubernetes-validations": [{"rule": "self.path == oldSelf.path",
                                                                    "message": "a mount's path is immutable"}]}}},
        "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size",
                                      "messageExpression": "'size may only grow, not to ' + string(self.size)"}]}}}
    await _define(http, _crd("volumes", "Volume", schema=schema))
    path = "/apis/example.com/v1/namespaces/default/volumes"
    code, body, _ = await http.call("POST", path, {"apiVersion": "example.com/v1", "kind": "Volume",
                                                   "metadata": {"name": "v"}, "spec": {"size": 5, "zone": "a"}})
    assert code == 201, body  # no old object: the transition rules are not judged
    merge = "application/merge-patch+json"
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"size": 3}}, content_type=merge)
    assert code == 422 and 'spec: Invalid value: "object": size may only grow, not to 3' in body["message"]
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"zone": "b"}}, content_type=merge)
    assert code == 422 and 'spec.zone: Invalid value: "string": zone is immutable' in body["message"]
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"size": 8}}, content_type=merge)
    assert code == 200 and body["spec"] == {"size": 8, "zone": "a"}
    mounts = [{"name": "data", "path": "/data"}, {"name": "logs", "path": "/logs"}]
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"mounts": mounts}}, content_type=merge)
    assert code == 200, body  # new items: nothing old to compare with
    moved = [{"name": "logs", "path": "/logs"}, {"name": "data", "path": "/data"}, {"name": "tmp", "path": "/t"}]
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"mounts": moved}}, content_type=merge)
    assert code == 200, body  # reordered, one added: each item judged against its own old self
    changed = [{"name": "logs", "path": "/var/log"}, {"name": "data", "path": "/data"}]
    code, body, _ = await http.call("PATCH", f"{path}/v", {"spec": {"mounts": changed}}, content_type=merge)
    assert code == 422 and "spec.mounts[0]: Invalid value: \"object\": a mount's path is immutable" \
        in body["message"], body


async def test_cel_rules_name_declared_fields_escaped_as_upstream(rest: APIServer, http: Rest) -> None:
    """A rule naming a field its object cannot have is refused with the CRD (cel-go's type
    check); properties CEL cannot spell are named escaped (`namespace` is a reserved word:
    `__namespace__`; `max-size`: `max__dash__size`), map keys as they are."""
    def crd(rule: str) -> dict[str, Any]:
        return _crd("tenants", "Tenant", schema={"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "namespace": {"type": "string", "maxLength": 63}, "max-size": {"type": "integer"},
                "quotas": {"type": "object", "maxProperties": 8,
                           "additionalProperties": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": rule, "message": "tenant rules"}]}}})
    post = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    code, body, _ = await http.call("POST", post, crd("self.nmespace != ''"))
    assert code == 422 and "x-kubernetes-validations[0].rule: Invalid value: \"self.nmespace != ''\": " \
        "compilation failed: ERROR: <input>: undefined field 'nmespace'" in body["message"], body
    await _define(http, crd("self.__namespace__.startsWith('team-') && self.max__dash__size <= 10 && "
                            "(!('cpu' in self.quotas) || self.quotas['cpu'] <= self.max__dash__size)"))
    path = "/apis/example.com/v1/namespaces/default/tenants"

    def tenant(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "example.com/v1", "kind": "Tenant", "metadata": {"name": name}, "spec": spec}
    code, body, _ = await http.call("POST", path, tenant("a", namespace="team-a", **{"max-size": 4},
                                                         quotas={"cpu": 2}))
    assert code == 201, body
    for bad in (tenant("b", namespace="other", **{"max-size": 4}), tenant("c", namespace="team-c", **{"max-size": 40}),
                tenant("d", namespace="team-d", **{"max-size": 4}, quotas={"cpu": 9})):
        code, body, _ = await http.call("POST", path, bad)
        assert code == 422 and "tenant rules" in body["message"], body


async def test_cel_rules_over_their_cost_budget_refuse_the_definition(rest: APIServer, http: Rest) -> None:
    """Upstream's estimated cost limits: a quadratic rule over a list with no maxItems is
    refused when the CRD is written; the same rule over bounded lists is accepted."""
    def crd(tags: dict[str, Any]) -> dict[str, Any]:
        return _crd("labelsets", "LabelSet", schema={"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"tags": tags},
            "x-kubernetes-validations": [{"rule": "self.tags.all(x, self.tags.exists_one(y, y == x))",
                                          "message": "tags must be unique"}]}}})
    post = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    code, body, _ = await http.call("POST", post, crd({"type": "array", "items": {"type": "string"}}))
    assert code == 422, body
    rule = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    assert f"{rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying " \
           "the rule(s), or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are " \
           "declared)" in body["message"]
    assert "spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost " \
           "total for entire OpenAPIv3 schema exceeds budget" in body["message"]
    bounded = {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 63}}
    await _define(http, crd(bounded))
    code, body, _ = await http.call("POST", "/apis/example.com/v1/namespaces/default/labelsets",
                                    {"apiVersion": "example.com/v1", "kind": "LabelSet", "metadata": {"name": "l"},
                                     "spec": {"tags": ["a", "b", "a"]}})
    assert code == 422 and "tags must be unique" in body["message"]


async def test_status_and_scale_subresources(rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """CustomResourceDefinition status/scale subresources: spec and status written apart,
    generation moved by spec changes only, `kubectl scale` through specReplicasPath."""
    await _define(http, _widgets())
    code, body, _ = await http.call("POST", WIDGETS, {**_widget("w"), "status": {"phase": "ignored"}})
    assert code == 201 and "status" not in body and body["metadata"]["generation"] == 1
    body["status"] = {"phase": "Running", "replicas": 1, "selector": "app=w"}
    code, body, _ = await http.call("PUT", f"{WIDGETS}/w/status", body)
    assert code == 200 and body["status"]["phase"] == "Running" and body["metadata"]["generation"] == 1
    body["spec"]["size"] = 4
    body["status"] = {"phase": "overwritten?"}
    code, body, _ = await http.call("PUT", f"{WIDGETS}/w", body)
    assert code == 200 and body["spec"]["size"] == 4 and body["status"]["phase"] == "Running"
    assert body["metadata"]["generation"] == 2
    code, body, _ = await http.call("PATCH", f"{WIDGETS}/w", {"metadata": {"labels": {"a": "b"}}},
                                    content_type="application/merge-patch+json")
    assert code == 200 and body["metadata"]["generation"] == 2  # metadata is no spec change

    code, scale, _ = await http.call("GET", f"{WIDGETS}/w/scale")
    assert code == 200 and scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    assert scale["status"] == {"replicas": 1, "selector": "app=w"}
    kubectl = _kubectl(rest, tmp_path)
    _, out, _ = await kubectl("scale", "widget", "w", "--replicas=4")
    assert "widget.example.com/w scaled" in out
    code, body, _ = await http.call("GET", f"{WIDGETS}/w")
    assert body["spec"]["replicas"] == 4
    code, body, _ = await http.call("PUT", f"{WIDGETS}/w/scale", {**scale, "spec": {"replicas": 9}})
    assert code == 409  # the Scale read before kubectl scaled: its resourceVersion is a precondition
    _, scale, _ = await http.call("GET", f"{WIDGETS}/w/scale")
    code, body, _ = await http.call("PUT", f"{WIDGETS}/w/scale", {**scale, "spec": {"replicas": 9}})
    assert code == 422 and "replicas must not exceed limit" in body["message"]  # the object's rules still judge

    code, body, _ = await http.call("PATCH", f"{WIDGETS}/w", {"spec": {"size": 5}},
                                    content_type="application/strategic-merge-patch+json")
    assert code == 415 and body["reason"] == "UnsupportedMediaType"
    assert "application/merge-patch+json" in body["message"] and "strategic" not in body["message"]


async def test_kubectl_columns_selectors_explain_and_server_side_apply(rest: APIServer, http: Rest,
                                                                       tmp_path: Path) -> None:
    await _define(http, _widgets())
    for name, color in (("one", "red"), ("two", "green")):
        code, body, _ = await http.call("POST", WIDGETS, _widget(name, color=color))
        assert code == 201, body
    kubectl = _kubectl(rest, tmp_path)
    _, out, _ = await kubectl("get", "widgets")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "COLOR", "AGE"]
    assert lines[1].split()[:3] == ["one", "3", "red"]
    _, out, _ = await kubectl("get", "wd", "-o", "wide")
    assert out.splitlines()[0].split() == ["NAME", "SIZE", "COLOR", "PHASE", "AGE"]
    _, out, _ = await kubectl("get", "widgets", "--field-selector", "spec.color=green", "-o", "name")
    assert out.split() == ["widget.example.com/two"]
    _, out, _ = await kubectl("get", "all", "-o", "name")
    assert "widget.example.com/one" in out.split()
    code, body, _ = await http.call("GET", WIDGETS, query={"fieldSelector": "spec.size=3"})
    assert code == 400 and 'field label not supported: "spec.size"' in body["message"]

    _, out, _ = await kubectl("explain", "widget.spec")
    assert "size" in out and "color" in out and "<integer>" in out
    # OpenAPI v2 too (gnostic protobuf, as client-go asks for it), built-in kinds and this one
    _, out, _ = await kubectl("explain", "widget.spec", "--output=plaintext-openapiv2")
    assert "size" in out and "color" in out and "<integer>" in out
    _, out, _ = await kubectl("explain", "deployment.spec.strategy.rollingUpdate", "--output=plaintext-openapiv2")
    assert "maxSurge\t<string>" in out and "VERSION:  apps/v1" in out  # int-or-string: a string in v2
    code, swagger, _ = await http.call("GET", "/openapi/v2")
    assert code == 200 and swagger["swagger"] == "2.0"
    widget = swagger["definitions"]["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [{"group": "example.com", "version": "v1", "kind": "Widget"}]
    assert widget["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    pod = swagger["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["properties"]["spec"]["$ref"].startswith("#/definitions/")
    create = swagger["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"]["post"]
    assert {"name": "body", "in": "body", "required": True,
            "schema": {"$ref": "#/definitions/com.example.v1.Widget"}} in create["parameters"]

    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump(_widget("three", color="green")))
    _, out, _ = await kubectl("apply", "--server-side", "-f", str(manifest))
    assert "widget.example.com/three serverside-applied" in out
    code, live, _ = await http.call("GET", f"{WIDGETS}/three")
    assert any(m["manager"] == "kubectl" and m["operation"] == "Apply" for m in live["metadata"]["managedFields"])
    await kubectl("patch", "widget", "three", "--type=merge", "-p", '{"spec":{"color":"red"}}')
    code, out, err = await kubectl("apply", "--server-side", "-f", str(manifest), ok=False)
    assert code != 0 and "conflict" in (out + err).lower() and ".spec.color" in out + err
    _, out, _ = await kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    code, live, _ = await http.call("GET", f"{WIDGETS}/three")
    assert live["spec"]["color"] == "green"
    _, out, _ = await kubectl("diff", "-f", str(manifest), ok=False)


async def test_versions_served_one_stored_and_deprecation(rest: APIServer, http: Rest) -> None:
    """Several versions, None conversion: written as one, read as the other (apiVersion
    rewritten), stored in the storage version; a deprecated version warns."""
    schema = {"type": "object",
              "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    crd = _crd("boxes", "Box", versions=[
        {"name": "v1beta1", "served": True, "storage": False, "deprecated": True,
         "deprecationWarning": "example.com/v1beta1 Box is going away", "schema": {"openAPIV3Schema": schema}},
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}])
    await _define(http, crd)
    code, listed, _ = await http.call("GET", "/apis/example.com")
    assert listed["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in listed["versions"]] == ["v1", "v1beta1"]
    code, body, headers = await http.call("POST", "/apis/example.com/v1beta1/namespaces/default/boxes",
                                          {"apiVersion": "example.com/v1beta1", "kind": "Box",
                                           "metadata": {"name": "b"}, "spec": {"x": 1}})
    assert code == 201 and body["apiVersion"] == "example.com/v1beta1"
    assert "example.com/v1beta1 Box is going away" in headers.get("Warning", "")
    code, body, headers = await http.call("GET", "/apis/example.com/v1/namespaces/default/boxes/b")
    assert code == 200 and body["apiVersion"] == "example.com/v1" and body["spec"] == {"x": 1}
    assert "Warning" not in headers
    kv, _ = await next(iter(rest.registries.values())).storage.get(
        f"{rest.config.etcd_prefix}/example.com/boxes/default/b".encode())
    assert kv is not None and json.loads(kv.value)["apiVersion"] == "example.com/v1"


async def test_cluster_scoped_custom_resources_and_namespace_deletion(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] Namespaces: deleting a namespace deletes its custom resources;
    cluster-scoped ones live outside namespaces."""
    await _define(http, _crd("regions", "Region", scope="Cluster"))
    await _define(http, _crd("tenants", "Tenant"))
    code, body, _ = await http.call("POST", "/apis/example.com/v1/regions",
                                    {"apiVersion": "example.com/v1", "kind": "Region", "metadata": {"name": "eu"}})
    assert code == 201 and "namespace" not in body["metadata"]
    code, _, _ = await http.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    assert code == 201
    code, body, _ = await http.call("POST", "/apis/example.com/v1/namespaces/team/tenants",
                                    {"apiVersion": "example.com/v1", "kind": "Tenant", "metadata": {"name": "t"}})
    assert code == 201, body
    code, _, _ = await http.call("DELETE", "/api/v1/namespaces/team")
    assert code == 200
    await until(lambda: http.call("GET", "/api/v1/namespaces/team"), timeout=20, what="namespace team gone",
                check=lambda answer: answer[0] == 404)
    code, body, _ = await http.call("GET", "/apis/example.com/v1/tenants")
    assert code == 200 and body["items"] == []
    code, body, _ = await http.call("GET", "/apis/example.com/v1/regions/eu")
    assert code == 200


async def test_the_official_client_custom_objects_and_dynamic_client(rest: APIServer, http: Rest,
                                                                      tmp_path: Path) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes import dynamic as k8s_dynamic

    await _define(http, _widgets())
    api_client = k8s_config.new_client_from_config(str(write_kubeconfig(tmp_path / "kc", rest.rest_address)))
    custom = k8s.CustomObjectsApi(api_client)
    created: Any = await asyncio.to_thread(custom.create_namespaced_custom_object, "example.com", "v1", "default",
                                           "widgets", _widget("py"))
    assert created["spec"]["color"] == "red"
    listed: Any = await asyncio.to_thread(custom.list_namespaced_custom_object, "example.com", "v1", "default",
                                          "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["py"]
    patched: Any = await asyncio.to_thread(custom.patch_namespaced_custom_object_status, "example.com", "v1",
                                           "default", "widgets", "py", {"status": {"phase": "Done"}})
    assert patched["status"]["phase"] == "Done"
    # its discovery cache in the test's directory (by default a file in /tmp, left behind)
    dyn = await asyncio.to_thread(k8s_dynamic.DynamicClient, api_client, str(tmp_path / "discovery.json"))
    widgets = await asyncio.to_thread(dyn.resources.get, api_version="example.com/v1", kind="Widget")
    got = await asyncio.to_thread(widgets.get, name="py", namespace="default")
    assert got.spec.size == 3 and got.status.phase == "Done"
    await asyncio.to_thread(custom.delete_namespaced_custom_object, "example.com", "v1", "default", "widgets", "py")


async def test_grpc_dynamic_client(rest: APIServer, http: Rest) -> None:
    """The project's own client reaches custom resources over the CustomResources service."""
    from kubeling import dynamic, errors
    from kubeling.client import Client

    await _define(http, _widgets())
    async with Client(rest.address) as c:
        widgets = c.dynamic("example.com/v1", "widgets", "Widget")
        created = await widgets.create(dynamic.new(_widget("g", color="green")))
        assert dynamic.content_of(created)["spec"]["color"] == "green" and created.metadata.resourceVersion
        events = widgets.watch(resource_version=created.metadata.resourceVersion)
        obj = dynamic.new(_widget("g", size=5))
        obj.metadata.resourceVersion = created.metadata.resourceVersion
        updated = await widgets.update(obj)
        assert dynamic.content_of(updated)["spec"]["size"] == 5
        event = await anext(aiter(events))
        assert event.type == "MODIFIED" and dynamic.to_dict(event.object)["spec"]["size"] == 5
        with pytest.raises(errors.Invalid) as refused:
            await widgets.create(dynamic.new(_widget("bad", size=0)))
        assert "spec.size in body should be greater than or equal to 1" in refused.value.message
        listed = await widgets.list()
        assert [o.metadata.name for o in listed.items] == ["g"]
        crds = await c.customresourcedefinitions.list()
        assert [o.metadata.name for o in crds.items] == ["widgets.example.com"]
        await widgets.delete("g")
        with pytest.raises(errors.NotFound):
            await c.dynamic("example.com/v9", "widgets").get("g")


async def test_bad_custom_resources_are_refused_and_the_server_serves_on(rest: APIServer, http: Rest) -> None:
    await _define(http, _widgets())
    big = _widget("big", extra={"blob": "x" * (10 * 1024 * 1024)})
    code, body, _ = await http.call("POST", WIDGETS, big)
    assert code == 413
    code, body, _ = await http.call("POST", WIDGETS, "{not json")
    assert code == 400
    code, body, _ = await http.call("POST", WIDGETS, ["a", "list"])
    assert code == 400
    code, body, _ = await http.call("POST", WIDGETS, {**_widget("k"), "kind": "Gadget"})
    assert code == 400 and "this endpoint takes example.com/v1/Widget" in body["message"]
    code, body, _ = await http.call("POST", WIDGETS, {**_widget("m"), "metadata": {"name": "m", "labels": ["x"]}})
    assert code == 400 and "metadata.labels" in body["message"]
    code, body, _ = await http.call("POST", WIDGETS, _widget("ok"))
    assert code == 201


# ------------------------------------------------------------------ conversion webhooks

class ConversionWebhook:
    """A conversion webhook as users write one, over TLS with its own CA: Endpoint v1
    (spec.hostPort "h:p") <-> v2 (spec.host, spec.port). `mode` makes it misbehave."""

    def __init__(self, pki_dir: Path) -> None:
        from kubeling import pki
        pki.ensure(pki_dir, {}, ["127.0.0.1"])
        self.ca = (pki_dir / "ca.crt").read_bytes()
        self.cert, self.key = pki_dir / "apiserver.crt", pki_dir / "apiserver.key"
        self.mode = "ok"
        self.reviews: list[dict[str, Any]] = []
        self.runner: Any = None
        self.port = 0

    async def start(self) -> None:
        import ssl

        from aiohttp import web
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        app = web.Application()
        app.router.add_post("/convert", self._convert)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _convert(self, request: Any) -> Any:
        from aiohttp import web
        review = await request.json()
        self.reviews.append(review)
        req = review["request"]
        if self.mode == "slow":
            await asyncio.sleep(5)
        if self.mode == "garbage":
            return web.Response(text="<html>not a review</html>")
        out = []
        for obj in req["objects"]:
            obj = json.loads(json.dumps(obj))
            spec = obj.get("spec") or {}
            if req["desiredAPIVersion"] == "example.com/v2" and "hostPort" in spec:
                host, _, port = spec.pop("hostPort").partition(":")
                spec.update(host=host, port=int(port))
            elif req["desiredAPIVersion"] == "example.com/v1" and "host" in spec:
                spec["hostPort"] = f"{spec.pop('host')}:{spec.pop('port')}"
            obj["apiVersion"] = req["desiredAPIVersion"]
            obj.setdefault("metadata", {}).setdefault("labels", {})["converted"] = "yes"
            if self.mode == "rename":
                obj["metadata"]["name"] = "someone-else"
            out.append(obj)
        return web.json_response({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                                  "response": {"uid": req["uid"], "result": {"status": "Success"},
                                               "convertedObjects": out}})


@pytest.fixture
async def webhook(tmp_path: Path) -> Any:
    hook = ConversionWebhook(tmp_path / "webhook-pki")
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def _endpoints_crd(hook: ConversionWebhook) -> dict[str, Any]:
    import base64
    v1 = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "hostPort": {"type": "string"}}}}}
    v2 = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "host": {"type": "string"}, "port": {"type": "integer", "maximum": 65535}}}}}
    crd = _crd("endpoints", "Endpoint", versions=[
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": v1}},
        {"name": "v2", "served": True, "storage": False, "schema": {"openAPIV3Schema": v2}}])
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1", "v1beta1"],
        "clientConfig": {"url": f"https://127.0.0.1:{hook.port}/convert",
                         "caBundle": base64.b64encode(hook.ca).decode()}}}
    return crd


async def test_conversion_webhook_between_versions(rest: APIServer, http: Rest, webhook: ConversionWebhook,
                                                   tmp_path: Path) -> None:
    """[sig-api-machinery] CustomResourceConversionWebhook should convert a non homogeneous
    list of CRs / a custom resource: written as v1, read as v2 and back, stored as v1."""
    await _define(http, _endpoints_crd(webhook))
    v1, v2 = "/apis/example.com/v1/namespaces/default/endpoints", "/apis/example.com/v2/namespaces/default/endpoints"
    code, body, _ = await http.call("POST", v1, {"apiVersion": "example.com/v1", "kind": "Endpoint",
                                                 "metadata": {"name": "a"}, "spec": {"hostPort": "db:5432"}})
    assert code == 201, body
    code, body, _ = await http.call("GET", f"{v2}/a")
    assert code == 200, body
    assert body["apiVersion"] == "example.com/v2" and body["spec"] == {"host": "db", "port": 5432}
    assert body["metadata"]["labels"] == {"converted": "yes"}  # labels may change; uid, name may not
    assert webhook.reviews[-1]["apiVersion"] == "apiextensions.k8s.io/v1"
    # written as v2: converted to the storage version
    code, body, _ = await http.call("POST", v2, {"apiVersion": "example.com/v2", "kind": "Endpoint",
                                                 "metadata": {"name": "b"}, "spec": {"host": "web", "port": 80}})
    assert code == 201 and body["spec"] == {"host": "web", "port": 80}, body
    kv, _ = await next(iter(rest.registries.values())).storage.get(
        f"{rest.config.etcd_prefix}/example.com/endpoints/default/b".encode())
    assert kv is not None and json.loads(kv.value)["apiVersion"] == "example.com/v1"
    assert json.loads(kv.value)["spec"] == {"hostPort": "web:80"}
    code, listed, _ = await http.call("GET", v2)  # a list: every item converted
    assert {i["metadata"]["name"]: i["spec"]["port"] for i in listed["items"]} == {"a": 5432, "b": 80}
    # validated in the request's version, before conversion
    code, body, _ = await http.call("POST", v2, {"apiVersion": "example.com/v2", "kind": "Endpoint",
                                                 "metadata": {"name": "c"}, "spec": {"host": "x", "port": 70000}})
    assert code == 422 and "spec.port in body should be less than or equal to 65535" in body["message"]
    # kubectl reads the version it is told
    kubectl = _kubectl(rest, tmp_path)
    _, out, _ = await kubectl("get", "endpoints.v2.example.com", "a", "-o", "jsonpath={.spec.host}")
    assert out == "db"
    # a watch in v2 sees v1 writes converted
    async with http.session.get(http.base + v2, params={"watch": "true", "resourceVersion": listed["metadata"][
            "resourceVersion"]}) as resp:
        code, _, _ = await http.call("PATCH", f"{v1}/a", {"spec": {"hostPort": "db:6543"}},
                                     content_type="application/merge-patch+json")
        assert code == 200
        line = json.loads(await resp.content.readline())
        assert line["type"] == "MODIFIED" and line["object"]["spec"] == {"host": "db", "port": 6543}


async def test_conversion_webhook_failures_are_clear_and_nothing_is_stored(
        etcd: Any, prefix: str, webhook: ConversionWebhook) -> None:
    from tests.conftest import apiserver_config
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0", conversion_webhook_timeout=1.0))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            http = Rest(server, session)
            await _define(http, _endpoints_crd(webhook))
            v2 = "/apis/example.com/v2/namespaces/default/endpoints"
            item = {"apiVersion": "example.com/v2", "kind": "Endpoint", "metadata": {"name": "x"},
                    "spec": {"host": "h", "port": 1}}
            for mode, wanted in (("slow", "context deadline exceeded"), ("garbage", "the answer is not JSON"),
                                 ("rename", "must have the same name: x != someone-else")):
                webhook.mode = mode
                code, body, _ = await http.call("POST", v2, item)
                assert code == 500 and body["reason"] == "InternalError", (mode, body)
                assert "conversion webhook for example.com/v2, Kind=Endpoint" in body["message"], body
                assert wanted in body["message"], (mode, body["message"])
            webhook.mode = "ok"
            code, listed, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/endpoints")
            assert code == 200 and listed["items"] == []  # nothing stored half-way
            code, body, _ = await http.call("POST", v2, item)
            assert code == 201, body  # and the server serves on
    finally:
        await server.stop(grace=0)


# ------------------------------------------------------------------ every apiserver, and restarts

async def test_every_apiserver_on_the_etcd_serves_and_a_restart_loses_nothing(etcd: EtcdServer,
                                                                             prefix: str) -> None:
    """A CRD written through one apiserver is served by another on the same etcd (its
    watch of definitions), custom resources written through either are seen by both, and
    an apiserver started afresh serves every definition and object from etcd."""
    first = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0"))
    second = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0"))
    await first.start()
    await second.start()
    try:
        async with aiohttp.ClientSession() as session:
            one, two = Rest(first, session), Rest(second, session)
            await _define(one, _widgets())
            await until(lambda: two.call("GET", WIDGETS), timeout=20, what="the second apiserver serving widgets",
                        check=lambda answer: answer[0] == 200)
            code, body, _ = await two.call("POST", WIDGETS, _widget("from-two"))
            assert code == 201, body
            code, body, _ = await one.call("POST", WIDGETS, _widget("from-one", color="green"))
            assert code == 201, body

            async def both_listed(rest: Rest) -> list[str] | None:
                _, listed, _ = await rest.call("GET", WIDGETS)
                found = sorted(i["metadata"]["name"] for i in listed.get("items", []))
                return found if found == ["from-one", "from-two"] else None
            await until(lambda: both_listed(one), timeout=10, what="both widgets listed by the first")
            await until(lambda: both_listed(two), timeout=10, what="both widgets listed by the second")
        await first.stop(grace=0)
        await second.stop(grace=0)
        third = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0"))
        await third.start()
        try:
            async with aiohttp.ClientSession() as session:
                fresh = Rest(third, session)
                await _established(fresh, "widgets.example.com")
                listed = await until(lambda: both_listed(fresh), timeout=20, what="widgets served after a restart")
                assert listed == ["from-one", "from-two"]
                code, body, _ = await fresh.call("GET", f"{WIDGETS}/from-one")
                assert code == 200 and body["spec"] == {"size": 3, "color": "green", "replicas": 1, "limit": 5}
                code, body, _ = await fresh.call("POST", WIDGETS, _widget("f", replicas=9))
                assert code == 422  # the schema and its rules came back with the definition
        finally:
            await third.stop(grace=0)
    finally:
        await first.stop(grace=0)
        await second.stop(grace=0)


# ------------------------------------------------------------------ upstream's conformance tests
# One each, named after its testname in test/conformance/testdata/conformance.yaml (the
# behaviours above already cover more of them; docs/conformance.md maps every one).

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"


async def test_custom_resource_definition_conversion_webhook_convert_mixed_version_list(
        rest: APIServer, http: Rest, webhook: ConversionWebhook) -> None:
    """[sig-api-machinery] CustomResourceConversionWebhook should be able to convert a non
    homogeneous list of CRs: one stored at v1, the storage version moved to v2, one stored
    at v2; both listed at v2 (and at v1), each converted as it was stored."""
    crd = await _define(http, _endpoints_crd(webhook))
    v1, v2 = "/apis/example.com/v1/namespaces/default/endpoints", "/apis/example.com/v2/namespaces/default/endpoints"
    code, body, _ = await http.call("POST", v1, {"apiVersion": "example.com/v1", "kind": "Endpoint",
                                                 "metadata": {"name": "old"}, "spec": {"hostPort": "db:5432"}})
    assert code == 201, body
    versions = crd["spec"]["versions"]
    versions[0]["storage"], versions[1]["storage"] = False, True
    code, body, _ = await http.call("PUT", f"{CRDS}/endpoints.example.com", crd)
    assert code == 200, body

    async def stored_at_v2() -> bool:
        # until the changed definition is served, a create still stores v1: made again then
        code, _, _ = await http.call("POST", v2, {"apiVersion": "example.com/v2", "kind": "Endpoint",
                                                  "metadata": {"name": "new"}, "spec": {"host": "web", "port": 80}})
        assert code == 201, code
        kv, _ = await next(iter(rest.registries.values())).storage.get(
            f"{rest.config.etcd_prefix}/example.com/endpoints/default/new".encode())
        if kv is not None and json.loads(kv.value)["apiVersion"] == "example.com/v2":
            return True
        code, _, _ = await http.call("DELETE", f"{v2}/new")
        assert code == 200, code
        await until(lambda: http.call("GET", f"{v2}/new"), timeout=10, what="new deleted",
                    check=lambda answer: answer[0] == 404)
        return False
    await until(stored_at_v2, timeout=20, what="a custom resource stored at v2")
    kv, _ = await next(iter(rest.registries.values())).storage.get(
        f"{rest.config.etcd_prefix}/example.com/endpoints/default/old".encode())
    assert kv is not None and json.loads(kv.value)["apiVersion"] == "example.com/v1"  # left as it was
    code, listed, _ = await http.call("GET", v2)
    assert code == 200 and {i["metadata"]["name"]: i["spec"] for i in listed["items"]} == {
        "old": {"host": "db", "port": 5432}, "new": {"host": "web", "port": 80}}
    assert {i["apiVersion"] for i in listed["items"]} == {"example.com/v2"}
    code, listed, _ = await http.call("GET", v1)
    assert {i["metadata"]["name"]: i["spec"] for i in listed["items"]} == {
        "old": {"hostPort": "db:5432"}, "new": {"hostPort": "web:80"}}
    # an update of the object stored at v1 starts from it converted, and stores v2
    code, body, _ = await http.call("PATCH", f"{v2}/old", {"spec": {"port": 6543}}, content_type=MERGE)
    assert code == 200 and body["spec"] == {"host": "db", "port": 6543}, body
    kv, _ = await next(iter(rest.registries.values())).storage.get(
        f"{rest.config.etcd_prefix}/example.com/endpoints/default/old".encode())
    assert kv is not None and json.loads(kv.value)["apiVersion"] == "example.com/v2"


async def test_custom_resource_definition_watch(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition Watch watch on custom resource
    definition objects: a watch sees the custom resources added, modified and deleted."""
    await _define(http, _crd("noxus", "Noxu", schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True}))
    path = "/apis/example.com/v1/namespaces/default/noxus"
    _, listed, _ = await http.call("GET", path)
    async with http.session.get(http.base + path, params={"watch": "1", "resourceVersion":
                                                          listed["metadata"]["resourceVersion"]}) as resp:
        for name in ("name1", "name2"):
            code, _, _ = await http.call("POST", path, {"apiVersion": "example.com/v1", "kind": "Noxu",
                                                        "metadata": {"name": name}, "content": {"key": "value"}})
            assert code == 201
        code, _, _ = await http.call("PATCH", f"{path}/name1", {"dummy": "test"}, content_type=MERGE)
        assert code == 200
        code, _, _ = await http.call("DELETE", f"{path}/name1")
        assert code == 200
        seen = [json.loads(await resp.content.readline()) for _ in range(4)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "name1"), ("ADDED", "name2"), ("MODIFIED", "name1"), ("DELETED", "name1")]
    assert seen[2]["object"]["dummy"] == "test" and seen[0]["object"]["kind"] == "Noxu"


async def test_custom_resource_definition_create(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition resources Simple CustomResourceDefinition
    creating/deleting custom resource definition objects works."""
    await _define(http, _crd("noxus", "Noxu"))
    code, _, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/noxus")
    assert code == 200
    code, body, _ = await http.call("DELETE", f"{CRDS}/noxus.example.com")
    assert code == 200, body
    await until(lambda: http.call("GET", f"{CRDS}/noxus.example.com"), timeout=20, what="the CRD gone",
                check=lambda answer: answer[0] == 404)
    code, _, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/noxus")
    assert code == 404  # no longer served


async def test_custom_resource_definition_status_sub_resource(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition resources Simple CustomResourceDefinition
    getting/updating/patching custom resource definition status sub-resource works."""
    await _define(http, _crd("noxus", "Noxu"))
    status = f"{CRDS}/noxus.example.com/status"
    code, crd, _ = await http.call("GET", status)
    assert code == 200 and crd["kind"] == "CustomResourceDefinition" and crd["status"]["conditions"]
    crd["status"]["conditions"].append({"type": "StatusUpdated", "status": "True", "reason": "E2E",
                                        "message": "Set from an e2e test", "lastTransitionTime": None})
    code, crd, _ = await http.call("PUT", status, crd)
    assert code == 200, crd
    code, crd, _ = await http.call("PATCH", status, {"status": {"conditions": [
        *crd["status"]["conditions"], {"type": "StatusPatched", "status": "True", "reason": "E2E",
                                       "message": "Set from an e2e test"}]}}, content_type=MERGE)
    assert code == 200, crd
    _, crd, _ = await http.call("GET", f"{CRDS}/noxus.example.com")
    types = [c["type"] for c in crd["status"]["conditions"]]
    assert "StatusUpdated" in types and "StatusPatched" in types and "Established" in types
    assert crd["spec"]["names"]["kind"] == "Noxu"  # /status writes status only


async def test_custom_resource_definition_list(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition resources Simple CustomResourceDefinition
    listing custom resource definition objects works: by label, and deletecollection by label."""
    for i in range(10):
        crd = _crd(f"noxus{i}", f"Noxu{i}")
        crd["metadata"]["labels"] = {"e2e-list-test-uuid": "u1"}
        code, body, _ = await http.call("POST", CRDS, crd)
        assert code == 201, body
    code, body, _ = await http.call("POST", CRDS, _crd("others", "Other"))
    assert code == 201
    code, listed, _ = await http.call("GET", CRDS, query={"labelSelector": "e2e-list-test-uuid=u1"})
    assert code == 200 and len(listed["items"]) == 10
    code, body, _ = await http.call("DELETE", CRDS, query={"labelSelector": "e2e-list-test-uuid=u1"})
    assert code == 200, body

    async def left() -> list[str] | None:
        _, listed, _ = await http.call("GET", CRDS)
        names = [i["metadata"]["name"] for i in listed["items"]]
        return names if names == ["others.example.com"] else None
    await until(left, timeout=30, what="the labelled definitions gone, the other kept")


async def test_custom_resource_definition_defaulting(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition resources custom resource defaulting for
    requests and from storage works: a default added later shows on what was stored before
    (read from etcd); a default removed stays where it was written."""
    def schema(**defaults: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string", **({"default": defaults["a"]} if "a" in defaults else {})},
            "b": {"type": "string", **({"default": defaults["b"]} if "b" in defaults else {})}}}}}
    await _define(http, _crd("noxus", "Noxu", schema=schema()))
    path = "/apis/example.com/v1/namespaces/default/noxus"
    code, body, _ = await http.call("POST", path, {"apiVersion": "example.com/v1", "kind": "Noxu",
                                                   "metadata": {"name": "foo"}, "spec": {}})
    assert code == 201 and body["spec"] == {}

    async def redefined(**defaults: Any) -> None:
        _, live, _ = await http.call("GET", f"{CRDS}/noxus.example.com")
        live["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema(**defaults)
        code, body, _ = await http.call("PUT", f"{CRDS}/noxus.example.com", live)
        assert code == 200, body
    await redefined(a="A")
    await until(lambda: http.call("GET", f"{path}/foo"), timeout=20, what="foo defaulted from storage",
                check=lambda answer: answer[1].get("spec") == {"a": "A"})
    code, body, _ = await http.call("POST", path, {"apiVersion": "example.com/v1", "kind": "Noxu",
                                                   "metadata": {"name": "bar"}, "spec": {}})
    assert code == 201 and body["spec"] == {"a": "A"}  # defaulted in the request: written so
    await redefined(b="B")
    await until(lambda: http.call("GET", f"{path}/bar"), timeout=20, what="bar's new default",
                check=lambda answer: answer[1].get("spec") == {"a": "A", "b": "B"})
    code, body, _ = await http.call("GET", f"{path}/foo")
    assert body["spec"] == {"b": "B"}  # "a" was only ever defaulted on read


async def test_custom_resource_definition_discovery(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourceDefinition resources should include custom resource
    definition resources in discovery documents."""
    code, groups, _ = await http.call("GET", "/apis")
    group = next(g for g in groups["groups"] if g["name"] == "apiextensions.k8s.io")
    assert group["preferredVersion"]["groupVersion"] == "apiextensions.k8s.io/v1"
    code, group, _ = await http.call("GET", "/apis/apiextensions.k8s.io")
    assert code == 200 and [v["groupVersion"] for v in group["versions"]] == ["apiextensions.k8s.io/v1"]
    code, resources, _ = await http.call("GET", "/apis/apiextensions.k8s.io/v1")
    found = {r["name"]: r for r in resources["resources"]}
    assert found["customresourcedefinitions"]["kind"] == "CustomResourceDefinition"
    assert not found["customresourcedefinitions"]["namespaced"]
    assert "customresourcedefinitions/status" in found


async def _openapi_paths(http: Rest) -> set[str]:
    _, index, _ = await http.call("GET", "/openapi/v3")
    return set(index["paths"])


async def _schemas_of(http: Rest, group_version: str) -> dict[str, Any]:
    code, document, _ = await http.call("GET", f"/openapi/v3/apis/{group_version}")
    assert code == 200, document
    schemas: dict[str, Any] = document["components"]["schemas"]
    return schemas


def _versions_crd(plural: str, kind: str, group: str, *names: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "description": "Specification of "
                                                        f"{kind}", "properties": {"bars": {"type": "array", "items": {
                                                            "type": "object", "properties": {"name": {
                                                                "type": "string"}}}}}}}}
    return _crd(plural, kind, group=group, versions=[
        {"name": v, "served": True, "storage": i == 0, "schema": {"openAPIV3Schema": schema}}
        for i, v in enumerate(names)])


async def test_custom_resource_openapi_publish_varying_groups(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI works for multiple CRDs of different groups."""
    await _define(http, _versions_crd("foos", "Foo", "a.example.com", "v1"))
    await _define(http, _versions_crd("waldos", "Waldo", "b.example.com", "v4"))
    await until(lambda: _openapi_paths(http), timeout=20, what="both groups published",
                check=lambda paths: {"apis/a.example.com/v1", "apis/b.example.com/v4"} <= paths)
    assert "com.example.a.v1.Foo" in await _schemas_of(http, "a.example.com/v1")
    assert "com.example.b.v4.Waldo" in await _schemas_of(http, "b.example.com/v4")


async def test_custom_resource_openapi_publish_varying_versions(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI works for multiple CRDs of same group
    but different versions."""
    await _define(http, _versions_crd("foos", "Foo", "a.example.com", "v2", "v3"))
    await until(lambda: _openapi_paths(http), timeout=20, what="both versions published",
                check=lambda paths: {"apis/a.example.com/v2", "apis/a.example.com/v3"} <= paths)
    assert "com.example.a.v3.Foo" in await _schemas_of(http, "a.example.com/v3")


async def test_custom_resource_openapi_publish_varying_kinds(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI works for multiple CRDs of same group
    and version but different kinds."""
    await _define(http, _versions_crd("foos", "Foo", "a.example.com", "v5"))
    await _define(http, _versions_crd("waldos", "Waldo", "a.example.com", "v5"))

    async def both() -> dict[str, Any] | None:
        schemas = await _schemas_of(http, "a.example.com/v5")
        return schemas if {"com.example.a.v5.Foo", "com.example.a.v5.Waldo"} <= set(schemas) else None
    await until(both, timeout=20, what="both kinds in one document")


async def test_custom_resource_openapi_publish_stop_serving_version(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI removes definition from spec when one
    version gets changed to not be served."""
    crd = await _define(http, _versions_crd("foos", "Foo", "a.example.com", "v5", "v6"))
    await until(lambda: _openapi_paths(http), timeout=20, what="both published",
                check=lambda paths: {"apis/a.example.com/v5", "apis/a.example.com/v6"} <= paths)
    crd["spec"]["versions"][1]["served"] = False
    code, body, _ = await http.call("PUT", f"{CRDS}/foos.a.example.com", crd)
    assert code == 200, body
    await until(lambda: _openapi_paths(http), timeout=20, what="v6 unpublished",
                check=lambda paths: "apis/a.example.com/v6" not in paths and "apis/a.example.com/v5" in paths)


async def test_custom_resource_openapi_publish_version_rename(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI updates the published spec when one
    version gets renamed."""
    await _define(http, _versions_crd("foos", "Foo", "a.example.com", "v2", "v3"))
    await until(lambda: _openapi_paths(http), timeout=20, what="both published",
                check=lambda paths: {"apis/a.example.com/v2", "apis/a.example.com/v3"} <= paths)
    code, body, _ = await http.call("PATCH", f"{CRDS}/foos.a.example.com",
                                    [{"op": "replace", "path": "/spec/versions/1/name", "value": "v4"}],
                                    content_type="application/json-patch+json")
    assert code == 200, body
    await until(lambda: _openapi_paths(http), timeout=20, what="v3 renamed v4",
                check=lambda paths: "apis/a.example.com/v4" in paths and "apis/a.example.com/v3" not in paths)
    assert "com.example.a.v4.Foo" in await _schemas_of(http, "a.example.com/v4")


async def test_custom_resource_openapi_publish_with_validation_schema(rest: APIServer, http: Rest,
                                                                     tmp_path: Path) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI works for CRD with validation schema:
    kubectl accepts valid objects, refuses unknown and missing required properties, and
    explains the kind and its nested properties."""
    schema = {"type": "object", "description": "Foo CRD for Testing", "properties": {
        "spec": {"type": "object", "description": "Specification of Foo", "properties": {
            "bars": {"type": "array", "description": "List of Bars and their specs.", "items": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "description": "Name of Bar."},
                    "age": {"type": "string", "description": "Age of Bar."},
                    "bazs": {"type": "array", "description": "List of Bazs.", "items": {"type": "string"}}}}}}},
        "status": {"type": "object", "description": "Status of Foo", "properties": {
            "bars": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "available": {"type": "boolean"}}}}}}}}
    await _define(http, _crd("foos", "Foo", schema=schema))
    kubectl = _kubectl(rest, tmp_path)
    valid = {"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "test-foo"},
             "spec": {"bars": [{"name": "test-bar"}]}}
    await kubectl("create", "-f", "-", stdin=json.dumps(valid))
    unknown = {**valid, "metadata": {"name": "test-foo-2"}, "spec": {"bars": [{"name": "b", "unknown": 1}]}}
    code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(unknown), ok=False)
    assert code != 0 and 'unknown field "spec.bars[0].unknown"' in err, err
    missing = {**valid, "metadata": {"name": "test-foo-3"}, "spec": {"bars": [{"age": "10"}]}}
    code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(missing), ok=False)
    assert code != 0 and "spec.bars[0].name: Required value" in err, err
    _, out, _ = await kubectl("explain", "foos")
    assert "KIND:" in out and "Foo" in out and "Foo CRD for Testing" in out, out
    _, out, _ = await kubectl("explain", "foos.spec.bars")
    assert "List of Bars and their specs." in out and "name" in out and "-required-" in out, out


async def test_custom_resource_openapi_publish_with_x_kubernetes_preserve_unknown_fields_in_object(
        rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """[sig-api-machinery] CustomResourcePublishOpenAPI works for CRD without validation
    schema (x-kubernetes-preserve-unknown-fields in the top level object), at the schema
    root, and in an embedded object: kubectl accepts unknown properties and explains."""
    kubectl = _kubectl(rest, tmp_path)
    schemas: dict[str, dict[str, Any]] = {
        "roots": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "embeds": {"type": "object", "properties": {"spec": {
            "type": "object", "description": "Specification of Waldo", "properties": {"dummy": {
                "type": "object", "description": "Dummy property.", "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-embedded-resource": True}}}}}}
    for plural, schema in schemas.items():
        await _define(http, _crd(plural, plural.capitalize()[:-1], schema=schema))
    anything = {"apiVersion": "example.com/v1", "kind": "Root", "metadata": {"name": "r"},
                "spec": {"a": {"b": [1, 2]}}, "free": "form"}
    await kubectl("create", "-f", "-", stdin=json.dumps(anything))
    anything["spec"] = {"changed": True}
    await kubectl("apply", "-f", "-", stdin=json.dumps(anything))
    _, out, _ = await kubectl("explain", "roots")
    assert "KIND:" in out and "Root" in out and "DESCRIPTION:" in out, out
    embedded = {"apiVersion": "example.com/v1", "kind": "Embed", "metadata": {"name": "e"},
                "spec": {"dummy": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "inner"},
                                   "anything": {"goes": 1}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(embedded))
    code, body, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/embeds/e")
    assert body["spec"]["dummy"]["anything"] == {"goes": 1}
    _, out, _ = await kubectl("explain", "embeds.spec.dummy")
    assert "Dummy property." in out, out


async def test_server_side_field_validation_unknown_fields_cr_no_validation_schema(rest: APIServer,
                                                                                  http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should create/apply a CR with unknown fields for
    CRD with no validation schema."""
    await _define(http, _crd("noxus", "Noxu", scope="Cluster",
                             schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True}))
    body = ("apiVersion: example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\n  finalizers:\n  - test-finalizer\n"
            "spec:\n  unknown: uk1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n"
            "    protocol: TCP\n")
    code, created, _ = await http.call("PATCH", "/apis/example.com/v1/noxus/mytest", body, content_type=APPLY,
                                       query={"fieldManager": "field_validation_mgr", "fieldValidation": "Strict"})
    assert code == 201 and created["spec"]["unknown"] == "uk1", created


_PORTS_SCHEMA: dict[str, Any] = {
    "type": "array", "x-kubernetes-list-map-keys": ["containerPort", "protocol"], "x-kubernetes-list-type": "map",
    "items": {"type": "object", "required": ["containerPort", "protocol"], "properties": {
        "containerPort": {"type": "integer", "format": "int32"}, "hostIP": {"type": "string"},
        "hostPort": {"type": "integer", "format": "int32"}, "name": {"type": "string"},
        "protocol": {"type": "string"}}}}


def _noxus(**spec_extra: Any) -> dict[str, Any]:
    spec = {"type": "object", "properties": {
        "foo": {"type": "string"},
        "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
        "ports": _PORTS_SCHEMA, **spec_extra.pop("properties", {})}, **spec_extra}
    return _crd("noxus", "Noxu", scope="Cluster", schema={"type": "object", "properties": {"spec": spec}})


_MYTEST = ("apiVersion: example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\n  finalizers:\n  - test-finalizer\n"
           "{extra}spec:\n  foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n"
           "    protocol: TCP\n")


async def _apply_strict(http: Rest, body: str) -> tuple[int, Any]:
    code, answer, _ = await http.call("PATCH", "/apis/example.com/v1/noxus/mytest", body, content_type=APPLY,
                                      query={"fieldManager": "field_validation_mgr", "fieldValidation": "Strict"})
    return code, answer


async def test_server_side_field_validation_valid_cr_with_validation_schema(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should create/apply a valid CR for CRD with validation schema."""
    await _define(http, _noxus())
    code, answer = await _apply_strict(http, _MYTEST.format(extra=""))
    assert code == 201 and answer["spec"]["ports"] == [{"name": "x", "containerPort": 80, "protocol": "TCP"}], answer


async def test_server_side_field_validation_unknown_fields_cr_fails_validation(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should create/apply an invalid CR with extra
    properties for CRD with validation schema."""
    await _define(http, _noxus())
    code, answer = await _apply_strict(http, _MYTEST.format(extra="unknownField: unknown\n"))
    assert code == 400 and ".unknownField: field not declared in schema" in answer["message"], answer


async def test_server_side_field_validation_unknown_metadata(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should detect unknown metadata fields in both the
    root and embedded object of a CR."""
    template = {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}}}, "spec": {"type": "object"}}}
    await _define(http, _noxus(properties={"template": template}, **{"x-kubernetes-preserve-unknown-fields": True}))
    body = ("apiVersion: example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\n  unknownMeta: unknown\n"
            "  finalizers:\n  - test-finalizer\nspec:\n  template:\n    apiversion: foo/v1\n    kind: Sub\n"
            "    metadata:\n        unknownSubMeta: unknown\n        name: subobject\n        namespace: default\n"
            "  foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n"
            "    protocol: TCP\n")
    code, answer = await _apply_strict(http, body)
    assert code == 400, answer
    assert ".metadata.unknownMeta: field not declared in schema" in answer["message"], answer
    assert ".spec.template.metadata.unknownSubMeta: field not declared in schema" in answer["message"], answer


async def test_server_side_field_validation_cr_duplicates(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should detect duplicates in a CR when preserving
    unknown fields."""
    await _define(http, _noxus(**{"x-kubernetes-preserve-unknown-fields": True}))
    body = ("\napiVersion: example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\n  finalizers:\n  - test-finalizer\n"
            "spec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n"
            "    containerPort: 80\n    protocol: TCP")
    code, answer = await _apply_strict(http, body)
    assert code == 400 and 'line 11: key "foo" already set in map' in answer["message"], answer


async def test_server_side_field_validation_typed_object(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should detect unknown and duplicate fields of a
    typed object (and Warn, the default, says the same in Warning headers)."""
    deployment = ('{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "my-dep", "labels": '
                  '{"app": "nginx"}}, "spec": {"unknownField": "foo", "replicas": 2, "replicas": 3, "selector": '
                  '{"matchLabels": {"app": "nginx"}}, "template": {"metadata": {"labels": {"app": "nginx"}}, '
                  '"spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}')
    path = "/apis/apps/v1/namespaces/default/deployments"
    code, answer, _ = await http.call("POST", path, deployment,
                                      query={"fieldManager": "field_validation_mgr", "fieldValidation": "Strict"})
    assert code == 400 and 'strict decoding error: unknown field "spec.unknownField", duplicate field ' \
                           '"spec.replicas"' in answer["message"], answer
    code, answer, headers = await http.call("POST", path, deployment)
    assert code == 201 and answer["spec"]["replicas"] == 3  # the last one, as Go's decoder keeps
    assert 'duplicate field \\"spec.replicas\\"' in headers.get("Warning", ""), headers


async def test_server_side_field_validation_typed_unknown_metadata(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] FieldValidation should detect unknown metadata fields of a typed object."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "my-dep", "unknownMeta": "foo", "labels": {"app": "nginx"}},
                  "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "template": {
                      "metadata": {"labels": {"app": "nginx"}},
                      "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}
    code, answer, _ = await http.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment,
                                      query={"fieldManager": "field_validation_mgr", "fieldValidation": "Strict"})
    assert code == 400 and 'strict decoding error: unknown field "metadata.unknownMeta"' in answer["message"], answer


_AGGREGATED = {version: f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
               for version in ("v2", "v2beta1")}


async def _aggregated(http: Rest, path: str, version: str = "v2") -> tuple[dict[str, Any], str]:
    async with http.session.get(http.base + path, headers={
            "Accept": f"{_AGGREGATED[version]},application/json"}) as resp:
        assert resp.status == 200
        return json.loads(await resp.read()), resp.headers["Content-Type"]


def _aggregated_resources(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """group/version/resource -> its APIResourceDiscovery."""
    return {f"{g['metadata']['name']}/{v['version']}/{r['resource']}": r
            for g in document["items"] for v in g["versions"] for r in v["resources"]}


async def test_aggregated_discovery_interface(rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """[sig-api-machinery] AggregatedDiscovery should support aggregated discovery
    interface: built-in resources all present, as kubectl reads them."""
    core, _ = await _aggregated(http, "/api")
    named, _ = await _aggregated(http, "/apis")
    resources = {**_aggregated_resources(core), **_aggregated_resources(named)}
    for rt in scheme.BUILTIN:
        assert f"{rt.group}/{rt.version}/{rt.plural}" in resources, rt.plural
    pods = resources["/v1/pods"]
    assert pods["scope"] == "Namespaced" and pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert {s["subresource"] for s in pods["subresources"]} >= {"status", "log", "exec", "binding", "eviction"}
    scale = next(s for s in resources["apps/v1/deployments"]["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert resources["/v1/nodes"]["scope"] == "Cluster" and "no" in resources["/v1/nodes"]["shortNames"]
    _, out, _ = await _kubectl(rest, tmp_path)("api-resources", "--api-group=apps", "-o", "name")
    assert "deployments.apps" in out.split()


async def test_aggregated_discovery_interface_crds(rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """[sig-api-machinery] AggregatedDiscovery should support aggregated discovery interface
    for CRDs: a CRD's resource appears in the discovery document."""
    await _define(http, _widgets())
    named, _ = await _aggregated(http, "/apis")
    widgets = _aggregated_resources(named)["example.com/v1/widgets"]
    assert widgets["responseKind"] == {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert widgets["shortNames"] == ["wd"] and widgets["categories"] == ["all"]
    assert {s["subresource"] for s in widgets["subresources"]} == {"status", "scale"}
    _, out, _ = await _kubectl(rest, tmp_path)("api-resources", "--api-group=example.com", "-o", "name")
    assert out.split() == ["widgets.example.com"]


async def test_aggregated_discovery_endpoint_accept_headers(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] AggregatedDiscovery should support raw aggregated discovery
    endpoint Accept headers: v2 and v2beta1 each answered in its own media type."""
    for version, media in _AGGREGATED.items():
        for path in ("/api", "/apis"):
            document, content_type = await _aggregated(http, path, version)
            assert content_type == media and document["apiVersion"] == f"apidiscovery.k8s.io/{version}"
            assert document["kind"] == "APIGroupDiscoveryList" and document["items"]
    plain = await http.call("GET", "/apis")
    assert plain[0] == 200 and plain[1]["kind"] == "APIGroupList"  # without the header: the plain document


async def test_aggregated_discovery_endpoint_accept_headers_crds(rest: APIServer, http: Rest) -> None:
    """[sig-api-machinery] AggregatedDiscovery should support raw aggregated discovery
    request for CRDs."""
    await _define(http, _crd("noxus", "Noxu", group="agg.example.com"))
    for version in _AGGREGATED:
        named, _ = await _aggregated(http, "/apis", version)
        group = next(g for g in named["items"] if g["metadata"]["name"] == "agg.example.com")
        assert [r["resource"] for v in group["versions"] for r in v["resources"]] == ["noxus"]

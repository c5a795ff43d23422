"""OpenAPI v2 made from the v3 documents: Swagger 2.0's shape, and gnostic's protobuf of it."""

from __future__ import annotations

from typing import Any

import yaml

from apiserver.endpoints.rest.openapi_v2 import swagger, to_gnostic
from apiserver.endpoints.rest.protobuf import wire

_V3 = {"paths": {"/api/v1/namespaces/{namespace}/things": {"post": {
    "operationId": "createThing", "x-kubernetes-action": "post",
    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}],
    "requestBody": {"content": {"*/*": {"schema": {"$ref": "#/components/schemas/x.v1.Thing"}}}, "required": True},
    "responses": {"200": {"description": "OK", "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/x.v1.Thing"}}}}}}}},
       "components": {"schemas": {"x.v1.Thing": {
           "type": "object", "required": ["spec"], "x-kubernetes-group-version-kind": [
               {"group": "x", "version": "v1", "kind": "Thing"}],
           "properties": {
               "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
               "spec": {"type": "object", "nullable": True, "additionalProperties": {"type": "string"},
                        "default": {"a": 1}},
               "items": {"type": "array", "items": {"$ref": "#/components/schemas/x.v1.Item"}},
               "mode": {"type": "string", "enum": ["A", "B"]}}}}}}


def test_swagger_from_v3() -> None:
    doc = swagger({"api/v1": _V3})
    assert doc["swagger"] == "2.0"
    thing = doc["definitions"]["x.v1.Thing"]
    assert thing["properties"]["port"] == {"type": "string", "format": "int-or-string",
                                           "x-kubernetes-int-or-string": True}
    assert "nullable" not in thing["properties"]["spec"]
    assert thing["properties"]["items"]["items"] == {"$ref": "#/definitions/x.v1.Item"}
    post = doc["paths"]["/api/v1/namespaces/{namespace}/things"]["post"]
    assert post["parameters"] == [
        {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": True},
        {"name": "body", "in": "body", "required": True, "schema": {"$ref": "#/definitions/x.v1.Thing"}}]
    assert post["responses"] == {"200": {"description": "OK", "schema": {"$ref": "#/definitions/x.v1.Thing"}}}


def test_gnostic_protobuf_reads_back() -> None:
    document: Any = wire().message_class("openapi.v2.Document").FromString(to_gnostic(swagger({"api/v1": _V3})))
    assert document.swagger == "2.0"
    (named,) = document.definitions.additional_properties
    assert named.name == "x.v1.Thing"
    thing = named.value
    assert list(thing.type.value) == ["object"] and list(thing.required) == ["spec"]
    gvk = {e.name: yaml.safe_load(e.value.yaml) for e in thing.vendor_extension}
    assert gvk["x-kubernetes-group-version-kind"] == [{"group": "x", "version": "v1", "kind": "Thing"}]
    props = {p.name: p.value for p in thing.properties.additional_properties}
    assert props["items"].items.schema[0]._ref == "#/definitions/x.v1.Item"
    assert list(props["spec"].additional_properties.schema.type.value) == ["string"]
    assert yaml.safe_load(props["spec"].default.yaml) == {"a": 1}
    assert [yaml.safe_load(e.yaml) for e in props["mode"].enum] == ["A", "B"]
    assert props["port"].format == "int-or-string"

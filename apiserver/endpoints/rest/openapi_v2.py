"""OpenAPI v2 (/openapi/v2): one Swagger 2.0 document for every group-version, made from
the OpenAPI v3 documents, in JSON or in the protobuf of gnostic's OpenAPI v2 model, which
is what client-go's OpenAPISchema() asks for (`kubectl explain
--output=plaintext-openapiv2`, older kubectl's apply and validation).

The v3 documents' schemas become `definitions` (`#/components/schemas/` references become
`#/definitions/`); what Swagger 2.0 cannot say is left out as upstream's v2 publishing
leaves it out (`anyOf`, `oneOf`, `not`, `nullable`; an int-or-string is `type: string,
format: int-or-string`; an object that keeps unknown fields, any value). Operations
keep their parameters, body and responses. The protobuf document holds the definitions
(what its readers look at), not the paths.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml
from google.protobuf.message import Message

from apiserver.endpoints.discovery import VERSION
from apiserver.endpoints.rest.protobuf import wire

__all__ = ["PROTOBUF_V2", "swagger", "to_gnostic"]

# asked for with "@v1.0", answered with ".v1.0" (an "@" is no MIME token: Go's parser
# refuses it), as kube-openapi does
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_DROPPED = {"anyOf", "oneOf", "not", "nullable"}
# schema keywords that are fields of gnostic's Schema, by their proto names
_SCALARS = {"format": "format", "title": "title", "description": "description", "multipleOf": "multiple_of",
            "maximum": "maximum", "exclusiveMaximum": "exclusive_maximum", "minimum": "minimum",
            "exclusiveMinimum": "exclusive_minimum", "maxLength": "max_length", "minLength": "min_length",
            "pattern": "pattern", "maxItems": "max_items", "minItems": "min_items", "uniqueItems": "unique_items",
            "maxProperties": "max_properties", "minProperties": "min_properties", "discriminator": "discriminator",
            "readOnly": "read_only"}


def _schema(schema: Any) -> Any:
    """A v3 schema as Swagger 2.0 says it."""
    if isinstance(schema, list):
        return [_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        # Swagger 2.0 has no "and any other field": kubectl's v2 validation reads an object's
        # properties as all it may hold, so such a schema is published as any value
        # (upstream's v2 publishing of CRDs drops them alike)
        schema = {k: v for k, v in schema.items() if k not in ("type", "properties", "required",
                                                               "additionalProperties")}
    if schema.get("x-kubernetes-int-or-string"):
        out.update(type="string", format="int-or-string")
    for key, value in schema.items():
        if key in _DROPPED or (key in ("type", "format") and "format" in out and out["format"] == "int-or-string"):
            continue
        if key == "$ref" and isinstance(value, str):
            out[key] = value.replace("#/components/schemas/", "#/definitions/")
        elif key in ("properties", "patternProperties", "definitions") and isinstance(value, dict):
            out[key] = {name: _schema(s) for name, s in value.items()}
        elif key in ("items", "additionalProperties", "allOf"):
            out[key] = _schema(value)
        else:
            out[key] = value
    return out


def _operation(op: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    parameters = []
    for p in op.get("parameters") or []:
        q = {k: v for k, v in p.items() if k != "schema"}
        q.update({k: v for k, v in (p.get("schema") or {}).items() if k in ("type", "uniqueItems")})
        parameters.append(q)
    body = op.get("requestBody")
    if body:
        parameters.append({"name": "body", "in": "body", "required": True,
                           "schema": _schema(_content_schema(body) or {})})
    if parameters:
        out["parameters"] = parameters
    out["responses"] = {}
    for code, response in (op.get("responses") or {}).items():
        answer = {"description": response.get("description", "")}
        schema = _content_schema(response)
        if schema is not None:
            answer["schema"] = _schema(schema)
        out["responses"][code] = answer
    return out


def _content_schema(part: dict[str, Any]) -> Any:
    """The schema of a request body's or response's (first) media type."""
    for media in (part.get("content") or {}).values():
        return media.get("schema")
    return None


def swagger(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One Swagger 2.0 document from the group-versions' OpenAPI v3 documents."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for _, document in sorted(documents.items()):
        for path, item in (document.get("paths") or {}).items():
            paths[path] = {method: _operation(op) for method, op in item.items() if isinstance(op, dict)}
        for name, schema in ((document.get("components") or {}).get("schemas") or {}).items():
            definitions.setdefault(name, _schema(schema))
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": dict(sorted(paths.items())), "definitions": dict(sorted(definitions.items()))}


@functools.cache
def _classes() -> dict[str, type[Message]]:
    w = wire()
    return {name.removeprefix("openapi.v2."): w.message_class(name) for name in w.messages
            if name.startswith("openapi.v2.")}


def _any(value: Any) -> Message:
    return _classes()["Any"](yaml=yaml.safe_dump(value, default_flow_style=False, sort_keys=False))


def _gnostic_schema(schema: dict[str, Any]) -> Message:
    classes = _classes()
    out: Any = classes["Schema"]()
    for key, value in schema.items():
        if key == "$ref":
            out._ref = value
        elif key in _SCALARS:
            setattr(out, _SCALARS[key], value)
        elif key == "type":
            out.type.value.extend(value if isinstance(value, list) else [value])
        elif key == "required":
            out.required.extend(value)
        elif key in ("default", "example"):
            getattr(out, key).CopyFrom(_any(value))
        elif key == "enum":
            out.enum.extend(_any(v) for v in value)
        elif key == "items":
            out.items.schema.extend(_gnostic_schema(s) for s in (value if isinstance(value, list) else [value]))
        elif key == "allOf":
            out.all_of.extend(_gnostic_schema(s) for s in value)
        elif key == "properties":
            for name, s in value.items():
                out.properties.additional_properties.add(name=name).value.CopyFrom(_gnostic_schema(s))
        elif key == "additionalProperties":
            if isinstance(value, bool):
                out.additional_properties.boolean = value
            else:
                out.additional_properties.schema.CopyFrom(_gnostic_schema(value))
        elif key.startswith("x-"):
            out.vendor_extension.add(name=key).value.CopyFrom(_any(value))
    return out


def to_gnostic(document: dict[str, Any]) -> bytes:
    """The Swagger document's definitions in gnostic's openapi.v2.Document protobuf."""
    doc: Any = _classes()["Document"](swagger=document["swagger"])
    doc.info.title, doc.info.version = document["info"]["title"], document["info"]["version"]
    doc.paths.SetInParent()
    for name, schema in document["definitions"].items():
        doc.definitions.additional_properties.add(name=name).value.CopyFrom(_gnostic_schema(schema))
    return doc.SerializeToString()

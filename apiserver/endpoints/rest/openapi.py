"""OpenAPI v3 (/openapi/v3 and a document per group-version; v2 made from them), from the scheme and the
protobuf messages, for what kubectl reads from them: field names and types (`kubectl
explain`), the group-version-kind of each top-level schema, and the strategic-merge
metadata of lists (`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`), from
which kubectl computes its apply patches.

The messages carry Kubernetes' field names, so the schemas have upstream's shape; they
carry no descriptions. A custom resource's schema is its definition's (descriptions
included), with apiVersion, kind and metadata as upstream's builder adds them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from apiserver.endpoints.discovery import VERSION
from apiserver.endpoints.rest.openapi_v2 import swagger, to_gnostic
from kubeling.patches import FIELD_MERGE_KEYS, MERGE_KEYS
from kubeling.scheme import ResourceType, Scheme
from protos.kubeling.v1 import meta_pb2

__all__ = ["OpenAPI", "schemas"]

_TIMESTAMP = "google.protobuf.Timestamp"
_INT_OR_STRING = "kubeling.v1.IntOrString"
_FIELDS_V1 = "kubeling.v1.ManagedFieldsEntry.fieldsV1"
_SCALARS: dict[int, dict[str, str]] = {
    FieldDescriptor.TYPE_STRING: {"type": "string"}, FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_INT32: {"type": "integer", "format": "int32"},
    FieldDescriptor.TYPE_INT64: {"type": "integer", "format": "int64"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "format": "byte"},
}
_SET_LISTS = {"kubeling.v1.ObjectMeta.finalizers"}  # patchStrategy:"merge" on []string


def _name(desc: Descriptor, kinds: dict[str, str]) -> str:
    return kinds.get(desc.full_name) or f"io.kubeling.{desc.full_name.removeprefix('kubeling.')}"


def _field(fd: Any, kinds: dict[str, str], out: dict[str, Any]) -> dict[str, Any]:
    if fd.full_name == _FIELDS_V1:
        return {"type": "object"}
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        return {"type": "object", "additionalProperties": _field(fd.message_type.fields_by_name["value"], kinds, out)}
    if fd.message_type is not None:
        name = fd.message_type.full_name
        if name == _TIMESTAMP:
            item: dict[str, Any] = {"type": "string", "format": "date-time"}
        elif name == _INT_OR_STRING:
            item = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        else:
            _message(fd.message_type, kinds, out)
            item = {"$ref": f"#/components/schemas/{_name(fd.message_type, kinds)}"}
    else:
        item = dict(_SCALARS.get(fd.type, {"type": "string"}))
    if not fd.is_repeated:
        return item
    schema: dict[str, Any] = {"type": "array", "items": item}
    key = FIELD_MERGE_KEYS[fd.full_name] if fd.full_name in FIELD_MERGE_KEYS else MERGE_KEYS.get(fd.name)
    if key and fd.message_type is not None:
        schema.update({"x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": "merge",
                       "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]})
    elif fd.full_name in _SET_LISTS:
        schema.update({"x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"})
    else:
        schema["x-kubernetes-list-type"] = "atomic"
    return schema


def _message(desc: Descriptor, kinds: dict[str, str], out: dict[str, Any]) -> None:
    name = _name(desc, kinds)
    if name in out:
        return
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    out[name] = schema  # before the fields: messages may refer to themselves
    for fd in desc.fields:
        schema["properties"][fd.name] = _field(fd, kinds, out)


# A custom resource's schema (its definition's openAPIV3Schema), None for a built-in.
CustomSchema = Callable[[ResourceType[Any]], dict[str, Any] | None]
Kind = tuple[Descriptor, dict[str, str], str, dict[str, Any] | None]


def schemas(kinds: list[Kind]) -> dict[str, Any]:
    """components.schemas for top-level kinds given as (message, GVK, schema name, the
    custom resource's own schema or None)."""
    names = {desc.full_name: name for desc, _, name, own in kinds if own is None}
    out: dict[str, Any] = {}
    for desc, gvk, name, own in kinds:
        if own is not None:
            meta = meta_pb2.ObjectMeta.DESCRIPTOR
            _message(meta, names, out)
            out[name] = {**own, "type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"$ref": f"#/components/schemas/{_name(meta, names)}"},
                **{k: v for k, v in (own.get("properties") or {}).items() if k != "metadata"}}}
        else:
            _message(desc, names, out)
            out[name]["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                       **out[name]["properties"]}
        out[name]["x-kubernetes-group-version-kind"] = [gvk]
    return out


class OpenAPI:
    """The documents of a scheme's group-versions, built once per scheme generation (they
    follow entries registered at run time)."""

    def __init__(self, scheme: Scheme, custom_schema: CustomSchema | None = None,
                 extra: Callable[[], dict[str, dict[str, Any]]] | None = None) -> None:
        self.scheme = scheme
        self.custom_schema = custom_schema or (lambda r: None)
        self.extra = extra or (lambda: {})  # documents served beside the scheme (extension apiservers')
        self._generation = -1
        self._documents: dict[str, dict[str, Any]] = {}
        self._index: dict[str, Any] = {}
        self._v2: tuple[str, dict[str, Any], bytes] | None = None

    def _fresh(self) -> None:
        if self._generation == self.scheme.generation:
            return
        by_path: dict[str, list[ResourceType[Any]]] = {}
        for rt in self.scheme:
            by_path.setdefault(rt.path_prefix.lstrip("/"), []).append(rt)
        self._documents = {path: _document(path, resources, self.custom_schema)
                           for path, resources in by_path.items()}
        paths = {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={_digest(doc)}"}
                 for path, doc in self._documents.items()}
        self._index = {"paths": paths}
        self._generation = self.scheme.generation

    def index(self) -> dict[str, Any]:
        """/openapi/v3: where each group-version's document is (the hash lets clients cache)."""
        self._fresh()
        extra = self.extra()
        if not extra:
            return self._index
        paths = dict(self._index["paths"])
        for path, doc in extra.items():
            paths.setdefault(path, {"serverRelativeURL": f"/openapi/v3/{path}?hash={_digest(doc)}"})
        return {"paths": paths}

    def document(self, gv_path: str) -> dict[str, Any] | None:
        """/openapi/v3/<api/v1 | apis/<group>/<version>>, None for a group-version not served."""
        self._fresh()
        return self._documents.get(gv_path) or self.extra().get(gv_path)

    def v2(self, protobuf: bool) -> dict[str, Any] | bytes:
        """/openapi/v2: every group-version in one Swagger document, as JSON or gnostic's
        protobuf (made again only when a document changed)."""
        self._fresh()
        documents = {**self.extra(), **self._documents}
        key = _digest({path: _digest(doc) for path, doc in documents.items()})
        if self._v2 is None or self._v2[0] != key:
            document = swagger(documents)
            self._v2 = (key, document, to_gnostic(document))
        return self._v2[2] if protobuf else self._v2[1]


def _digest(document: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:32].upper()


def _document(gv_path: str, resources: list[ResourceType[Any]], custom_schema: CustomSchema) -> dict[str, Any]:
    """One group-version's document: its paths, with the `fieldValidation` query parameter
    and the GVK extension on every write (what kubectl looks for before it leaves validation
    to the server), and the kinds' schemas."""
    paths: dict[str, Any] = {}
    kinds: list[Kind] = []
    field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
                        "description": "Ignore, Warn or Strict: what to do with unknown or duplicate fields"}
    for r in resources:
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        ref = {"$ref": f"#/components/schemas/{schema_name(r)}"}
        body = {"content": {"*/*": {"schema": ref}}, "required": True}
        ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}

        def op(verb: str, action: str, *, with_body: bool = False, r: ResourceType[Any] = r,
               ok: dict[str, Any] = ok, gvk: dict[str, str] = gvk, body: dict[str, Any] = body) -> dict[str, Any]:
            o: dict[str, Any] = {"operationId": f"{verb}{r.kind}", "responses": ok, "x-kubernetes-action": action,
                                 "x-kubernetes-group-version-kind": gvk,
                                 "parameters": [field_validation] if with_body else []}
            if with_body:
                o["requestBody"] = body
            return o

        ns = "/namespaces/{namespace}" if r.namespaced else ""
        collection = f"/{gv_path}{ns}/{r.plural}"
        item = f"{collection}/{{name}}"
        paths[collection] = {"get": op("list", "list"), "post": op("create", "post", with_body=True)}
        paths[item] = {"get": op("read", "get"), "put": op("replace", "put", with_body=True),
                       "patch": op("patch", "patch", with_body=True), "delete": op("delete", "delete")}
        if r.has_status:
            paths[f"{item}/status"] = {"get": op("read", "get"), "put": op("replace", "put", with_body=True),
                                       "patch": op("patch", "patch", with_body=True)}
        if r.custom:
            own = custom_schema(r) or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            kinds.append((r.message.DESCRIPTOR, gvk, schema_name(r), own))
        else:
            kinds.append((r.message.DESCRIPTOR, gvk, schema_name(r), None))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": schemas(kinds)}}


def schema_name(r: ResourceType[Any]) -> str:
    """Upstream's definition name: io.k8s.api.<group's first label, or core>.<version>.<Kind>;
    a custom resource's, its group reversed (com.example.stable.v1.CronTab)."""
    if r.custom:
        return ".".join([*reversed(r.group.split(".")), r.version, r.kind])
    return f"io.k8s.api.{r.group.split('.')[0] or 'core'}.{r.version}.{r.kind}"

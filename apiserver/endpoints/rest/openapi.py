"""OpenAPI v3 schemas generated from the protobuf messages, for what kubectl reads from
them: field names and types (`kubectl explain`), the group-version-kind of each top-level
schema, and the strategic-merge metadata of lists (`x-kubernetes-patch-merge-key`,
`x-kubernetes-patch-strategy`), from which kubectl computes its apply patches.

The messages carry Kubernetes' field names, so the schemas have upstream's shape; they
carry no descriptions.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from apiserver.endpoints.rest.patch import FIELD_MERGE_KEYS, MERGE_KEYS

__all__ = ["schemas"]

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


def schemas(kinds: list[tuple[Descriptor, dict[str, str], str]]) -> dict[str, Any]:
    """components.schemas for top-level kinds given as (message, GVK, schema name)."""
    names = {desc.full_name: name for desc, _, name in kinds}
    out: dict[str, Any] = {}
    for desc, gvk, name in kinds:
        _message(desc, names, out)
        out[name]["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   **out[name]["properties"]}
        out[name]["x-kubernetes-group-version-kind"] = [gvk]
    return out

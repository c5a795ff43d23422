"""Structural schemas (upstream's apiextensions-apiserver pkg/apiserver/schema and
kube-openapi's validate): whether a CRD's openAPIV3Schema is structural, and, for a custom
resource's JSON, pruning of unknown fields, defaulting, and validation with upstream's
field paths and messages.

A schema node is the CRD's JSON (a dict): `type`, `properties`, `items`,
`additionalProperties`, value constraints, and the `x-kubernetes-*` extensions.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from kubeling.errors import FieldViolation

__all__ = ["structural_violations", "prune", "apply_defaults", "has_defaults", "validate_value", "TYPES"]

Schema = dict[str, Any]
TYPES = ("object", "array", "string", "integer", "number", "boolean")
PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"
LIST_TYPE = "x-kubernetes-list-type"
MAP_KEYS = "x-kubernetes-list-map-keys"
MAP_TYPE = "x-kubernetes-map-type"
VALIDATIONS = "x-kubernetes-validations"
# What a node may say (upstream's JSONSchemaProps in apiextensions/v1); anything else is refused.
_KNOWN = frozenset({
    "type", "format", "title", "description", "default", "example", "externalDocs", "nullable", "enum",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "multipleOf", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties", "required",
    "properties", "additionalProperties", "items", "allOf", "anyOf", "oneOf", "not", PRESERVE, INT_OR_STRING,
    EMBEDDED, LIST_TYPE, MAP_KEYS, MAP_TYPE, VALIDATIONS,
    "$ref", "$schema", "id", "definitions", "dependencies", "patternProperties", "additionalItems"})
# Known to JSON Schema, refused by apiextensions v1 (upstream's validation.go wording).
_FORBIDDEN = {"$ref": "$ref is not supported", "$schema": "$schema is not supported",
              "id": "id is not supported", "definitions": "definitions is not supported",
              "dependencies": "dependencies is not supported",
              "patternProperties": "patternProperties is not supported",
              "additionalItems": "additionalItems cannot be set to false"}
_OBJECT_META_FIELDS = ("name", "generateName")


def _show(value: Any) -> str:
    """A value as a field error shows it (Go's %#v for scalars, JSON for the rest)."""
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ------------------------------------------------------------------ is it structural?

def structural_violations(schema: Any, path: str, *, root: bool = True) -> list[FieldViolation]:
    """Why a CRD's schema is not structural (upstream's ValidateStructural plus the v1
    schema rules), each at its field path; empty when it is."""
    out: list[FieldViolation] = []
    if not isinstance(schema, dict):
        return [FieldViolation(path, f"Invalid value: {_show(schema)}: must be an object")]
    _structural(schema, path, out, root=root, kind="root" if root else "")
    return out


def _structural(node: Schema, path: str, out: list[FieldViolation], *, root: bool = False, kind: str = "") -> None:
    for key in node:
        if key not in _KNOWN:
            out.append(FieldViolation(_child(path, key), f'Forbidden: unknown field "{key}"'))
        elif key in _FORBIDDEN and not (key == "additionalItems" and node[key] is True):
            out.append(FieldViolation(_child(path, key), f"Forbidden: {_FORBIDDEN[key]}"))
    typ = node.get("type")
    int_or_string = node.get(INT_OR_STRING) is True
    preserve = node.get(PRESERVE) is True
    if typ is None or typ == "":
        if not int_or_string and not preserve:
            where = {"root": "at the root", "items": "for specified array items"}.get(kind,
                                                                                  "for specified object fields")
            out.append(FieldViolation(_child(path, "type"), f"Required value: must not be empty {where}"))
    elif typ not in TYPES:
        out.append(FieldViolation(_child(path, "type"), f"Unsupported value: {_show(typ)}: supported values: "
                                  + ", ".join(f'"{t}"' for t in TYPES)))
    elif root and typ != "object":
        out.append(FieldViolation(_child(path, "type"), f"Invalid value: {_show(typ)}: must be object at the root"))
    if int_or_string and typ not in (None, ""):
        out.append(FieldViolation(_child(path, "type"),
                                  f"Invalid value: {_show(typ)}: must be empty if x-kubernetes-int-or-string is true"))
    if PRESERVE in node and node[PRESERVE] is not True:
        out.append(FieldViolation(_child(path, PRESERVE),
                                  f"Invalid value: {_show(node[PRESERVE])}: must be true or undefined"))
    if node.get(EMBEDDED) is True and typ != "object":
        out.append(FieldViolation(_child(path, "type"),
                                  f"Invalid value: {_show(typ or '')}: must be object if "
                                  "x-kubernetes-embedded-resource is true"))
    if node.get("nullable") is not None and not isinstance(node.get("nullable"), bool):
        out.append(FieldViolation(_child(path, "nullable"), "Invalid value: must be a boolean"))
    if node.get("uniqueItems") is True:
        out.append(FieldViolation(_child(path, "uniqueItems"), "Forbidden: uniqueItems cannot be set to true since "
                                  "the runtime complexity becomes quadratic"))
    props = node.get("properties")
    additional = node.get("additionalProperties")
    if props is not None and additional is not None and additional is not False:
        out.append(FieldViolation(_child(path, "additionalProperties"),
                                  "Forbidden: additionalProperties and properties are mutual exclusive"))
    if props is not None:
        if not isinstance(props, dict):
            out.append(FieldViolation(_child(path, "properties"), "Invalid value: must be an object"))
        else:
            if typ not in (None, "", "object"):
                out.append(FieldViolation(_child(path, "type"), f"Invalid value: {_show(typ)}: must be object "
                                          "if properties are specified"))
            for name, sub in props.items():
                sub_path = f"{_child(path, 'properties')}[{name}]"
                if not isinstance(sub, dict):
                    out.append(FieldViolation(sub_path, "Invalid value: must be an object"))
                    continue
                if root and name == "metadata":
                    _metadata_schema(sub, sub_path, out)
                    continue
                _structural(sub, sub_path, out)
    if isinstance(additional, dict):
        _structural(additional, _child(path, "additionalProperties"), out)
    elif additional is not None and not isinstance(additional, bool):
        out.append(FieldViolation(_child(path, "additionalProperties"), "Invalid value: must be a boolean or a schema"))
    items = node.get("items")
    if typ == "array" and items is None:
        out.append(FieldViolation(_child(path, "items"), "Required value: must be specified"))
    if isinstance(items, dict):
        _structural(items, _child(path, "items"), out, kind="items")
    elif items is not None:
        out.append(FieldViolation(_child(path, "items"), "Forbidden: items must be a schema object and not an array"))
    for combinator in ("allOf", "anyOf", "oneOf"):
        subs = node.get(combinator)
        if subs is not None and not isinstance(subs, list):
            out.append(FieldViolation(_child(path, combinator), "Invalid value: must be an array"))
        for i, sub in enumerate(subs or []):
            if isinstance(sub, dict):
                _value_schema(sub, f"{_child(path, combinator)}[{i}]", out)
    if isinstance(node.get("not"), dict):
        _value_schema(node["not"], _child(path, "not"), out)
    _list_type(node, path, out)
    if "pattern" in node:
        try:
            re.compile(node["pattern"])
        except (re.error, TypeError) as err:
            out.append(FieldViolation(_child(path, "pattern"), f"Invalid value: {_show(node['pattern'])}: "
                                      f"must be a valid regular expression, but isn't: {err}"))
    if "default" in node:
        _check_default(node, path, out)


def _value_schema(node: Schema, path: str, out: list[FieldViolation]) -> None:
    """Inside allOf/anyOf/oneOf/not only value constraints may appear (upstream: no types,
    defaults, nullable or descriptions there), so the structure is the outer schema's."""
    for key in ("type", "default", "nullable", "description", "title", PRESERVE, EMBEDDED, INT_OR_STRING):
        if key in node:
            out.append(FieldViolation(_child(path, key), "Forbidden: must be empty to be structural"))
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            _value_schema(sub, f"{_child(path, 'properties')}[{name}]", out)
    if isinstance(node.get("items"), dict):
        _value_schema(node["items"], _child(path, "items"), out)


def _metadata_schema(node: Schema, path: str, out: list[FieldViolation]) -> None:
    """At the root, metadata may only constrain name and generateName (upstream's rule)."""
    extra = [k for k in node if k not in ("type", "properties", "description")]
    props = node.get("properties") or {}
    if extra or any(k not in _OBJECT_META_FIELDS for k in props) or node.get("type") not in (None, "object"):
        out.append(FieldViolation(path, "Forbidden: must not specify anything other than name and generateName, "
                                  "but metadata is implicitly specified"))
        return
    for name, sub in props.items():
        sub_path = f"{_child(path, 'properties')}[{name}]"
        if isinstance(sub, dict):
            _structural(sub, sub_path, out)
            if sub.get("type") not in (None, "string"):
                out.append(FieldViolation(_child(sub_path, "type"), "Invalid value: must be string"))


def _list_type(node: Schema, path: str, out: list[FieldViolation]) -> None:
    list_type = node.get(LIST_TYPE)
    keys = node.get(MAP_KEYS)
    if list_type is not None:
        if list_type not in ("atomic", "set", "map"):
            out.append(FieldViolation(_child(path, LIST_TYPE), f'Unsupported value: {_show(list_type)}: supported '
                                      'values: "atomic", "set", "map"'))
        if node.get("type") != "array":
            out.append(FieldViolation(_child(path, LIST_TYPE), "Invalid value: must only be used if type is array"))
    if list_type == "map":
        items: Schema = node["items"] if isinstance(node.get("items"), dict) else {}
        if not keys:
            out.append(FieldViolation(_child(path, MAP_KEYS),
                                      "Required value: must not be empty if x-kubernetes-list-type is map"))
        elif items.get("type") != "object":
            out.append(FieldViolation(_child(_child(path, "items"), "type"),
                                      "Invalid value: must be object if parent array's x-kubernetes-list-type is map"))
        else:
            props = items.get("properties") or {}
            for i, key in enumerate(keys):
                if key not in props:
                    out.append(FieldViolation(f"{_child(path, MAP_KEYS)}[{i}]", f"Invalid value: {_show(key)}: "
                                              "entries must all be names of item properties"))
                elif key not in (items.get("required") or []) and "default" not in props[key]:
                    out.append(FieldViolation(f"{_child(path, MAP_KEYS)}[{i}]", f"Invalid value: {_show(key)}: "
                                              "all map keys must be required or have a default value"))
    elif keys is not None:
        out.append(FieldViolation(_child(path, MAP_KEYS), "Forbidden: must only be used if x-kubernetes-list-type "
                                  "is map"))
    if list_type == "set":
        set_items: Schema = node["items"] if isinstance(node.get("items"), dict) else {}
        if set_items.get("type") in ("object", "array"):
            out.append(FieldViolation(_child(_child(path, "items"), "type"),
                                      f"Invalid value: {_show(set_items['type'])}: must be a scalar type if parent "
                                      "array's x-kubernetes-list-type is set"))


def _check_default(node: Schema, path: str, out: list[FieldViolation]) -> None:
    """A default must itself be valid and survive pruning (upstream's defaults check)."""
    default = copy.deepcopy(node["default"])
    if prune(node, default, "") or default != node["default"]:
        out.append(FieldViolation(_child(path, "default"), "Invalid value: must not have unknown fields"))
        return
    for v in validate_value(node, node["default"], _child(path, "default")):
        out.append(v)


# ------------------------------------------------------------------ pruning

def prune(schema: Schema | None, value: Any, path: str) -> list[str]:
    """Drop from `value` (in place) the fields the schema does not specify; return their
    paths. Under x-kubernetes-preserve-unknown-fields nothing is dropped; an embedded
    resource keeps apiVersion, kind and metadata."""
    dropped: list[str] = []
    if schema is not None:
        _prune(schema, value, path, dropped)
    return dropped


def _prune(node: Schema, value: Any, path: str, dropped: list[str]) -> None:
    if isinstance(value, dict):
        props = node.get("properties")
        additional = node.get("additionalProperties")
        embedded = node.get(EMBEDDED) is True
        for key in list(value):
            sub_path = _child(path, key)
            if props is not None and key in props:
                _prune(props[key], value[key], sub_path, dropped)
            elif isinstance(additional, dict):
                _prune(additional, value[key], sub_path, dropped)
            elif embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            elif node.get(PRESERVE) is True or additional is True:
                continue
            else:
                del value[key]
                dropped.append(sub_path)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _prune(node["items"], item, f"{path}[{i}]", dropped)


# ------------------------------------------------------------------ defaulting

def apply_defaults(schema: Schema | None, value: Any) -> bool:
    """Fill absent fields (and nulls the schema does not allow) with their schema's default,
    in place, outside in (upstream's structural defaulting); whether anything was filled."""
    return schema is not None and _default(schema, value)


def has_defaults(schema: Schema | None) -> bool:
    """Whether any node of the schema has a default (else defaulting is no work at all)."""
    if not isinstance(schema, dict):
        return False
    if "default" in schema:
        return True
    subs = [*(schema.get("properties") or {}).values(), schema.get("items"), schema.get("additionalProperties")]
    return any(has_defaults(sub) for sub in subs)


def _default(node: Schema, value: Any) -> bool:
    filled = False
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for key, sub in props.items():
            if not isinstance(sub, dict) or "default" not in sub:
                continue
            if key not in value or (value[key] is None and not sub.get("nullable")):
                value[key] = copy.deepcopy(sub["default"])
                filled = True
        for key, item in value.items():
            if key in props and isinstance(props[key], dict):
                filled |= _default(props[key], item)
            elif isinstance(node.get("additionalProperties"), dict):
                filled |= _default(node["additionalProperties"], item)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for item in value:
            filled |= _default(node["items"], item)
    return filled


# ------------------------------------------------------------------ validation

def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits(typ: str, value: Any) -> bool:
    actual = _type_of(value)
    return actual == typ or (typ == "number" and actual == "integer")


def validate_value(schema: Schema | None, value: Any, path: str) -> list[FieldViolation]:
    """Every violation of the schema by the value, worded as kube-openapi's validator."""
    out: list[FieldViolation] = []
    if schema is not None:
        _validate(schema, value, path, out)
    return out


def _invalid(out: list[FieldViolation], path: str, value: Any, detail: str) -> None:
    out.append(FieldViolation(path, f"Invalid value: {_show(value)}: {detail}"))


def _validate(node: Schema, value: Any, path: str, out: list[FieldViolation]) -> None:
    where = path or "<root>"
    if value is None:
        if node.get("nullable") is True or node.get(PRESERVE) is True and "type" not in node:
            return
        if "type" in node:
            _invalid(out, path, "null", f"{where} in body must be of type {node['type']}: \"null\"")
        return
    typ = node.get("type")
    if node.get(INT_OR_STRING) is True:
        if not (_fits("integer", value) or isinstance(value, str)):
            _invalid(out, path, value, f"{where} in body must be of type integer,string: \"{_type_of(value)}\"")
            return
    elif typ and not _fits(typ, value):
        _invalid(out, path, value, f"{where} in body must be of type {typ}: \"{_type_of(value)}\"")
        return
    if "enum" in node and isinstance(node["enum"], list) and value not in node["enum"]:
        allowed = ", ".join(_show(e) for e in node["enum"])
        out.append(FieldViolation(path, f"Unsupported value: {_show(value)}: supported values: {allowed}"))
    if isinstance(value, str):
        _validate_string(node, value, path, where, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(node, value, path, where, out)
    elif isinstance(value, list):
        _validate_array(node, value, path, where, out)
    elif isinstance(value, dict):
        _validate_object(node, value, path, where, out)
    for sub in node.get("allOf") or []:
        _validate(sub, value, path, out)
    if node.get("anyOf") and not any(not _errors(sub, value, path) for sub in node["anyOf"]):
        _invalid(out, path, value, "must validate at least one schema (anyOf)")
        for sub in node["anyOf"][:1]:
            out.extend(_errors(sub, value, path))
    if node.get("oneOf"):
        passing = sum(1 for sub in node["oneOf"] if not _errors(sub, value, path))
        if passing != 1:
            _invalid(out, path, value, "must validate one and only one schema (oneOf)")
            if passing == 0:
                out.extend(_errors(node["oneOf"][0], value, path))
    if isinstance(node.get("not"), dict) and not _errors(node["not"], value, path):
        _invalid(out, path, value, "must not validate the schema (not)")


def _errors(node: Schema, value: Any, path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    _validate(node, value, path, out)
    return out


def _validate_string(node: Schema, value: str, path: str, where: str, out: list[FieldViolation]) -> None:
    if "maxLength" in node and len(value) > node["maxLength"]:
        out.append(FieldViolation(path, f"Too long: may not be more than {node['maxLength']} bytes"))
    if "minLength" in node and len(value) < node["minLength"]:
        _invalid(out, path, value, f"{where} in body should be at least {node['minLength']} chars long")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # refused when the CRD was written; never judged against
        if not matched:
            _invalid(out, path, value, f"{where} in body should match '{pattern}'")
    fmt = node.get("format")
    if fmt and not _format_ok(fmt, value):
        _invalid(out, path, value, f"{where} in body must be of type {fmt}: {_show(value)}")


_FORMATS = {
    "date-time": re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"),
    "byte": re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"),
    "ipv4": re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$"),
}


def _format_ok(fmt: str, value: str) -> bool:
    """The formats kube-openapi checks that users rely on; others (int32, password, ...)
    constrain nothing for strings, as upstream's."""
    rule = _FORMATS.get(fmt)
    return rule is None or rule.match(value) is not None


def _validate_number(node: Schema, value: float, path: str, where: str, out: list[FieldViolation]) -> None:
    if "minimum" in node:
        low = node["minimum"]
        if node.get("exclusiveMinimum") is True and value <= low:
            _invalid(out, path, value, f"{where} in body should be greater than {_number(low)}")
        elif value < low:
            _invalid(out, path, value, f"{where} in body should be greater than or equal to {_number(low)}")
    if "maximum" in node:
        high = node["maximum"]
        if node.get("exclusiveMaximum") is True and value >= high:
            _invalid(out, path, value, f"{where} in body should be less than {_number(high)}")
        elif value > high:
            _invalid(out, path, value, f"{where} in body should be less than or equal to {_number(high)}")
    step = node.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0 and not math.isclose(value / step, round(value / step)):
        _invalid(out, path, value, f"{where} in body should be a multiple of {_number(step)}")


def _validate_array(node: Schema, value: list[Any], path: str, where: str, out: list[FieldViolation]) -> None:
    if "maxItems" in node and len(value) > node["maxItems"]:
        out.append(FieldViolation(path, f"Too many: {len(value)}: must have at most {node['maxItems']} items"))
    if "minItems" in node and len(value) < node["minItems"]:
        _invalid(out, path, len(value), f"{where} in body should have at least {node['minItems']} items")
    items = node.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(items, item, f"{path}[{i}]", out)
    list_type = node.get(LIST_TYPE)
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                out.append(FieldViolation(f"{path}[{i}]", f"Duplicate value: {_show(item)}"))
            seen.append(item)
    elif list_type == "map":
        keys = node.get(MAP_KEYS) or []
        seen_keys: list[tuple[Any, ...]] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = tuple(item.get(k) for k in keys)
            if key in seen_keys:
                shown = ", ".join(f"{k}={_show(v)}" for k, v in zip(keys, key, strict=True))
                out.append(FieldViolation(f"{path}[{i}]", f"Duplicate value: map[string]interface {{}}{{{shown}}}"))
            seen_keys.append(key)


def _validate_object(node: Schema, value: dict[str, Any], path: str, where: str,
                     out: list[FieldViolation]) -> None:
    for name in node.get("required") or []:
        if name not in value:
            out.append(FieldViolation(_child(path, name), "Required value"))
    if "maxProperties" in node and len(value) > node["maxProperties"]:
        out.append(FieldViolation(path, f"Too many: {len(value)}: must have at most {node['maxProperties']} items"))
    if "minProperties" in node and len(value) < node["minProperties"]:
        _invalid(out, path, len(value), f"{where} in body should have at least {node['minProperties']} properties")
    props = node.get("properties") or {}
    additional = node.get("additionalProperties")
    for key, item in value.items():
        if key in props and isinstance(props[key], dict):
            _validate(props[key], item, _child(path, key), out)
        elif isinstance(additional, dict):
            _validate(additional, item, _child(path, key), out)
    if node.get(EMBEDDED) is True:
        for key in ("apiVersion", "kind"):
            if not isinstance(value.get(key), str) or not value.get(key):
                out.append(FieldViolation(_child(path, key), "Required value: must not be empty"))

"""CustomResourceDefinition validation, as upstream's apiextensions/validation: the name,
group, names, scope, versions (exactly one stored, at least one served), each version's
structural schema, subresources, printer columns and selectable fields, conversion; and
what an update may not change."""

from __future__ import annotations

import json
from typing import Any

from apiserver.registry.apiextensions import schema as schemas
from apiserver.registry.apiextensions.cel import compile_rules
from apiserver.validation import Checker
from kubeling import names

__all__ = ["validate_definition", "validate_update", "validate_stored_versions", "COLUMN_TYPES"]

COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_SCOPES = ("Cluster", "Namespaced")
_STRATEGIES = ("None", "Webhook")


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if not isinstance(value, str) else value


def validate_definition(name: str, content: dict[str, Any], check: Checker) -> None:
    spec = content.get("spec")
    if not isinstance(spec, dict):
        check.add("spec", "Required value")
        return
    group = spec.get("group") or ""
    plural = (spec.get("names") or {}).get("plural") or ""
    if name != f"{plural}.{group}":
        check.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
    _group(group, check)
    scope = spec.get("scope") or ""
    if not scope:
        check.add("spec.scope", "Required value")
    else:
        check.unsupported("spec.scope", scope, _SCOPES)
    _versions(spec, check)
    _names(spec.get("names") or {}, "spec.names", check, required=True)
    _conversion(spec.get("conversion"), check)
    if spec.get("preserveUnknownFields") is True:
        check.invalid("spec.preserveUnknownFields", True, "must be false in order to use defaults in the schema")


def _group(group: str, check: Checker) -> None:
    if not group:
        check.add("spec.group", "Required value")
        return
    errs = names.dns1123_subdomain(group)
    if errs:
        check.invalid("spec.group", group, ",".join(errs))
    elif "." not in group:
        check.invalid("spec.group", group, "should be a domain with at least one dot")


def _versions(spec: dict[str, Any], check: Checker) -> None:
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        check.invalid("spec.versions", versions or [], "must have exactly one version marked as storage version")
        return
    seen: set[str] = set()
    unique, storage, served = True, 0, 0
    for i, v in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(v, dict):
            check.add(path, "Invalid value: must be an object")
            continue
        vname = v.get("name") or ""
        if vname in seen:
            unique = False
        seen.add(vname)
        for msg in names.dns1035_label(vname):
            check.invalid(f"{path}.name", vname, msg)
        storage += 1 if v.get("storage") is True else 0
        served += 1 if v.get("served") is True else 0
        if v.get("deprecationWarning") is not None and v.get("deprecated") is not True:
            check.add(f"{path}.deprecationWarning", "Invalid value: can only be set for deprecated versions")
        _version_schema(v, path, check)
        _subresources(v.get("subresources"), f"{path}.subresources", check)
        for j, col in enumerate(v.get("additionalPrinterColumns") or []):
            _column(col, f"{path}.additionalPrinterColumns[{j}]", check)
        _selectable_fields(v, path, check)
    if not unique:
        check.invalid("spec.versions", _shown(versions), "must contain unique version names")
    if storage != 1:
        check.invalid("spec.versions", _shown(versions), "must have exactly one version marked as storage version")
    if served == 0:
        check.invalid("spec.versions", _shown(versions), "must have at least one version marked as served")


def _version_schema(v: dict[str, Any], path: str, check: Checker) -> None:
    root = (v.get("schema") or {}).get("openAPIV3Schema")
    schema_path = f"{path}.schema.openAPIV3Schema"
    if root is None:
        check.add(schema_path, "Required value: schemas are required")
        return
    for violation in schemas.structural_violations(root, schema_path):
        check.violations.append(violation)
    for violation in compile_rules(root, schema_path):
        check.violations.append(violation)


def _subresources(sub: Any, path: str, check: Checker) -> None:
    if sub is None:
        return
    if not isinstance(sub, dict):
        check.add(path, "Invalid value: must be an object")
        return
    scale = sub.get("scale")
    if scale is None:
        return
    if not isinstance(scale, dict):
        check.add(f"{path}.scale", "Invalid value: must be an object")
        return
    for key in ("specReplicasPath", "statusReplicasPath"):
        value = scale.get(key)
        if not value:
            check.add(f"{path}.scale.{key}", "Required value")
        elif not _simple_path(value):
            check.invalid(f"{path}.scale.{key}", value, "must be a simple json path starting with .")
    for key, prefix in (("specReplicasPath", ".spec."), ("statusReplicasPath", ".status.")):
        value = scale.get(key)
        if value and _simple_path(value) and not value.startswith(prefix):
            check.invalid(f"{path}.scale.{key}", value, f"should be a json path under {prefix.rstrip('.')}")
    selector = scale.get("labelSelectorPath")
    if selector:
        if not _simple_path(selector):
            check.invalid(f"{path}.scale.labelSelectorPath", selector, "must be a simple json path starting with .")
        elif not selector.startswith((".spec.", ".status.")):
            check.invalid(f"{path}.scale.labelSelectorPath", selector,
                          "should be a json path under either .spec or .status")


def _simple_path(value: Any) -> bool:
    """.a.b.c: what the scale subresource's paths may be (no arrays, no filters)."""
    return isinstance(value, str) and value.startswith(".") and all(value.split(".")[1:]) and "[" not in value


def _column(col: Any, path: str, check: Checker) -> None:
    if not isinstance(col, dict):
        check.add(path, "Invalid value: must be an object")
        return
    if not col.get("name"):
        check.add(f"{path}.name", "Required value")
    if not col.get("type"):
        check.add(f"{path}.type", "Required value")
    else:
        check.unsupported(f"{path}.type", col["type"], COLUMN_TYPES)
    if col.get("format"):
        check.unsupported(f"{path}.format", col["format"], ("int32", "int64", "float", "double", "byte", "date",
                                                           "date-time", "password"))
    if not col.get("jsonPath"):
        check.add(f"{path}.jsonPath", "Required value")
    priority = col.get("priority", 0)
    if not isinstance(priority, int) or priority < 0:
        check.invalid(f"{path}.priority", priority, "must be greater than or equal to 0")


def _selectable_fields(v: dict[str, Any], path: str, check: Checker) -> None:
    fields = v.get("selectableFields") or []
    root = (v.get("schema") or {}).get("openAPIV3Schema") or {}
    if len(fields) > 8:
        check.add(f"{path}.selectableFields", f"Too many: {len(fields)}: must have at most 8 items")
    seen: set[str] = set()
    for i, f in enumerate(fields):
        json_path = (f or {}).get("jsonPath") if isinstance(f, dict) else None
        fpath = f"{path}.selectableFields[{i}].jsonPath"
        if not json_path:
            check.add(fpath, "Required value")
            continue
        if json_path in seen:
            check.add(fpath, f"Duplicate value: {json.dumps(json_path)}")
        seen.add(json_path)
        if not _simple_path(json_path):
            check.invalid(fpath, json_path, "must be a simple json path starting with .")
            continue
        node: Any = root
        for part in json_path.split(".")[1:]:
            node = ((node or {}).get("properties") or {}).get(part)
            if node is None:
                break
        if node is None:
            check.invalid(fpath, json_path, "is an invalid path: does not refer to a field in the schema")
        elif node.get("type") not in ("string", "integer", "boolean"):
            check.invalid(fpath, json_path, "must point to a field of type string, boolean or integer. Enum string "
                                            "fields and strings with formats are allowed.")


def _names(n: dict[str, Any], path: str, check: Checker, required: bool) -> None:
    if required:
        for key in ("plural", "kind"):
            if not n.get(key):
                check.add(f"{path}.{key}", "Required value")
    for key in ("plural", "singular"):
        value = n.get(key) or ""
        if value:
            for msg in names.dns1035_label(value):
                check.invalid(f"{path}.{key}", value, msg)
    for key in ("kind", "listKind"):
        value = n.get(key) or ""
        if value:
            for msg in names.dns1035_label(value.lower()):
                check.invalid(f"{path}.{key}", value, f"may have mixed case, but should otherwise match: {msg}")
    kind, list_kind = n.get("kind") or "", n.get("listKind") or ""
    if kind and kind == list_kind:
        check.invalid(f"{path}.listKind", list_kind, "kind and listKind may not be the same")
    for i, short in enumerate(n.get("shortNames") or []):
        for msg in names.dns1035_label(short):
            check.invalid(f"{path}.shortNames[{i}]", short, msg)
    for i, category in enumerate(n.get("categories") or []):
        for msg in names.dns1035_label(category):
            check.invalid(f"{path}.categories[{i}]", category, msg)


def _conversion(conversion: Any, check: Checker) -> None:
    if conversion is None:
        return
    strategy = conversion.get("strategy") or ""
    if not strategy:
        check.add("spec.conversion.strategy", "Required value")
        return
    check.unsupported("spec.conversion.strategy", strategy, _STRATEGIES)
    webhook = conversion.get("webhook")
    if strategy == "Webhook":
        config = (webhook or {}).get("clientConfig")
        if config is None:
            check.add("spec.conversion.webhook", "Required value: required when strategy is set to Webhook")
            return
        if ("url" in config) == ("service" in config):
            check.add("spec.conversion.webhook.clientConfig", "Required value: exactly one of url or service is "
                                                              "required")
        versions = (webhook or {}).get("conversionReviewVersions") or []
        if not versions:
            check.add("spec.conversion.webhook.conversionReviewVersions", "Required value")
        elif not {"v1", "v1beta1"} & set(versions):
            check.add("spec.conversion.webhook.conversionReviewVersions",
                      f"Unsupported value: {_shown(versions)}: must include at least one of v1, v1beta1")
    elif webhook is not None:
        check.add("spec.conversion.webhook", "Forbidden: should not be set when strategy is not set to Webhook")


def validate_update(new: dict[str, Any], old: dict[str, Any], established: bool, check: Checker) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if spec.get("group") != old_spec.get("group"):
        check.invalid("spec.group", spec.get("group") or "", "field is immutable")
    n, on = spec.get("names") or {}, old_spec.get("names") or {}
    if n.get("plural") != on.get("plural"):
        check.invalid("spec.names.plural", n.get("plural") or "", "field is immutable")
    if established:
        if spec.get("scope") != old_spec.get("scope"):
            check.invalid("spec.scope", spec.get("scope") or "", "field is immutable")
        if n.get("kind") != on.get("kind"):
            check.invalid("spec.names.kind", n.get("kind") or "", "field is immutable")


def validate_stored_versions(content: dict[str, Any], check: Checker) -> None:
    """status.storedVersions: never empty, each in spec.versions, the storage one among them."""
    stored = (content.get("status") or {}).get("storedVersions") or []
    versions = (content.get("spec") or {}).get("versions") or []
    if not stored:
        check.invalid("status.storedVersions", "[]", "must have at least one stored version")
        return
    listed = {v.get("name") for v in versions if isinstance(v, dict)}
    for v in versions:
        if isinstance(v, dict) and v.get("storage") and v.get("name") not in stored:
            check.invalid("status.storedVersions", _shown(stored), f"must have the storage version {v.get('name')}")
    for i, name in enumerate(stored):
        if name not in listed:
            check.invalid(f"status.storedVersions[{i}]", name, "must appear in spec.versions")

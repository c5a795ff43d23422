"""Objects kept as JSON (custom resources and CustomResourceDefinitions, CustomResource
messages) as a client makes and reads them, and the scheme entries a definition's served
versions are (what a client needs to reach them: group, version, plural, scope, kind)."""

from __future__ import annotations

import json
from typing import Any

from kubeling.kjson import canonical_json, custom_json, from_json
from kubeling.scheme import ResourceType, Subresource
from protos.kubeling.v1 import custom_pb2

__all__ = ["new", "to_dict", "content_of", "set_content", "served_versions", "served_versions_of", "version_priority",
           "value_at", "set_value_at"]


def new(body: dict[str, Any]) -> custom_pb2.CustomResource:
    """The message of an object given as its JSON (apiVersion, kind, metadata, the rest)."""
    obj: custom_pb2.CustomResource = from_json(body, custom_pb2.CustomResource, ignore=frozenset()).message
    return obj


def to_dict(obj: custom_pb2.CustomResource) -> dict[str, Any]:
    """The object as its JSON."""
    return custom_json(obj)


def content_of(obj: custom_pb2.CustomResource) -> dict[str, Any]:
    """Everything but apiVersion, kind and metadata (spec, status, ...), as a fresh dict
    (the caller may change it)."""
    value = json.loads(obj.content) if obj.content else {}
    return value if isinstance(value, dict) else {}


def set_content(obj: custom_pb2.CustomResource, value: dict[str, Any]) -> None:
    obj.content = canonical_json(value) if value else ""


def value_at(content: dict[str, Any], path: str) -> Any:
    """The value at a simple JSON path (`.spec.replicas`, a scale subresource's paths), or
    None when anything on the way is missing."""
    node: Any = content
    for part in path.split(".")[1:] if path else []:
        node = node.get(part) if isinstance(node, dict) else None
    return node if path else None


def set_value_at(content: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a simple JSON path, making the objects on the way; ValueError when
    something on the way is not an object."""
    node = content
    parts = path.split(".")[1:]
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"{path}: {part} is not an object")
    node[parts[-1]] = value


def version_priority(name: str) -> tuple[int, int, int, str]:
    """Sort key, best first: GA, then beta, then alpha (higher numbers first), then other
    names alphabetically (upstream's version.CompareKubeAwareVersionStrings)."""
    head, level, minor = name[1:], "", 0
    for marker in ("alpha", "beta"):
        if marker in head:
            head, _, rest = head.partition(marker)
            level = marker
            if not rest.isdigit():
                return (3, 0, 0, name)
            minor = int(rest)
    if not name.startswith("v") or not head.isdigit():
        return (3, 0, 0, name)
    return ({"": 0, "beta": 1, "alpha": 2}[level], -int(head), -minor, "")


def served_versions(crd: custom_pb2.CustomResource) -> list[ResourceType[custom_pb2.CustomResource]]:
    """A scheme entry per served version of a definition whose names are accepted (the
    preferred version first), by its accepted names; none before names are accepted."""
    body = content_of(crd)
    return served_versions_of(body.get("spec") or {}, body.get("status") or {})


def served_versions_of(spec: dict[str, Any], status: dict[str, Any]) -> list[ResourceType[custom_pb2.CustomResource]]:
    accepted = status.get("acceptedNames") or {}
    if not accepted.get("plural"):
        return []
    versions = sorted((v for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served")),
                      key=lambda v: version_priority(str(v.get("name", ""))))
    out = []
    for v in versions:
        sub = v.get("subresources") or {}
        subresources = []
        if "status" in sub:
            subresources.append(Subresource("status"))
        if sub.get("scale") is not None:
            subresources.append(Subresource("scale", kind="Scale", group="autoscaling", version="v1"))
        out.append(ResourceType(
            spec.get("group", ""), v.get("name", ""), accepted.get("kind", ""), accepted["plural"],
            custom_pb2.CustomResource, namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(accepted.get("shortNames") or ()), categories=tuple(accepted.get("categories") or ()),
            subresources=tuple(subresources), singular=accepted.get("singular") or "", custom=True))
    return out

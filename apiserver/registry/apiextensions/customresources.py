"""Custom resources: one strategy per served version of a CustomResourceDefinition
(upstream's pkg/registry/customresource): the version's structural schema prunes,
defaults and validates, its CEL rules judge, status is written apart when the status
subresource exists, generation moves with every change but to metadata (and status),
selectableFields and printer columns read the object by JSON path."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

from apiserver.registry.apiextensions import schema as schemas
from apiserver.registry.apiextensions.cel import NO_OLD, evaluate_rules
from apiserver.registry.apiextensions.definition import Column, Definition, Version
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.scheme import ResourceType
from kubeling.timestamps import human_duration
from protos.kubeling.v1 import custom_pb2

__all__ = ["CustomResourceStrategy", "json_path", "Printer"]

CR = custom_pb2.CustomResource
Row = Callable[[dict[str, Any], float], list[Any]]
Printer = tuple[list[tuple[str, str, int]], Row]
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\['([^']*)'\]")


def json_path(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (.a.b, .a[0].b, .a['x.y'], with or without {} around
    it, as printer columns write them); None when absent."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    value = obj
    pos = 0
    while pos < len(path):
        m = _PATH_PART.match(path, pos)
        if m is None:
            return None
        pos = m.end()
        key, index, quoted = m.groups()
        if index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return None
            value = value[int(index)]
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(key if key is not None else quoted)
        if value is None:
            return None
    return value


def _cell(column: Column, obj: dict[str, Any], now: float) -> Any:
    """A printer column's cell as upstream's tableconvertor gives it."""
    value = json_path(obj, column.json_path)
    if value is None:
        return None
    if column.type == "date" and isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return value
        return human_duration(now - when)
    if column.type == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if column.type in ("number", "boolean") or isinstance(value, (int, float, bool)):
        return value
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


class CustomResourceStrategy(Strategy[CR]):
    """One served version of a definition (the instance's `resource` is that version's entry)."""

    def __init__(self, resource: ResourceType[CR], definition: Definition, version: Version,
                 stored_versions_vary: bool = False) -> None:
        super().__init__(resource)
        self.stored_versions_vary = stored_versions_vary  # the webhook-converting storage registry's
        self.definition = definition
        self.version = version
        self.storage_path = f"{definition.group}/{definition.plural}"
        self.storage_version = f"{definition.group}/{definition.storage_version.name}"
        self.has_status = version.status
        self.schema = version.schema
        self._defaults = schemas.has_defaults(version.schema)  # read from etcd: defaulted only if any
        self._selectable = version.selectable_fields

    # ---- field selectors: metadata.name, metadata.namespace and selectableFields ----
    def fields(self, obj: CR) -> dict[str, str]:
        out = super().fields(obj)
        if self._selectable:
            content = content_of(obj)
            for path in self._selectable:
                value = json_path(content, path)
                text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
                out[path.lstrip(".")] = text
        return out

    def field_labels(self) -> frozenset[str]:
        return frozenset({"metadata.name", *(["metadata.namespace"] if self.namespaced else []),
                          *(p.lstrip(".") for p in self._selectable)})

    # ---- the schema ----
    def unknown_fields(self, obj: CR) -> list[str]:
        """What the schema would prune, by path (fieldValidation Strict refuses, Warn warns)."""
        return schemas.prune(self.schema, content_of(obj), "")

    def _pruned_and_defaulted(self, obj: CR) -> None:
        content = content_of(obj)
        schemas.prune(self.schema, content, "")
        schemas.apply_defaults(self.schema, content)
        set_content(obj, content)

    def from_storage(self, obj: CR) -> None:
        """Upstream defaults what it reads from etcd too: a default added to the schema
        shows on objects written before it (the version's own objects only: others are
        defaulted in theirs once converted)."""
        if not self._defaults or obj.apiVersion != self.resource.api_version:
            return  # most schemas default nothing: no parse of the content at all
        content = content_of(obj)
        if schemas.apply_defaults(self.schema, content):
            set_content(obj, content)

    def prepare_for_create(self, obj: CR) -> None:
        if self.definition.terminating:
            raise errors.MethodNotAllowed("create not allowed while custom resource definition is terminating")
        obj.apiVersion, obj.kind = self.resource.api_version, self.resource.kind
        if self.has_status:
            content = content_of(obj)
            content.pop("status", None)  # status is the status subresource's to write
            set_content(obj, content)

    def default(self, obj: CR) -> None:
        self._pruned_and_defaulted(obj)

    def _judge(self, obj: CR, old: CR | None, check: Checker) -> None:
        content = content_of(obj)
        check.violations.extend(schemas.validate_value(self.schema, content, ""))
        if not check.violations:  # rules read typed values: judged on a value the schema accepts
            before = content_of(old) if old is not None else NO_OLD
            check.violations.extend(evaluate_rules(self.schema, content, before, ""))

    def validate_create(self, obj: CR, check: Checker) -> None:
        self._judge(obj, None, check)

    def validate_update(self, new: CR, old: CR, check: Checker) -> None:
        self._judge(new, old, check)

    def prepare_for_update(self, new: CR, old: CR) -> None:
        new.apiVersion, new.kind = self.resource.api_version, self.resource.kind
        if self.has_status:
            content, before = content_of(new), content_of(old)
            content.pop("status", None)
            if "status" in before:
                content["status"] = before["status"]
            set_content(new, content)

    def prepare_for_status_update(self, new: CR, old: CR) -> None:
        status = content_of(new).get("status", _MISSING)
        new.CopyFrom(old)
        content = content_of(old)
        if status is _MISSING:
            content.pop("status", None)
        else:
            content["status"] = status
        set_content(new, content)
        self._pruned_and_defaulted(new)

    def validate_status(self, new: CR, check: Checker) -> None:
        self._judge(new, None, check)

    def spec_changed(self, new: CR, old: CR) -> bool:
        """Upstream bumps generation on any change but to metadata, and status when the
        status subresource exists."""
        content, before = content_of(new), content_of(old)
        if self.has_status:
            content.pop("status", None)
            before.pop("status", None)
        return content != before

    def warnings(self) -> list[str]:
        if not self.version.deprecated:
            return []
        return [self.version.deprecation_warning or f"{self.resource.api_version} {self.resource.kind} is deprecated"]

    # ---- printing ----
    def printer(self) -> Printer:
        columns = self.version.columns or (Column("Age", "date", ".metadata.creationTimestamp"),)
        header = [("Name", "string", 0), *((c.name, c.type, c.priority) for c in columns)]

        def row(obj: dict[str, Any], now: float) -> list[Any]:
            return [obj.get("metadata", {}).get("name", ""), *(_cell(c, obj, now) for c in columns)]
        return header, row


_MISSING: Any = object()


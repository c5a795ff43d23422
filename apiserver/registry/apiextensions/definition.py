"""A CustomResourceDefinition read for serving: its names, scope and versions, each
version's schema, subresources, printer columns and selectable fields; and the scheme
entries its served versions become (upstream's crdInfo in customresource_handler.go)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubeling.dynamic import served_versions_of, version_priority
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import custom_pb2

__all__ = ["Definition", "Version", "Column", "GROUP", "FINALIZER", "condition"]

GROUP = "apiextensions.k8s.io"
FINALIZER = "customresourcecleanup.apiextensions.k8s.io"  # upstream's: instances go first


@dataclass(frozen=True)
class Column:
    """An additionalPrinterColumn."""

    name: str
    type: str
    json_path: str
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True)
class Version:
    name: str
    served: bool
    storage: bool
    schema: dict[str, Any] | None
    status: bool  # the status subresource
    scale: dict[str, Any] | None  # specReplicasPath, statusReplicasPath, labelSelectorPath
    columns: tuple[Column, ...]
    selectable_fields: tuple[str, ...]  # JSON paths, e.g. .spec.color
    deprecated: bool = False
    deprecation_warning: str | None = None


@dataclass(frozen=True)
class Definition:
    name: str
    uid: str
    group: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    namespaced: bool
    versions: tuple[Version, ...]
    spec: dict[str, Any] = field(repr=False, compare=False)
    status: dict[str, Any] = field(repr=False, compare=False)
    terminating: bool = False

    @classmethod
    def of(cls, crd: custom_pb2.CustomResource) -> Definition:
        content = json.loads(crd.content) if crd.content else {}
        spec, status = content.get("spec") or {}, content.get("status") or {}
        names = spec.get("names") or {}
        versions = []
        for v in spec.get("versions") or []:
            sub = v.get("subresources") or {}
            columns = tuple(Column(c.get("name", ""), c.get("type", "string"), c.get("jsonPath", ""),
                                   c.get("description", ""), c.get("format", ""), int(c.get("priority", 0)))
                            for c in v.get("additionalPrinterColumns") or [])
            versions.append(Version(
                v.get("name", ""), bool(v.get("served")), bool(v.get("storage")),
                (v.get("schema") or {}).get("openAPIV3Schema"), "status" in sub, sub.get("scale"), columns,
                tuple(f.get("jsonPath", "") for f in v.get("selectableFields") or []), bool(v.get("deprecated")),
                v.get("deprecationWarning")))
        versions.sort(key=lambda v: version_priority(v.name))
        kind = names.get("kind", "")
        return cls(crd.metadata.name, crd.metadata.uid, spec.get("group", ""), kind,
                   names.get("listKind") or f"{kind}List", names.get("plural", ""),
                   names.get("singular") or kind.lower(), tuple(names.get("shortNames") or ()),
                   tuple(names.get("categories") or ()), spec.get("scope") == "Namespaced", tuple(versions), spec,
                   status, crd.metadata.HasField("deletionTimestamp"))

    @property
    def storage_version(self) -> Version:
        return next(v for v in self.versions if v.storage)

    def condition(self, kind: str) -> dict[str, Any] | None:
        return condition(self.status, kind)

    @property
    def established(self) -> bool:
        c = self.condition("Established")
        return c is not None and c.get("status") == "True"

    def version(self, name: str) -> Version | None:
        return next((v for v in self.versions if v.name == name), None)

    def resource_types(self) -> list[ResourceType[custom_pb2.CustomResource]]:
        """A scheme entry per served version, the preferred version first."""
        return served_versions_of(self.spec, self.status)


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)

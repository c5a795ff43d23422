"""storagemigration.k8s.io/v1 StorageVersionMigrations, kept as JSON with upstream's shape
(pkg/apis/storagemigration): `spec.resource` names a group and resource (immutable); the
apiserver's storage version migrator (apiserver/controllers/storage_migration.py) writes
every stored object of it again in the current storage format and reports Running, then
Succeeded or Failed."""

from __future__ import annotations

from typing import Any

from apiserver.registry.generic.json_strategy import CONDITIONS, JsonStrategy, obj, string
from apiserver.validation import Checker
from kubeling import names, scheme

__all__ = ["STRATEGIES", "StorageVersionMigrationStrategy"]


class StorageVersionMigrationStrategy(JsonStrategy):
    resource = scheme.STORAGEVERSIONMIGRATIONS
    storage_path = "storageversionmigrations"
    schema = {"spec": obj({"resource": obj({"group": string(), "resource": string()})}, default={}),
              "status": obj({"conditions": CONDITIONS, "resourceVersion": string()})}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        resource = (content.get("spec") or {}).get("resource") or {}
        if not resource.get("resource"):
            check.add("spec.resource.resource", "Required value")
        else:
            check.name("spec.resource.resource", resource["resource"], names.dns1123_label)
        if resource.get("group"):
            check.name("spec.resource.group", resource["group"], names.dns1123_subdomain)

    def validate_content_update(self, content: dict[str, Any], before: dict[str, Any], check: Checker) -> None:
        if (content.get("spec") or {}).get("resource") != (before.get("spec") or {}).get("resource"):
            check.invalid("spec.resource", (content.get("spec") or {}).get("resource"), "field is immutable")


STRATEGIES = (StorageVersionMigrationStrategy,)

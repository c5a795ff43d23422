"""CustomResourceDefinitions (apiextensions.k8s.io/v1), kept as JSON as custom resources
are: defaults, validation, status written apart, storedVersions kept, and the cleanup
finalizer that deletes a definition's custom resources before the definition goes
(upstream's pkg/registry/customresourcedefinition)."""

from __future__ import annotations

from typing import Any

from apiserver.registry.apiextensions.definition import FINALIZER, condition
from apiserver.registry.apiextensions.validation import validate_definition, validate_stored_versions, validate_update
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import scheme
from kubeling.dynamic import content_of, set_content
from protos.kubeling.v1 import custom_pb2

__all__ = ["CustomResourceDefinitionStrategy", "STRATEGIES", "storage_version_of"]

CRD = custom_pb2.CustomResource


def storage_version_of(spec: dict[str, Any]) -> str | None:
    return next((v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")), None)


def _set_defaults(content: dict[str, Any]) -> None:
    """Upstream's SetDefaults_CustomResourceDefinition(Spec): singular and listKind from the
    kind, conversion None."""
    spec = content.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    if not spec.get("conversion"):
        spec["conversion"] = {"strategy": "None"}


class CustomResourceDefinitionStrategy(Strategy[CRD]):
    resource = scheme.CUSTOMRESOURCEDEFINITIONS
    storage_path = "apiextensions.k8s.io/customresourcedefinitions"

    def prepare_for_create(self, obj: CRD) -> None:
        obj.apiVersion, obj.kind = self.resource.api_version, self.resource.kind
        content = content_of(obj)
        spec = content["spec"] if isinstance(content.get("spec"), dict) else {}
        stored = storage_version_of(spec)
        content["status"] = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                             "storedVersions": [stored] if stored else []}
        set_content(obj, content)
        if FINALIZER not in obj.metadata.finalizers:
            obj.metadata.finalizers.append(FINALIZER)

    def default(self, obj: CRD) -> None:
        content = content_of(obj)
        _set_defaults(content)
        set_content(obj, content)

    def validate(self, obj: CRD, check: Checker) -> None:
        validate_definition(obj.metadata.name, content_of(obj), check)

    def prepare_for_update(self, new: CRD, old: CRD) -> None:
        """Status is the old one, storedVersions growing by the storage version (upstream's
        PrepareForUpdate)."""
        new.apiVersion, new.kind = old.apiVersion, old.kind
        content, before = content_of(new), content_of(old)
        status = before.get("status") or {}
        spec = content["spec"] if isinstance(content.get("spec"), dict) else {}
        stored = storage_version_of(spec)
        versions = list(status.get("storedVersions") or [])
        if stored and stored not in versions:
            versions.append(stored)
        status["storedVersions"] = versions
        content["status"] = status
        set_content(new, content)

    def prepare_for_status_update(self, new: CRD, old: CRD) -> None:
        status = content_of(new).get("status")
        new.CopyFrom(old)
        content = content_of(old)
        content["status"] = status if isinstance(status, dict) else {}
        set_content(new, content)

    def validate_update(self, new: CRD, old: CRD, check: Checker) -> None:
        before = content_of(old)
        established = (condition(before.get("status") or {}, "Established") or {}).get("status") == "True"
        validate_update(content_of(new), before, established, check)
        validate_stored_versions(content_of(new), check)

    def validate_status(self, new: CRD, check: Checker) -> None:
        validate_stored_versions(content_of(new), check)

    def spec_changed(self, new: CRD, old: CRD) -> bool:
        return bool(content_of(new).get("spec") != content_of(old).get("spec"))


STRATEGIES = (CustomResourceDefinitionStrategy,)

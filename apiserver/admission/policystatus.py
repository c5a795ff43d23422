"""The ValidatingAdmissionPolicy status controller (upstream's type checker in the policy
plugin): each policy whose generation has not been checked is checked against the types of
the resources its matchConstraints name (and its paramKind's), and
`status.typeChecking.expressionWarnings` says what the checker found, with
`status.observedGeneration`. Run by the elected apiserver."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from apiserver.admission.typecheck import DYN, Type, check, resource_type
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of, set_content
from kubeling.periodic import Periodic
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import custom_pb2

__all__ = ["PolicyTypeChecker"]

log = logging.getLogger(__name__)

# The schema of a custom resource's served version (None: a built-in, typed by its message).
CustomSchema = Callable[[ResourceType[Any]], Any]


class PolicyTypeChecker:
    def __init__(self, policies: Registry[custom_pb2.CustomResource], served: Callable[[], Iterable[ResourceType[Any]]],
                 custom_schema: CustomSchema, interval: float = 0.2) -> None:
        self.policies = policies
        self.served = served
        self.custom_schema = custom_schema
        self._seen = -1
        self._loop = Periodic("policy-type-checker", interval, self._pass, first_at_start=True)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    def _types(self, groups: list[str], versions: list[str], plurals: list[str]) -> list[tuple[str, Type]]:
        out = []
        for r in self.served():
            if r.group in groups and r.version in versions and r.plural in plurals:
                gvk = f"{r.group}/{r.version}, Kind={r.kind}" if r.group else f"{r.version}, Kind={r.kind}"
                out.append((gvk, self._type_of(r)))
        return out

    def _param_type(self, kind: dict[str, Any] | None) -> Type:
        if not kind:
            return DYN
        found = next((r for r in self.served() if r.api_version == kind.get("apiVersion") and
                      r.kind == kind.get("kind")), None)
        if found is None:
            return DYN
        return self._type_of(found)

    def _type_of(self, r: ResourceType[Any]) -> Type:
        return resource_type(None, self.custom_schema(r)) if r.custom else resource_type(r.message.DESCRIPTOR)

    def warnings(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        """The policy's expressionWarnings, in upstream's order of fields."""
        types: list[tuple[str, Type]] = []
        for rule in (spec.get("matchConstraints") or {}).get("resourceRules") or []:
            groups, versions, plurals = rule.get("apiGroups") or [], rule.get("apiVersions") or [], \
                [r for r in rule.get("resources") or [] if "/" not in r]
            if "*" in groups or "*" in versions or "*" in plurals:
                continue  # what a wildcard matches is not one type: nothing to check against
            types += self._types(groups, versions, plurals)
        params = self._param_type(spec.get("paramKind"))
        expressions: list[tuple[str, str]] = []
        for i, v in enumerate(spec.get("validations") or []):
            expressions.append((f"spec.validations[{i}].expression", v.get("expression", "")))
            if v.get("messageExpression"):
                expressions.append((f"spec.validations[{i}].messageExpression", v["messageExpression"]))
        for i, a in enumerate(spec.get("auditAnnotations") or []):
            expressions.append((f"spec.auditAnnotations[{i}].valueExpression", a.get("valueExpression", "")))
        out = []
        for field_ref, expression in expressions:
            found = []
            for gvk, object_type in types:
                names = {"object": object_type, "oldObject": object_type, "params": params}
                found += [f"{gvk}: ERROR: <input>: {w}" for w in check(expression, names)]
            if found:
                out.append({"fieldRef": field_ref, "warning": "\n".join(found)})
        return out

    async def _pass(self) -> None:
        cache = self.policies.watch_cache
        if not cache.ready.is_set() or cache.changes == self._seen:
            return
        self._seen = cache.changes
        for entry in list(cache.store.values()):
            policy = entry.obj
            content = content_of(policy)
            status = content.get("status") or {}
            if status.get("observedGeneration") == policy.metadata.generation and "typeChecking" in status:
                continue
            status = {**status, "observedGeneration": policy.metadata.generation,
                      "typeChecking": {"expressionWarnings": self.warnings(content.get("spec") or {})}}
            content["status"] = status
            updated = custom_pb2.CustomResource()
            updated.CopyFrom(policy)
            set_content(updated, content)
            try:
                await self.policies.update(updated, status=True)
            except (errors.Conflict, errors.NotFound):
                self._seen = -1  # changed meanwhile: the next pass checks it again
            except errors.ApiError as err:
                log.warning("validatingadmissionpolicy %s: status: %s", policy.metadata.name, err.message)

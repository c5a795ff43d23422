"""The ValidatingAdmissionPolicy plugin (upstream's
k8s.io/apiserver/pkg/admission/plugin/policy/validating): every binding whose policy
matches the write (the policy's matchConstraints, then the binding's matchResources) runs
the policy's CEL once per parameter object the binding selects: matchConditions first
(false: the policy does not apply), then its variables, validations and audit
annotations. A failed validation is enforced as the binding's validationActions say:
Deny refuses the write (422 Invalid unless the validation gives another reason), Warn
sends a Warning header, Audit records an audit annotation. An expression that cannot be
evaluated counts as the policy's failurePolicy says.

Variables in CEL: `object`, `oldObject`, `request`, `params`, `namespaceObject`,
`variables` and `authorizer` (apiserver.admission.celenv).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission import celenv
from apiserver.admission.chain import EVERY_RESOURCE, AdmissionAttributes, add_warning, audit_annotations
from apiserver.admission.request import (
    admission_request,
    equivalents,
    is_exempt,
    labels_of,
    object_json,
    rule_matches,
)
from apiserver.registry.admissionregistration.rules import compiled_selector
from apiserver.storage.cacher.watch_cache import WatchCache
from kubeling import errors
from kubeling.dynamic import content_of
from kubeling.kjson import to_json
from kubeling.scheme import ResourceType

__all__ = ["ValidatingPolicies", "ParamSource"]

log = logging.getLogger(__name__)

# (apiVersion, kind) of a paramKind -> the objects of that kind now (from the watch cache), or None: not served.
ParamSource = Callable[[str, str], list[Any] | None]
NamespaceObject = Callable[[str], Any | None]
_REASONS: dict[str, type[errors.ApiError]] = {"Forbidden": errors.Forbidden, "Invalid": errors.Invalid,
                                              "RequestEntityTooLarge": errors.RequestEntityTooLarge}


def _matches(match: dict[str, Any], attrs: AdmissionAttributes, served: Iterable[ResourceType[Any]],
             namespace_labels: Mapping[str, str] | None) -> bool:
    """MatchResources: selectors, resourceRules, minus excludeResourceRules."""
    kind = attrs.kind
    group, version = (kind.group, kind.version) if kind is not None else ("", "")
    versions = [(group, version)]
    if match.get("matchPolicy", "Equivalent") == "Equivalent":
        versions += equivalents(kind, served)

    def hit(rules: list[dict[str, Any]]) -> bool:
        return any(rule_matches(r, attrs, g, v) for r in rules for g, v in versions)
    if not hit(match.get("resourceRules") or []) or hit(match.get("excludeResourceRules") or []):
        return False
    objects = compiled_selector(match.get("objectSelector"))
    if objects is None or objects.requirements and not any(
            objects.matches(labels_of(o)) for o in (attrs.obj, attrs.old) if o is not None):
        return False
    namespaces = compiled_selector(match.get("namespaceSelector"))
    if namespaces is None:
        return False
    if not namespaces.requirements or not attrs.namespace and attrs.resource != "namespaces":
        return True
    if attrs.resource == "namespaces":
        return namespaces.matches(labels_of(attrs.obj if attrs.obj is not None else attrs.old))
    return namespace_labels is not None and namespaces.matches(namespace_labels)


@dataclass
class _Failure:
    message: str
    reason: str = "Invalid"


@dataclass
class ValidatingPolicies:
    policies: WatchCache
    bindings: WatchCache
    params: ParamSource
    namespace: NamespaceObject  # the Namespace object by name, from the watch cache
    served: Callable[[], Iterable[ResourceType[Any]]]
    resources: frozenset[str] = EVERY_RESOURCE
    admits_connect = True

    def _policy(self, name: str) -> dict[str, Any] | None:
        found = next((e.obj for e in self.policies.store.values() if e.obj.metadata.name == name), None)
        return None if found is None else {"metadata": to_json(found.metadata), **content_of(found)}

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if is_exempt(attrs) or not self.bindings.store:
            return
        namespace = self.namespace(attrs.namespace) if attrs.namespace else None
        labels = dict(namespace.metadata.labels) if namespace is not None else None
        for entry in sorted(self.bindings.store.values(), key=lambda e: e.obj.metadata.name):
            binding_name = entry.obj.metadata.name
            spec = content_of(entry.obj).get("spec") or {}
            policy = self._policy(spec.get("policyName", ""))
            if policy is None:
                continue
            policy_spec = policy.get("spec") or {}
            served = list(self.served())
            if not _matches(policy_spec.get("matchConstraints") or {}, attrs, served, labels):
                continue
            if spec.get("matchResources") and not _matches(spec["matchResources"], attrs, served, labels):
                continue
            self._run(attrs, policy, binding_name, spec, namespace)

    def _run(self, attrs: AdmissionAttributes, policy: dict[str, Any], binding: str, spec: dict[str, Any],
             namespace: Any) -> None:
        name = policy["metadata"]["name"]
        policy_spec = policy.get("spec") or {}
        actions = spec.get("validationActions") or []
        fail_open = policy_spec.get("failurePolicy") == "Ignore"
        try:
            params = self._params(policy_spec, spec.get("paramRef"), attrs)
        except _ParamsMissing as missing:
            self._enforce(name, binding, actions, _Failure(str(missing)), attrs)
            return
        if params is None:
            return
        request = admission_request(attrs, "")
        base = {"object": request.get("object"), "oldObject": request.get("oldObject"), "request": request,
                "namespaceObject": object_json(None, namespace) if namespace is not None else None,
                "authorizer": celenv.AUTHORIZER_VALUE}
        for param in params:
            variables = {**base, "params": param}
            try:
                failures = self._evaluate(policy_spec, variables, name)
            except _EvalFailed as failed:
                if fail_open:
                    log.warning("ValidatingAdmissionPolicy %s: %s (ignored, failurePolicy Ignore)", name, failed)
                    continue
                failures = [_Failure(str(failed))]
            for failure in failures:
                self._enforce(name, binding, actions, failure, attrs)

    def _params(self, policy_spec: dict[str, Any], ref: dict[str, Any] | None,
                attrs: AdmissionAttributes) -> list[Any] | None:
        """The parameter objects (as JSON) the policy runs with: [None] without paramKind;
        None: nothing to run (parameterNotFoundAction Allow)."""
        kind = policy_spec.get("paramKind")
        if not kind:
            return [None]
        if not ref:
            raise _ParamsMissing(f"failed to configure policy: paramKind {kind.get('kind')} is set but the binding "
                                 "has no paramRef")
        objects = self.params(kind.get("apiVersion", ""), kind.get("kind", ""))
        if objects is None:
            raise _ParamsMissing(f"failed to configure policy: failed to find resource referenced by paramKind: "
                                 f"'{kind.get('apiVersion')}, Kind={kind.get('kind')}'")
        namespace = ref.get("namespace") or attrs.namespace
        found = []
        selector = compiled_selector(ref["selector"]) if "selector" in ref else None
        for obj in objects:
            meta = obj.metadata
            if meta.namespace and meta.namespace != namespace:
                continue
            if ref.get("name") and meta.name != ref["name"]:
                continue
            if selector is not None and not selector.matches(dict(meta.labels)):
                continue
            found.append(obj)
        if found:
            return [object_json(None, o) for o in found]
        if ref.get("parameterNotFoundAction") == "Allow":
            return None
        raise _ParamsMissing("failed to configure binding: no params found for policy binding with `Deny` "
                             "parameterNotFoundAction")

    def _evaluate(self, spec: dict[str, Any], variables: Any, name: str) -> list[_Failure]:
        computed: dict[str, Any] = {}
        variables["variables"] = computed
        context = celenv.context(variables)  # the object converted to CEL once for all expressions
        for cond in spec.get("matchConditions") or []:
            if _value(cond.get("expression", ""), context, f"match condition {cond.get('name')!r}") is not True:
                return []
        for variable in spec.get("variables") or []:
            try:
                computed[variable["name"]] = celenv.evaluate(variable["expression"], context)
            except celenv.EVAL_ERRORS:
                continue  # evaluated when used, upstream: an expression that uses it fails
            context.add_variable("variables", computed)
        variables = context
        failures = []
        for v in spec.get("validations") or []:
            expression = v.get("expression", "")
            if _value(expression, variables, f"expression '{expression}'") is True:
                continue
            message = v.get("message") or f"failed expression: {expression.strip()}"
            if v.get("messageExpression"):
                try:
                    text = celenv.evaluate(v["messageExpression"], variables)
                    if isinstance(text, str) and text.strip() and "\n" not in text:
                        message = text
                except celenv.EVAL_ERRORS:
                    pass
            failures.append(_Failure(message, v.get("reason") or "Invalid"))
        annotations = audit_annotations.get()
        for audit in spec.get("auditAnnotations") or []:
            try:
                value = celenv.evaluate(audit.get("valueExpression", ""), variables)
            except celenv.EVAL_ERRORS as err:
                raise _EvalFailed(f"valueExpression '{audit.get('valueExpression')}' resulted in error: "
                                  f"{err}") from None
            if annotations is not None and value is not None:
                annotations[f"{name}/{audit.get('key')}"] = value if isinstance(value, str) else json.dumps(value)
        return failures

    @staticmethod
    def _enforce(name: str, binding: str, actions: list[str], failure: _Failure, attrs: AdmissionAttributes) -> None:
        if "Warn" in actions:
            add_warning(f"Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{binding}': "
                        f"{failure.message}")
        if "Audit" in actions:
            annotations = audit_annotations.get()
            if annotations is not None:
                annotations["validation.policy.admission.k8s.io/validation_failure"] = json.dumps(
                    [{"message": failure.message, "policy": name, "binding": binding,
                      "expressionIndex": 0, "validationActions": actions}])
        if "Deny" in actions:
            err = _REASONS.get(failure.reason, errors.Invalid)(
                f"ValidatingAdmissionPolicy '{name}' with binding '{binding}' denied request: {failure.message}")
            raise err


class _ParamsMissing(Exception):
    pass


class _EvalFailed(Exception):
    pass


def _value(expression: str, variables: Any, what: str) -> Any:
    try:
        return celenv.evaluate(expression, variables)
    except celenv.EVAL_ERRORS as err:
        raise _EvalFailed(f"{what} resulted in error: {err}") from None

"""ValidatingAdmissionPolicy (status: the type checker's warnings) and
ValidatingAdmissionPolicyBinding (v1), with upstream's defaults and validation: the CEL
of validations, messageExpressions, variables, audit annotations and match conditions
must compile."""

from __future__ import annotations

from typing import Any

from apiserver.admission.celenv import compile_error
from apiserver.registry.admissionregistration.rules import (
    FAILURE_POLICIES,
    MATCH_CONDITIONS,
    MATCH_RESOURCES,
    cel_identifier,
    validate_match_conditions,
    validate_match_resources,
    validate_selector,
)
from apiserver.registry.generic.json_strategy import (
    CONDITIONS,
    LABEL_SELECTOR,
    JsonStrategy,
    array,
    integer,
    obj,
    string,
)
from apiserver.validation import Checker
from kubeling import names, scheme

__all__ = ["ValidatingAdmissionPolicyStrategy", "ValidatingAdmissionPolicyBindingStrategy", "VALIDATION_ACTIONS"]

VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
_REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")
_MAX_AUDIT_ANNOTATIONS = 20


def _cel(expression: str, path: str, check: Checker) -> None:
    problem = compile_error(expression)
    if problem:
        check.invalid(path, expression, problem)


class ValidatingAdmissionPolicyStrategy(JsonStrategy):
    resource = scheme.VALIDATINGADMISSIONPOLICIES
    storage_path = "validatingadmissionpolicies"
    schema = {
        "spec": obj({
            "paramKind": obj({"apiVersion": string(), "kind": string()}),
            "matchConstraints": MATCH_RESOURCES,
            "validations": array(obj({"expression": string(), "message": string(), "reason": string(),
                                      "messageExpression": string()})),
            "failurePolicy": string(default="Fail"),
            "auditAnnotations": array(obj({"key": string(), "valueExpression": string()})),
            "matchConditions": MATCH_CONDITIONS,
            "variables": array(obj({"name": string(), "expression": string()}))}, default={}),
        "status": obj({"observedGeneration": integer(),
                       "typeChecking": obj({"expressionWarnings": array(obj({"fieldRef": string(),
                                                                             "warning": string()}))}),
                       "conditions": CONDITIONS})}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        if "failurePolicy" not in spec:
            check.add("spec.failurePolicy", "Required value")
        else:
            check.unsupported("spec.failurePolicy", spec["failurePolicy"], FAILURE_POLICIES)
        if "paramKind" in spec:
            _param_kind(spec["paramKind"], check)
        match = spec.get("matchConstraints")
        if match is None:
            check.add("spec.matchConstraints", "Required value")
        else:
            validate_match_resources(match, "spec.matchConstraints", check)
            if not match.get("resourceRules"):
                check.add("spec.matchConstraints.resourceRules", "Required value")
        validate_match_conditions(spec.get("matchConditions") or [], "spec.matchConditions", check,
                                  lambda text: compile_error(text))
        for i, variable in enumerate(spec.get("variables") or []):
            path = f"spec.variables[{i}]"
            name = (variable.get("name") or "").strip()
            if not name:
                check.add(f"{path}.name", "Required value: name is not specified")
            elif not cel_identifier(variable["name"]):
                check.invalid(f"{path}.name", variable["name"], "name is not a valid CEL identifier")
            if not (variable.get("expression") or "").strip():
                check.add(f"{path}.expression", "Required value: expression is not specified")
            else:
                _cel(variable["expression"], f"{path}.expression", check)
        validations, audits = spec.get("validations") or [], spec.get("auditAnnotations") or []
        if not validations and not audits:
            for key in ("validations", "auditAnnotations"):
                check.add(f"spec.{key}", "Required value: validations or auditAnnotations must contain at least "
                                         "one item")
        for i, v in enumerate(validations):
            _validation(v, f"spec.validations[{i}]", check)
        if len(audits) > _MAX_AUDIT_ANNOTATIONS:
            check.add("spec.auditAnnotations", f"Invalid value: must not have more than {_MAX_AUDIT_ANNOTATIONS} "
                                               "auditAnnotations")
        keys: set[str] = set()
        for i, a in enumerate(audits):
            path = f"spec.auditAnnotations[{i}]"
            key = a.get("key") or ""
            check.name(f"{path}.key", f"policy/{key}", names.qualified_name)
            if key in keys:
                check.add(f"{path}.key", f'Duplicate value: "{key}"')
            keys.add(key)
            value = (a.get("valueExpression") or "").strip()
            if not value:
                check.add(f"{path}.valueExpression", "Required value: valueExpression is not specified")
            elif len(value) > 5 * 1024:
                check.add(f"{path}.valueExpression", "Required value: must not exceed 5120 bytes in length")
            else:
                _cel(value, f"{path}.valueExpression", check)


def _param_kind(kind: dict[str, Any], check: Checker) -> None:
    api_version = kind.get("apiVersion") or ""
    if not api_version:
        check.add("spec.paramKind.apiVersion", "Required value")
    elif api_version.count("/") > 1:
        check.invalid("spec.paramKind.apiVersion", api_version,
                      f"unexpected GroupVersion string: {api_version}")
    else:
        group, _, version = api_version.rpartition("/")
        if group and names.dns1123_subdomain(group):
            check.invalid("spec.paramKind.apiVersion", group, ",".join(names.dns1123_subdomain(group)))
        if not version:
            check.invalid("spec.paramKind.apiVersion", api_version, "version must be specified")
        elif names.dns1035_label(version):
            check.invalid("spec.paramKind.apiVersion", version, ",".join(names.dns1035_label(version)))
    name = kind.get("kind") or ""
    if not name:
        check.add("spec.paramKind.kind", "Required value")
    elif names.dns1035_label(name.lower()):
        check.invalid("spec.paramKind.kind", name, "may have mixed case, but should otherwise match: "
                      + ",".join(names.dns1035_label(name.lower())))


def _validation(v: dict[str, Any], path: str, check: Checker) -> None:
    expression = (v.get("expression") or "").strip()
    if not expression:
        check.add(f"{path}.expression", "Required value: expression is not specified")
    else:
        _cel(v["expression"], f"{path}.expression", check)
    message_expression = v.get("messageExpression")
    if message_expression is not None and message_expression and not message_expression.strip():
        check.invalid(f"{path}.messageExpression", message_expression, "must be non-empty if specified")
    elif message_expression:
        _cel(message_expression, f"{path}.messageExpression", check)
    message = v.get("message")
    if message and not message.strip():
        check.invalid(f"{path}.message", message, "message must be non-empty if specified")
    elif message and ("\n" in message.strip() or "\r" in message.strip()):
        check.invalid(f"{path}.message", message, "message must not contain line breaks")
    if "reason" in v:
        check.unsupported(f"{path}.reason", v["reason"], _REASONS)


class ValidatingAdmissionPolicyBindingStrategy(JsonStrategy):
    resource = scheme.VALIDATINGADMISSIONPOLICYBINDINGS
    storage_path = "validatingadmissionpolicybindings"
    schema = {"spec": obj({
        "policyName": string(),
        "paramRef": obj({"name": string(), "namespace": string(), "selector": LABEL_SELECTOR,
                         "parameterNotFoundAction": string()}),
        "matchResources": MATCH_RESOURCES,
        "validationActions": array(string())}, default={})}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        policy = spec.get("policyName") or ""
        if not policy:
            check.add("spec.policyName", "Required value")
        else:
            check.name("spec.policyName", policy, names.dns1123_subdomain)
        ref = spec.get("paramRef")
        if ref is not None:
            _param_ref(ref, check)
        validate_match_resources(spec.get("matchResources"), "spec.matchResouces", check)  # upstream's spelling
        actions: list[str] = spec.get("validationActions") or []
        seen: set[str] = set()
        for i, action in enumerate(actions):
            check.unsupported(f"spec.validationActions[{i}]", action, VALIDATION_ACTIONS)
            if action in seen:
                check.add(f"spec.validationActions[{i}]", f'Duplicate value: "{action}"')
            seen.add(action)
        if {"Deny", "Warn"} <= seen:
            shown = "[]admissionregistration.ValidationAction{" + ", ".join(f'"{a}"' for a in actions) + "}"
            check.add("spec.validationActions", f"Invalid value: {shown}: must not contain both Deny and Warn "
                                                "(repeating the same validation failure information in the API "
                                                "response and headers serves no purpose)")
        if not seen:
            check.add("spec.validationActions", "Required value: at least one validation action is required")


def _param_ref(ref: dict[str, Any], check: Checker) -> None:
    path = "spec.paramRef"
    name = ref.get("name") or ""
    if name:
        check.name(f"{path}.name", name, names.path_segment_name)
        if "selector" in ref:
            check.add(f"{path}.name", "Forbidden: name and selector are mutually exclusive")
    if "selector" in ref:
        validate_selector(ref["selector"], f"{path}.selector", check)
        if name:
            check.add(f"{path}.selector", "Forbidden: name and selector are mutually exclusive")
    if not name and "selector" not in ref:
        check.add(path, "Required value: one of name or selector must be specified")
    action = ref.get("parameterNotFoundAction") or ""
    if not action:
        check.add(f"{path}.parameterNotFoundAction", "Required value")
    else:
        check.unsupported(f"{path}.parameterNotFoundAction", action, ("Deny", "Allow"))

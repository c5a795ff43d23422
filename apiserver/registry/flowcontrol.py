"""flowcontrol.apiserver.k8s.io/v1: FlowSchemas (which requests go to which priority
level, and how they are told apart into flows) and PriorityLevelConfigurations (how many
seats a level has and what happens to what waits), kept as JSON (json_strategy) with
upstream's defaults and validation (pkg/apis/flowcontrol/validation). What enforces them
is apiserver/flowcontrol."""

from __future__ import annotations

from typing import Any

from apiserver.registry.generic.json_strategy import CONDITIONS, CR, JsonStrategy, array, boolean, integer, obj, string
from apiserver.validation import Checker
from kubeling import scheme
from kubeling.dynamic import content_of

__all__ = ["STRATEGIES", "FlowSchemaStrategy", "PriorityLevelConfigurationStrategy"]

_NAMES = obj({"name": string()})
_SUBJECT = obj({"kind": string(), "user": _NAMES, "group": _NAMES,
                "serviceAccount": obj({"namespace": string(), "name": string()})})
_RESOURCE_RULE = obj({"verbs": array(string()), "apiGroups": array(string()), "resources": array(string()),
                      "clusterScope": boolean(), "namespaces": array(string())})
_NON_RESOURCE_RULE = obj({"verbs": array(string()), "nonResourceURLs": array(string())})
_QUEUING = obj({"queues": integer(default=64), "handSize": integer(default=8),
                "queueLengthLimit": integer(default=50)})
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")


class FlowSchemaStrategy(JsonStrategy):
    resource = scheme.FLOWSCHEMAS
    storage_path = "flowschemas"
    schema = {
        "spec": obj({
            "priorityLevelConfiguration": _NAMES,
            "matchingPrecedence": integer(default=1000),
            "distinguisherMethod": obj({"type": string()}),
            "rules": array(obj({"subjects": array(_SUBJECT), "resourceRules": array(_RESOURCE_RULE),
                                "nonResourceRules": array(_NON_RESOURCE_RULE)}))}, default={}),
        "status": obj({"conditions": CONDITIONS})}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        if not (spec.get("priorityLevelConfiguration") or {}).get("name"):
            check.add("spec.priorityLevelConfiguration.name", "Required value: must reference a priority level")
        precedence = spec.get("matchingPrecedence", 1000)
        if not 1 <= precedence <= 10000:
            check.invalid("spec.matchingPrecedence", precedence, "must be between 1 and 10000, inclusive")
        method = spec.get("distinguisherMethod")
        if method is not None:
            check.unsupported("spec.distinguisherMethod.type", method.get("type", ""), ("ByNamespace", "ByUser"))
        for i, rule in enumerate(spec.get("rules") or []):
            _rule(rule, f"spec.rules[{i}]", check)

    def validate(self, obj: CR, check: Checker) -> None:
        super().validate(obj, check)
        if (content_of(obj).get("spec") or {}).get("matchingPrecedence") == 1 and obj.metadata.name != "exempt":
            check.invalid("spec.matchingPrecedence", 1, "only the schema named 'exempt' may have matchingPrecedence 1")


def _rule(rule: dict[str, Any], path: str, check: Checker) -> None:
    subjects = rule.get("subjects") or []
    if not subjects:
        check.add(f"{path}.subjects", "Required value: subjects must contain at least one value")
    for j, subject in enumerate(subjects):
        at = f"{path}.subjects[{j}]"
        kind = subject.get("kind", "")
        check.unsupported(f"{at}.kind", kind, _SUBJECT_KINDS)
        field = {"Group": "group", "User": "user", "ServiceAccount": "serviceAccount"}.get(kind)
        if field is not None and not (subject.get(field) or {}).get("name"):
            check.add(f"{at}.{field}.name", "Required value")
        if kind == "ServiceAccount" and not (subject.get("serviceAccount") or {}).get("namespace"):
            check.add(f"{at}.serviceAccount.namespace", "Required value")
    resource_rules, non_resource_rules = rule.get("resourceRules") or [], rule.get("nonResourceRules") or []
    if not resource_rules and not non_resource_rules:
        check.add(path, "Required value: at least one of resourceRules and nonResourceRules has to be non-empty")
    for j, r in enumerate(resource_rules):
        at = f"{path}.resourceRules[{j}]"
        for field in ("verbs", "apiGroups", "resources"):
            if not r.get(field):
                check.add(f"{at}.{field}", f"Required value: {field} must contain at least one value")
        if not r.get("clusterScope") and not r.get("namespaces"):
            check.add(f"{at}.namespaces", "Required value: resource rules that are not cluster scoped must supply "
                                          "at least one namespace")
    for j, r in enumerate(non_resource_rules):
        at = f"{path}.nonResourceRules[{j}]"
        for field in ("verbs", "nonResourceURLs"):
            if not r.get(field):
                check.add(f"{at}.{field}", f"Required value: {field} must contain at least one value")


class PriorityLevelConfigurationStrategy(JsonStrategy):
    resource = scheme.PRIORITYLEVELCONFIGURATIONS
    storage_path = "prioritylevelconfigurations"
    schema = {
        "spec": obj({
            "type": string(),
            "limited": obj({"nominalConcurrencyShares": integer(default=30), "lendablePercent": integer(default=0),
                            "borrowingLimitPercent": integer(),
                            "limitResponse": obj({"type": string(), "queuing": _QUEUING})}),
            "exempt": obj({"nominalConcurrencyShares": integer(default=0), "lendablePercent": integer(default=0)})},
            default={}),
        "status": obj({"conditions": CONDITIONS})}

    def set_defaults(self, content: dict[str, Any]) -> None:
        limited = (content.get("spec") or {}).get("limited")
        response = (limited or {}).get("limitResponse")
        if response is not None and response.get("type") == "Queue" and "queuing" not in response:
            response["queuing"] = {"queues": 64, "handSize": 8, "queueLengthLimit": 50}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        kind = spec.get("type", "")
        check.unsupported("spec.type", kind, ("Exempt", "Limited"))
        limited, exempt = spec.get("limited"), spec.get("exempt")
        if kind == "Limited":
            if limited is None:
                check.add("spec.limited", "Required value: must not be empty when type is Limited")
            if exempt is not None:
                check.add("spec.exempt", "Forbidden: must be nil if the type is Limited")
        if kind == "Exempt" and limited is not None:
            check.add("spec.limited", "Forbidden: must be nil if the type is not Limited")
        for part, at in ((limited, "spec.limited"), (exempt, "spec.exempt")):
            if part is None:
                continue
            if part.get("nominalConcurrencyShares", 0) < 0:
                check.invalid(f"{at}.nominalConcurrencyShares", part["nominalConcurrencyShares"],
                              "must be a non-negative integer")
            if not 0 <= part.get("lendablePercent", 0) <= 100:
                check.invalid(f"{at}.lendablePercent", part["lendablePercent"], "must be between 0 and 100, inclusive")
        response = (limited or {}).get("limitResponse")
        if limited is not None:
            if response is None:
                check.add("spec.limited.limitResponse.type", "Required value")
                return
            check.unsupported("spec.limited.limitResponse.type", response.get("type", ""), ("Queue", "Reject"))
            queuing = response.get("queuing")
            if response.get("type") == "Reject" and queuing is not None:
                check.add("spec.limited.limitResponse.queuing", "Forbidden: must be nil if limited.limitResponse.type "
                                                                "is not Limited")
            if response.get("type") == "Queue" and queuing is not None:
                _queuing(queuing, check)


def _queuing(queuing: dict[str, Any], check: Checker) -> None:
    at = "spec.limited.limitResponse.queuing"
    queues, hand = queuing.get("queues", 64), queuing.get("handSize", 8)
    if queuing.get("queueLengthLimit", 50) <= 0:
        check.invalid(f"{at}.queueLengthLimit", queuing["queueLengthLimit"], "must be positive")
    if queues <= 0:
        check.invalid(f"{at}.queues", queues, "must be positive")
    elif hand > queues:
        check.invalid(f"{at}.handSize", hand, f"should not be greater than queues ({queues})")
    if hand <= 0:
        check.invalid(f"{at}.handSize", hand, "must be positive")


STRATEGIES = (FlowSchemaStrategy, PriorityLevelConfigurationStrategy)

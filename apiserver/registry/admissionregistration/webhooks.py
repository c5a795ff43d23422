"""ValidatingWebhookConfiguration and MutatingWebhookConfiguration (v1), with upstream's
defaults (failurePolicy Fail, matchPolicy Equivalent, empty selectors, 10 s, scope `*`,
reinvocationPolicy Never, service port 443) and validation. As upstream, an update is held
to the stricter rules (sideEffects None/NoneOnDryRun, a recognized review version, unique
names) only where the stored object already met them."""

from __future__ import annotations

from typing import Any, ClassVar

from apiserver.admission.celenv import compile_error
from apiserver.registry.admissionregistration.rules import (
    CLIENT_CONFIG,
    FAILURE_POLICIES,
    MATCH_CONDITIONS,
    MATCH_POLICIES,
    RULE,
    validate_client_config,
    validate_match_conditions,
    validate_rule,
    validate_selector,
)
from apiserver.registry.generic.json_strategy import LABEL_SELECTOR, JsonStrategy, array, integer, obj, string
from apiserver.validation import Checker
from kubeling import names, scheme
from kubeling.dynamic import content_of
from protos.kubeling.v1 import custom_pb2

__all__ = ["ValidatingWebhookConfigurationStrategy", "MutatingWebhookConfigurationStrategy", "REVIEW_VERSIONS"]

CR = custom_pb2.CustomResource
REVIEW_VERSIONS = ("v1", "v1beta1")
_ALL_SIDE_EFFECTS = ("None", "NoneOnDryRun", "Some", "Unknown")
_NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_REINVOCATION = ("IfNeeded", "Never")

_WEBHOOK = {"name": string(), "clientConfig": CLIENT_CONFIG, "rules": array(RULE),
            "failurePolicy": string(default="Fail"), "matchPolicy": string(default="Equivalent"),
            "namespaceSelector": {**LABEL_SELECTOR, "default": {}}, "objectSelector": {**LABEL_SELECTOR, "default": {}},
            "sideEffects": string(), "timeoutSeconds": integer(default=10),
            "admissionReviewVersions": array(string()), "matchConditions": MATCH_CONDITIONS}


def _fully_qualified(name: str) -> list[str]:
    errs = names.dns1123_subdomain(name)
    if not errs and len(name.split(".")) < 3:
        errs = ["should be a domain with at least three segments separated by dots"]
    return errs


class _WebhookConfigurationStrategy(JsonStrategy):
    mutating: ClassVar[bool] = False
    garbage_collected = True

    def validate_create(self, obj: CR, check: Checker) -> None:
        if not check.violations:
            self._validate(content_of(obj), check, strict=True, old=None)

    def validate_content_update(self, content: dict[str, Any], before: dict[str, Any], check: Checker) -> None:
        self._validate(content, check, strict=False, old=before)

    def _validate(self, content: dict[str, Any], check: Checker, *, strict: bool,
                  old: dict[str, Any] | None) -> None:
        hooks: list[dict[str, Any]] = content.get("webhooks") or []
        before: list[dict[str, Any]] = (old or {}).get("webhooks") or []
        no_side_effects = strict or all(h.get("sideEffects") in _NO_SIDE_EFFECTS for h in before)
        known_versions = strict or all(not h.get("admissionReviewVersions")
                                       or set(h["admissionReviewVersions"]) & set(REVIEW_VERSIONS) for h in before)
        unique = strict or len({h.get("name") for h in before}) == len(before)
        same_conditions = old is not None and len(before) == len(hooks) and all(
            a.get("matchConditions") == b.get("matchConditions") for a, b in zip(hooks, before, strict=True))
        seen: set[str] = set()
        for i, hook in enumerate(hooks):
            path = f"webhooks[{i}]"
            self._webhook(hook, path, check, no_side_effects, same_conditions)
            _review_versions(hook.get("admissionReviewVersions") or [], f"{path}.admissionReviewVersions",
                             known_versions, check)
            name = hook.get("name") or ""
            if unique and name:
                if name in seen:
                    check.add(f"{path}.name", f'Duplicate value: "{name}"')
                seen.add(name)

    def _webhook(self, hook: dict[str, Any], path: str, check: Checker, no_side_effects: bool,
                 same_conditions: bool) -> None:
        name = hook.get("name") or ""
        if not name:
            check.add(f"{path}.name", "Required value")
        else:
            check.name(f"{path}.name", name, _fully_qualified)
        for i, rule in enumerate(hook.get("rules") or []):
            validate_rule(rule, f"{path}.rules[{i}]", check)
        check.unsupported(f"{path}.failurePolicy", hook.get("failurePolicy"), FAILURE_POLICIES)
        check.unsupported(f"{path}.matchPolicy", hook.get("matchPolicy"), MATCH_POLICIES)
        allowed = _NO_SIDE_EFFECTS if no_side_effects else _ALL_SIDE_EFFECTS
        if "sideEffects" not in hook:
            check.add(f"{path}.sideEffects", f"Required value: must specify one of {', '.join(allowed)}")
        else:
            check.unsupported(f"{path}.sideEffects", hook["sideEffects"], allowed)
        timeout = hook.get("timeoutSeconds", 10)
        if not 1 <= timeout <= 30:
            check.invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds")
        validate_selector(hook.get("namespaceSelector"), f"{path}.namespaceSelector", check)
        validate_selector(hook.get("objectSelector"), f"{path}.objectSelector", check)
        if self.mutating:
            check.unsupported(f"{path}.reinvocationPolicy", hook.get("reinvocationPolicy"), _REINVOCATION)
        validate_client_config(hook.get("clientConfig") or {}, f"{path}.clientConfig", check)
        if not same_conditions:
            validate_match_conditions(hook.get("matchConditions") or [], f"{path}.matchConditions", check,
                                      lambda text: compile_error(text, params=False))


def _review_versions(versions: list[str], path: str, required_known: bool, check: Checker) -> None:
    if not versions:
        check.add(path, f"Required value: must specify one of {', '.join(REVIEW_VERSIONS)}")
        return
    seen: set[str] = set()
    for i, v in enumerate(versions):
        if v in seen:
            check.invalid(f"{path}[{i}]", v, "duplicate version")
            continue
        seen.add(v)
        check.name(f"{path}[{i}]", v, names.dns1035_label)
    if required_known and not seen & set(REVIEW_VERSIONS):
        shown = "[]string{" + ", ".join(f'"{v}"' for v in versions) + "}"
        check.add(path, f"Invalid value: {shown}: must include at least one of {', '.join(REVIEW_VERSIONS)}")


class ValidatingWebhookConfigurationStrategy(_WebhookConfigurationStrategy):
    resource = scheme.VALIDATINGWEBHOOKCONFIGURATIONS
    storage_path = "validatingwebhookconfigurations"  # upstream's keys
    schema = {"webhooks": array(obj(_WEBHOOK))}


class MutatingWebhookConfigurationStrategy(_WebhookConfigurationStrategy):
    resource = scheme.MUTATINGWEBHOOKCONFIGURATIONS
    storage_path = "mutatingwebhookconfigurations"
    mutating = True
    schema = {"webhooks": array(obj({**_WEBHOOK, "reinvocationPolicy": string(default="Never")}))}

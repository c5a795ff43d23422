"""Privilege-escalation prevention for RBAC writes, as upstream's policy-based storage
(pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased) and
its rule coverage check (pkg/registry/rbac/validation/policy_comparator.go): a user may
write a role only with rules it holds itself (or with the `escalate` verb on it), and a
binding only to a role whose rules it holds (or with the `bind` verb on that role).
`system:masters` may do anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.admission.chain import DELETE, AdmissionAttributes, forbidden
from apiserver.auth.authentication import UserInfo
from apiserver.auth.authorization import Authorizer
from apiserver.auth.rbac import ALL, Attributes, Policy, PolicyRule, rule_from_proto, rules_for
from apiserver.registry.rbac import GROUP

__all__ = ["EscalationCheck", "covers", "compact_string"]

_MASTERS = "system:masters"


def breakdown(rule: PolicyRule) -> list[PolicyRule]:
    """One rule per verb, group, resource and name (or URL): the units coverage is judged on."""
    out: list[PolicyRule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for name in rule.resource_names or ("",):
                names = (name,) if name else ()
                out.extend(PolicyRule((verb,), (group,), (resource,), names) for verb in rule.verbs)
    for url in rule.non_resource_urls:
        out.extend(PolicyRule((verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return out


def _resource_covers(owned: tuple[str, ...], wanted: str) -> bool:
    if ALL in owned or wanted in owned:
        return True
    _, slash, sub = wanted.partition("/")
    return bool(slash) and f"*/{sub}" in owned


def _url_covers(owned: tuple[str, ...], wanted: str) -> bool:
    return any(o == wanted or (o.endswith("*") and wanted.startswith(o[:-1])) for o in owned)


def rule_covers(owner: PolicyRule, sub: PolicyRule) -> bool:
    if not (ALL in owner.verbs or set(sub.verbs) <= set(owner.verbs)):
        return False
    if not (ALL in owner.api_groups or set(sub.api_groups) <= set(owner.api_groups)):
        return False
    if not all(_resource_covers(owner.resources, r) for r in sub.resources):
        return False
    if not all(_url_covers(owner.non_resource_urls, u) for u in sub.non_resource_urls):
        return False
    if not sub.resource_names:
        return not owner.resource_names
    return not owner.resource_names or set(sub.resource_names) <= set(owner.resource_names)


def covers(owned: list[PolicyRule], wanted: list[PolicyRule]) -> list[PolicyRule]:
    """The parts of `wanted` no rule in `owned` covers (empty: all covered)."""
    return [unit for rule in wanted for unit in breakdown(rule) if not any(rule_covers(o, unit) for o in owned)]


def _compact(rules: list[PolicyRule]) -> list[PolicyRule]:
    """Rules on one group and resource without names merged into one with all their verbs."""
    merged: dict[tuple[str, str], list[str]] = {}
    out: list[PolicyRule] = []
    for r in rules:
        if len(r.api_groups) == 1 and len(r.resources) == 1 and not r.resource_names and not r.non_resource_urls:
            verbs = merged.setdefault((r.api_groups[0], r.resources[0]), [])
            verbs.extend(v for v in r.verbs if v not in verbs)
        else:
            out.append(r)
    out.extend(PolicyRule(tuple(verbs), (g,), (res,)) for (g, res), verbs in merged.items())
    return out


def _go_quoted(values: tuple[str, ...]) -> str:
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def compact_string(rule: PolicyRule) -> str:
    """Upstream's rbacv1helpers.CompactString: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`."""
    parts = [f"{label}:{_go_quoted(values)}" for label, values in (
        ("APIGroups", rule.api_groups), ("Resources", rule.resources), ("NonResourceURLs", rule.non_resource_urls),
        ("ResourceNames", rule.resource_names), ("Verbs", rule.verbs)) if values]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, missing: list[PolicyRule]) -> str:
    lines = sorted({compact_string(r) for r in _compact(missing)})
    return (f'user "{user.name}" (groups={_go_quoted(tuple(user.groups))}) is attempting to grant RBAC '
            "permissions not currently held:\n" + "\n".join(lines))


@dataclass
class EscalationCheck:
    """The admission step for the four RBAC resources."""

    authorizer: Authorizer
    policy: Callable[[], Policy]
    resources: frozenset[str] = frozenset({"roles", "clusterroles", "rolebindings", "clusterrolebindings"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation == DELETE or _MASTERS in attrs.user.groups:
            return
        obj: Any = attrs.obj
        group_resource = f"{attrs.resource}.{GROUP}"
        if attrs.resource in ("roles", "clusterroles"):
            if self._allowed(attrs.user, "escalate", attrs.resource, attrs.namespace, attrs.name):
                return
            wanted = [rule_from_proto(r) for r in obj.rules]
        else:
            ref = obj.roleRef
            if attrs.old is not None and attrs.old.roleRef == ref and list(attrs.old.subjects) == list(obj.subjects):
                return  # only metadata changed (upstream: "only mutating GC fields")
            role_resource = "roles" if ref.kind == "Role" else "clusterroles"
            if self._allowed(attrs.user, "bind", role_resource, attrs.namespace, ref.name):
                return
            policy = self.policy()
            role = policy.roles.get((attrs.namespace if ref.kind == "Role" else "", ref.name))
            if role is None:
                raise forbidden(attrs, group_resource, f'{role_resource}.{GROUP} "{ref.name}" not found')
            wanted = list(role.rules)
        missing = covers(rules_for(self.policy(), attrs.user, attrs.namespace), wanted)
        if missing:
            raise forbidden(attrs, group_resource, escalation_message(attrs.user, missing))

    def _allowed(self, user: UserInfo, verb: str, resource: str, namespace: str, name: str) -> bool:
        allowed, _ = self.authorizer.authorize(Attributes(user, verb, True, namespace, GROUP, resource, "", name))
        return allowed

"""Whether a request may go on (`--authorization-mode`, a comma-separated list as
upstream's): AlwaysAllow (the default), Node (kubelets, `apiserver.auth.node`) and RBAC
(the stored Roles and bindings). The modes are asked in order; the first that allows
decides, and a request none allows is a 403 Forbidden worded exactly as upstream's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from apiserver.auth.authentication import UserInfo
from apiserver.auth.node import NodeAuthorizer
from apiserver.auth.rbac import Attributes, Policy, PolicyRule, RBACAuthorizer, forbidden_message
from kubeling import errors
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["EVERYTHING", "MODES", "Authorizer", "Union", "authorizer_for", "parse_modes", "require"]

MODES = ("AlwaysAllow", "Node", "RBAC")


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> tuple[bool, str]: ...

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]: ...


# What AlwaysAllow lets anyone do, as its RulesFor says it.
EVERYTHING = [PolicyRule(("*",), ("*",), ("*",)), PolicyRule(("*",), non_resource_urls=("*",))]


class AlwaysAllow:
    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        return True, "AlwaysAllow"

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        return list(EVERYTHING)


@dataclass
class Union:
    """Upstream's union authorizer: the first that allows decides."""

    parts: Sequence[Authorizer]

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        reasons = []
        for part in self.parts:
            allowed, why = part.authorize(attrs)
            if allowed:
                return True, why
            if why:
                reasons.append(why)
        return False, "\n".join(reasons)

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        rules: list[PolicyRule] = []
        for part in self.parts:
            rules.extend(r for r in part.rules_for(user, namespace) if r not in rules)
        return rules


def parse_modes(modes: str) -> list[str]:
    names = [m.strip() for m in modes.split(",") if m.strip()]
    if not names:
        raise ValueError("--authorization-mode: at least one mode is required")
    for name in names:
        if name not in MODES:
            raise ValueError(f"--authorization-mode: {name!r} is not one of {', '.join(MODES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--authorization-mode: {modes!r} names a mode twice")
    return names


def authorizer_for(modes: str, policy: Callable[[], Policy],
                   pods_on_node: Callable[[str], Sequence[Pod]] | None = None) -> Authorizer | None:
    """None: every request is allowed (no attributes need computing)."""
    names = parse_modes(modes)
    if names == ["AlwaysAllow"]:
        return None
    parts: list[Authorizer] = []
    for name in names:
        if name == "Node":
            parts.append(NodeAuthorizer(pods_on_node=pods_on_node) if pods_on_node is not None else NodeAuthorizer())
        elif name == "RBAC":
            parts.append(RBACAuthorizer(policy))
        else:
            parts.append(AlwaysAllow())
    return parts[0] if len(parts) == 1 else Union(parts)


def uses_rbac(modes: str) -> bool:
    return "RBAC" in parse_modes(modes)


def require(authorizer: Authorizer, attrs: Attributes) -> None:
    allowed, why = authorizer.authorize(attrs)
    if not allowed:
        # upstream's forbiddenMessage: the denying authorizers' reasons follow
        raise errors.Forbidden(forbidden_message(attrs) + (f": {why}" if why else ""))

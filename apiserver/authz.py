"""Whether a request may go on (`--authorization-mode`): AlwaysAllow (the default, until
the RBAC objects are served), or RBAC over upstream's bootstrap policy. A refusal is a
403 Forbidden worded exactly as upstream's."""

from __future__ import annotations

from typing import Protocol

from apiserver.authn import UserInfo
from apiserver.bootstrappolicy import bootstrap_policy
from apiserver.rbac import Attributes, PolicyRule, RBACAuthorizer, forbidden_message
from kubeling import errors

__all__ = ["EVERYTHING", "MODES", "Authorizer", "authorizer_for", "require"]

MODES = ("AlwaysAllow", "RBAC")


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> tuple[bool, str]: ...

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]: ...


# What AlwaysAllow lets anyone do, as its RulesFor says it.
EVERYTHING = [PolicyRule(("*",), ("*",), ("*",)), PolicyRule(("*",), non_resource_urls=("*",))]


def authorizer_for(mode: str) -> Authorizer | None:
    """None: every request is allowed (no attributes need computing)."""
    if mode == "AlwaysAllow":
        return None
    if mode == "RBAC":
        return RBACAuthorizer(bootstrap_policy())
    raise ValueError(f"--authorization-mode: {mode!r} is not one of {', '.join(MODES)}")


def require(authorizer: Authorizer, attrs: Attributes) -> None:
    allowed, _ = authorizer.authorize(attrs)
    if not allowed:
        raise errors.Forbidden(forbidden_message(attrs))

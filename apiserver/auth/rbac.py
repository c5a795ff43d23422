"""RBAC's decision, as upstream's rbac authorizer (plugin/pkg/auth/authorizer/rbac) and
its rule helpers (pkg/apis/rbac/v1/evaluation_helpers.go): a request's attributes are
allowed when a rule of a role bound to its user — a ClusterRole through a
ClusterRoleBinding anywhere, a Role or ClusterRole through a RoleBinding in the request's
namespace — covers its verb, API group, resource (with subresource), name, or its path
for non-resource requests. Nothing is denied explicitly: no rule, no access.

The roles and bindings come from a `Policy`: a snapshot of the stored RBAC objects
(`apiserver.auth.rbac_policy`), or a fixed one in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from apiserver.auth.authentication import UserInfo
from protos.kubeling.v1 import rbac_pb2

__all__ = ["Attributes", "Binding", "Policy", "PolicyRule", "RBACAuthorizer", "Role", "RoleRef", "Subject",
           "forbidden_message", "rules_for", "rule_allows", "role_from_proto", "binding_from_proto", "rule_to_proto",
           "policy_of", "rule_from_proto", "ALL"]

ALL = "*"


@dataclass(frozen=True)
class PolicyRule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Role:
    name: str
    rules: tuple[PolicyRule, ...]
    namespace: str = ""  # "": a ClusterRole


@dataclass(frozen=True)
class Subject:
    kind: str  # User, Group, ServiceAccount
    name: str
    namespace: str = ""  # ServiceAccounts'


@dataclass(frozen=True)
class RoleRef:
    kind: str  # Role or ClusterRole
    name: str


@dataclass(frozen=True)
class Binding:
    name: str
    role_ref: RoleRef
    subjects: tuple[Subject, ...]
    namespace: str = ""  # "": a ClusterRoleBinding


@dataclass(frozen=True)
class Attributes:
    """What a request does (upstream's authorizer.Attributes)."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""  # non-resource requests


@dataclass
class Policy:
    """Roles by (namespace, name) — ClusterRoles under "" — and every binding."""

    roles: dict[tuple[str, str], Role] = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)

    def add_role(self, role: Role) -> None:
        self.roles[(role.namespace, role.name)] = role

    def role_of(self, binding: Binding) -> Role | None:
        """The role a binding refers to (a RoleBinding's Role is in its own namespace)."""
        namespace = binding.namespace if binding.role_ref.kind == "Role" else ""
        return self.roles.get((namespace, binding.role_ref.name))


def verb_matches(rule: PolicyRule, verb: str) -> bool:
    return ALL in rule.verbs or verb in rule.verbs


def api_group_matches(rule: PolicyRule, group: str) -> bool:
    return ALL in rule.api_groups or group in rule.api_groups


def resource_matches(rule: PolicyRule, combined: str, subresource: str) -> bool:
    for resource in rule.resources:
        if resource in (ALL, combined):
            return True
        # "*/subresource" covers that subresource of every resource
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: PolicyRule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def non_resource_url_matches(rule: PolicyRule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url in (ALL, path) or (url.endswith("*") and path.startswith(url.rstrip("*"))):
            return True
    return False


def rule_allows(attrs: Attributes, rule: PolicyRule) -> bool:
    if not attrs.resource_request:
        return verb_matches(rule, attrs.verb) and non_resource_url_matches(rule, attrs.path)
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return (verb_matches(rule, attrs.verb) and api_group_matches(rule, attrs.api_group)
            and resource_matches(rule, combined, attrs.subresource) and resource_name_matches(rule, attrs.name))


def applies_to(subject: Subject, user: UserInfo, binding_namespace: str) -> bool:
    """Whether a binding's subject is this user (upstream's appliesToUser)."""
    if subject.kind == "User":
        return subject.name == user.name
    if subject.kind == "Group":
        return subject.name in user.groups
    if subject.kind == "ServiceAccount":
        namespace = subject.namespace or binding_namespace
        return bool(namespace) and user.name == f"system:serviceaccount:{namespace}:{subject.name}"
    return False


def rule_from_proto(rule: rbac_pb2.PolicyRule) -> PolicyRule:
    return PolicyRule(tuple(rule.verbs), tuple(rule.apiGroups), tuple(rule.resources), tuple(rule.resourceNames),
                      tuple(rule.nonResourceURLs))


def rule_to_proto(rule: PolicyRule) -> rbac_pb2.PolicyRule:
    return rbac_pb2.PolicyRule(verbs=rule.verbs, apiGroups=rule.api_groups, resources=rule.resources,
                               resourceNames=rule.resource_names, nonResourceURLs=rule.non_resource_urls)


def role_from_proto(role: rbac_pb2.Role | rbac_pb2.ClusterRole) -> Role:
    return Role(role.metadata.name, tuple(rule_from_proto(r) for r in role.rules), role.metadata.namespace)


def binding_from_proto(binding: rbac_pb2.RoleBinding | rbac_pb2.ClusterRoleBinding) -> Binding:
    subjects = tuple(Subject(s.kind, s.name, s.namespace) for s in binding.subjects)
    return Binding(binding.metadata.name, RoleRef(binding.roleRef.kind, binding.roleRef.name), subjects,
                   binding.metadata.namespace)


def policy_of(roles: Iterable[rbac_pb2.Role | rbac_pb2.ClusterRole],
              bindings: Iterable[rbac_pb2.RoleBinding | rbac_pb2.ClusterRoleBinding]) -> Policy:
    policy = Policy()
    for role in roles:
        policy.add_role(role_from_proto(role))
    policy.bindings.extend(binding_from_proto(b) for b in bindings)
    return policy


@dataclass
class RBACAuthorizer:
    """Decides on the policy `current()` returns at the time of each request."""

    current: Callable[[], Policy]

    @property
    def policy(self) -> Policy:
        return self.current()

    def rules_for(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        return rules_for(self.policy, user, namespace)

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, why): the binding and role that allow it, or what was looked at."""
        policy = self.current()
        for binding in policy.bindings:
            if binding.namespace and binding.namespace != attrs.namespace:
                continue  # a RoleBinding grants only in its own namespace
            if not any(applies_to(s, attrs.user, binding.namespace) for s in binding.subjects):
                continue
            role = policy.role_of(binding)
            if role is None:
                continue
            if any(rule_allows(attrs, rule) for rule in role.rules):
                kind = "RoleBinding" if binding.namespace else "ClusterRoleBinding"
                where = f"{binding.namespace}/" if binding.namespace else ""
                return True, f'RBAC: allowed by {kind} "{where}{binding.name}" of {role_kind(role)} "{role.name}"'
        return False, ""


def rules_for(policy: Policy, user: UserInfo, namespace: str) -> list[PolicyRule]:
    """Every rule the user holds in the namespace (cluster-wide ones included): what
    SelfSubjectRulesReview lists (upstream's RulesFor)."""
    rules: list[PolicyRule] = []
    for binding in policy.bindings:
        if binding.namespace and binding.namespace != namespace:
            continue
        if not any(applies_to(s, user, binding.namespace) for s in binding.subjects):
            continue
        role = policy.role_of(binding)
        if role is not None:
            rules.extend(r for r in role.rules if r not in rules)
    return rules


def role_kind(role: Role) -> str:
    return "Role" if role.namespace else "ClusterRole"


def forbidden_message(attrs: Attributes, qualified_resource: str = "") -> str:
    """Upstream's words for a denied request (responsewriters.forbiddenMessage inside
    errors.NewForbidden): `pods is forbidden: User "jane" cannot create resource "pods"
    in API group "" in the namespace "default"`."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {scope}'
    qualified = qualified_resource or (f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource)
    if attrs.name:
        return f'{qualified} "{attrs.name}" is forbidden: {why}'
    return f"{qualified} is forbidden: {why}"

"""rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings, validated and
defaulted as upstream's pkg/apis/rbac (validation.go, v1/defaults.go). Who may write
them is decided elsewhere (`apiserver.admission.rbac_escalation`)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.pods import validate_label_selector
from kubeling import names, scheme
from protos.kubeling.v1 import rbac_pb2

__all__ = ["STRATEGIES", "GROUP", "RoleStrategy", "ClusterRoleStrategy", "RoleBindingStrategy",
           "ClusterRoleBindingStrategy"]

GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _validate_rules(rules: list[rbac_pb2.PolicyRule], namespaced: bool, check: Checker) -> None:
    for i, rule in enumerate(rules):
        path = f"rules[{i}]"
        if not rule.verbs:
            check.add(f"{path}.verbs", "Required value: verbs must contain at least one value")
        if rule.nonResourceURLs:
            urls = "[" + " ".join(rule.nonResourceURLs) + "]"
            if namespaced:
                check.add(f"{path}.nonResourceURLs",
                          f"Invalid value: {urls}: namespaced rules cannot apply to non-resource URLs")
            if rule.apiGroups or rule.resources or rule.resourceNames:
                check.add(f"{path}.nonResourceURLs",
                          f"Invalid value: {urls}: rules cannot apply to both regular resources and non-resource URLs")
            continue
        if not rule.apiGroups:
            check.add(f"{path}.apiGroups", "Required value: resource rules must supply at least one api group")
        if not rule.resources:
            check.add(f"{path}.resources", "Required value: resource rules must supply at least one resource")


def _default_binding(binding: rbac_pb2.RoleBinding | rbac_pb2.ClusterRoleBinding) -> None:
    binding.roleRef.apiGroup = binding.roleRef.apiGroup or GROUP
    for subject in binding.subjects:
        if subject.kind in ("User", "Group") and not subject.apiGroup:
            subject.apiGroup = GROUP


def _validate_binding(binding: rbac_pb2.RoleBinding | rbac_pb2.ClusterRoleBinding, namespaced: bool,
                      check: Checker) -> None:
    ref = binding.roleRef
    check.unsupported("roleRef.apiGroup", ref.apiGroup, (GROUP,))
    check.unsupported("roleRef.kind", ref.kind, ("Role", "ClusterRole") if namespaced else ("ClusterRole",))
    if check.required("roleRef.name", ref.name):
        check.name("roleRef.name", ref.name, names.path_segment_name)
    for i, subject in enumerate(binding.subjects):
        path = f"subjects[{i}]"
        check.required(f"{path}.name", subject.name)
        if subject.kind == "ServiceAccount":
            if subject.name:
                check.name(f"{path}.name", subject.name, names.dns1123_subdomain)
            check.unsupported(f"{path}.apiGroup", subject.apiGroup, ("",))
            if not namespaced:
                check.required(f"{path}.namespace", subject.namespace)
        elif subject.kind in ("User", "Group"):
            check.unsupported(f"{path}.apiGroup", subject.apiGroup, (GROUP,))
        else:
            check.unsupported(f"{path}.kind", subject.kind, _SUBJECT_KINDS)


class _RBACStrategy:
    def validate_name(self, name: str) -> list[str]:
        return names.path_segment_name(name)


class RoleStrategy(_RBACStrategy, Strategy[rbac_pb2.Role]):
    resource = scheme.ROLES

    def validate(self, obj: rbac_pb2.Role, check: Checker) -> None:
        _validate_rules(list(obj.rules), True, check)


class ClusterRoleStrategy(_RBACStrategy, Strategy[rbac_pb2.ClusterRole]):
    resource = scheme.CLUSTERROLES

    def validate(self, obj: rbac_pb2.ClusterRole, check: Checker) -> None:
        _validate_rules(list(obj.rules), False, check)
        if obj.HasField("aggregationRule"):
            selectors = obj.aggregationRule.clusterRoleSelectors
            if not selectors:
                check.add("aggregationRule.clusterRoleSelectors",
                          "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil")
            for i, selector in enumerate(selectors):
                validate_label_selector(selector, f"aggregationRule.clusterRoleSelectors[{i}]", check)


class RoleBindingStrategy(_RBACStrategy, Strategy[rbac_pb2.RoleBinding]):
    resource = scheme.ROLEBINDINGS

    def default(self, obj: rbac_pb2.RoleBinding) -> None:
        _default_binding(obj)

    def validate(self, obj: rbac_pb2.RoleBinding, check: Checker) -> None:
        _validate_binding(obj, True, check)

    def validate_update(self, new: rbac_pb2.RoleBinding, old: rbac_pb2.RoleBinding, check: Checker) -> None:
        if new.roleRef != old.roleRef:
            check.add("roleRef", "Invalid value: cannot change roleRef")


class ClusterRoleBindingStrategy(_RBACStrategy, Strategy[rbac_pb2.ClusterRoleBinding]):
    resource = scheme.CLUSTERROLEBINDINGS

    def default(self, obj: rbac_pb2.ClusterRoleBinding) -> None:
        _default_binding(obj)

    def validate(self, obj: rbac_pb2.ClusterRoleBinding, check: Checker) -> None:
        _validate_binding(obj, False, check)

    def validate_update(self, new: rbac_pb2.ClusterRoleBinding, old: rbac_pb2.ClusterRoleBinding,
                        check: Checker) -> None:
        if new.roleRef != old.roleRef:
            check.add("roleRef", "Invalid value: cannot change roleRef")


# This group's resources, for the registry's table.
STRATEGIES = (RoleStrategy, ClusterRoleStrategy, RoleBindingStrategy, ClusterRoleBindingStrategy)

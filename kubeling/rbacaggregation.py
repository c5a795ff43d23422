"""ClusterRole aggregation, as upstream's clusterrole-aggregation controller computes it
(pkg/controller/clusterroleaggregation): an aggregated ClusterRole's rules are the rules of
every other ClusterRole its selectors match, selector by selector, roles by name, each
rule once. admin, edit and view are aggregated this way, so an operator's chart grants
access to its custom resources by shipping a ClusterRole labelled
`rbac.authorization.k8s.io/aggregate-to-edit: "true"`."""

from __future__ import annotations

from collections.abc import Iterable

from kubeling.selectors import SelectorError, from_label_selector_proto
from protos.kubeling.v1 import rbac_pb2

__all__ = ["aggregated_rules", "AGGREGATE_TO_ADMIN", "AGGREGATE_TO_EDIT", "AGGREGATE_TO_VIEW"]

AGGREGATE_TO_ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"


def aggregated_rules(role: rbac_pb2.ClusterRole,
                     roles: Iterable[rbac_pb2.ClusterRole]) -> list[rbac_pb2.PolicyRule]:
    """The rules the aggregated role should hold now (a selector that cannot be read
    selects nothing, as upstream skips it)."""
    others = sorted((r for r in roles if r.metadata.name != role.metadata.name), key=lambda r: r.metadata.name)
    rules: list[rbac_pb2.PolicyRule] = []
    for selector in role.aggregationRule.clusterRoleSelectors:
        try:
            parsed = from_label_selector_proto(selector)
        except SelectorError:
            continue
        if parsed is None:
            continue
        for other in others:
            if not parsed.matches(other.metadata.labels):
                continue
            for rule in other.rules:
                if rule not in rules:
                    rules.append(rule)
    return rules

"""Resource quota, as upstream's quota library (k8s.io/apiserver/pkg/quota/v1 and
pkg/quota/v1/evaluator): what an object uses of a quota, and the arithmetic of resource
lists; the ResourceQuota admission plugin and the quota controller both reckon with it."""

from kubeling.quota import resources
from kubeling.quota.evaluators import (
    CREATE,
    UPDATE,
    Evaluator,
    ScopeRequirement,
    evaluator_for,
    group_resource_of,
    is_quota_resource_name,
    quota_matches,
    scope_requirements,
)

__all__ = ["resources", "Evaluator", "ScopeRequirement", "evaluator_for", "group_resource_of", "quota_matches",
           "scope_requirements", "is_quota_resource_name", "CREATE", "UPDATE"]

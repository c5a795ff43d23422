"""The scheduler's configuration before the framework (upstream 1.12-1.22): a Policy of
predicates and priorities (`policy`), what each becomes in a framework profile
(`registry`, upstream's legacy registry), the algorithm providers (`providers`), and where
a Policy is read from (`source`: a file, or a ConfigMap that is watched)."""

from __future__ import annotations

from scheduler.legacy.policy import (
           POLICY_CONFIGMAP_KEY,
           Policy,
           PredicatePolicy,
           PriorityPolicy,
           load_policy,
           parse_policy,
)
from scheduler.legacy.providers import DEFAULT_PROVIDER, PROVIDERS, provider_profile
from scheduler.legacy.registry import NOT_IN_KUBELING, FeatureGates, Translation, translate

__all__ = ["Policy", "PredicatePolicy", "PriorityPolicy", "parse_policy", "load_policy", "POLICY_CONFIGMAP_KEY",
           "translate", "Translation", "FeatureGates", "NOT_IN_KUBELING", "provider_profile", "PROVIDERS",
           "DEFAULT_PROVIDER"]

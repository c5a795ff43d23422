"""The Policy API (kind: Policy, apiVersion: v1): how kube-scheduler was configured before
the framework, and until 1.22 through `--policy-config-file`, `--policy-configmap` or a
KubeSchedulerConfiguration's `algorithmSource.policy` (upstream's legacy_types.go).

    {"kind": "Policy", "apiVersion": "v1",
     "predicates": [{"name": "PodFitsResources"}, {"name": "HostName"},
                    {"name": "ZoneAffinity", "argument": {"serviceAffinity": {"labels": ["zone"]}}}],
     "priorities": [{"name": "LeastRequestedPriority", "weight": 1},
                    {"name": "RackSpread", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "rack"}}}],
     "extenders": [...], "hardPodAffinitySymmetricWeight": 10, "alwaysCheckAllPredicates": false}

`parse_policy` reads one (YAML or JSON) and validates it as upstream's ValidatePolicy and
validatePredicate/validatePriority do, with their messages; which names exist is the legacy
registry's to say (scheduler.legacy.registry). Fields upstream's decoder would ignore are
ignored here too, with a warning naming them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubeling.options import ConfigError

__all__ = ["Policy", "PredicatePolicy", "PriorityPolicy", "parse_policy", "load_policy", "MAX_WEIGHT",
           "POLICY_CONFIGMAP_KEY"]

log = logging.getLogger(__name__)

# The key of a policy ConfigMap's data that holds the Policy (upstream SchedulerPolicyConfigMapKey).
POLICY_CONFIGMAP_KEY = "policy.cfg"
# A priority's weight times the highest node score must fit in an int64 (upstream config.MaxWeight).
MAX_WEIGHT = (2**63 - 1) // 100

_FIELDS = {"kind", "apiVersion", "predicates", "priorities", "extenders", "hardPodAffinitySymmetricWeight",
           "alwaysCheckAllPredicates"}


@dataclass(frozen=True)
class PredicatePolicy:
    name: str
    service_affinity_labels: tuple[str, ...] | None = None  # argument.serviceAffinity.labels
    labels_presence: tuple[tuple[str, ...], bool] | None = None  # argument.labelsPresence: (labels, presence)


@dataclass(frozen=True)
class PriorityPolicy:
    name: str
    weight: int
    service_anti_affinity_label: str | None = None  # argument.serviceAntiAffinity.label
    label_preference: tuple[str, bool] | None = None  # argument.labelPreference: (label, presence)
    # argument.requestedToCapacityRatioArguments, as given: {shape: [...], resources: [...]}
    requested_to_capacity_ratio: dict[str, Any] | None = None

    @property
    def custom(self) -> str:
        """Which custom priority its argument makes it ("" for a named one)."""
        if self.label_preference is not None:
            return "LabelPreference"
        if self.service_anti_affinity_label is not None:
            return "ServiceAntiAffinity"
        if self.requested_to_capacity_ratio is not None:
            return "RequestedToCapacityRatio"
        return ""


@dataclass
class Policy:
    """A Policy. `predicates` / `priorities` None: not given (the registry's defaults apply),
    unlike an empty list (none at all, besides the mandatory predicates)."""

    predicates: list[PredicatePolicy] | None = None
    priorities: list[PriorityPolicy] | None = None
    extenders: list[dict[str, Any]] = field(default_factory=list)  # the extender entries, as given
    hard_pod_affinity_symmetric_weight: int = 0  # 0: not given
    always_check_all_predicates: bool = False


def load_policy(text: str, source: str) -> Policy:
    """A Policy from its YAML or JSON text; errors say `source` (the file or the ConfigMap)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: invalid policy: {' '.join(str(err).split())}") from None
    return parse_policy(data, source)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: Invalid value: must be a list")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: Invalid value: must be a mapping")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    items = _list(value if value is not None else [], where)
    if not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{where}: Invalid value: must be a list of strings")
    return tuple(items)


def _bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: Invalid value: {value!r}: must be true or false")
    return value


def _int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: Invalid value: {value!r}: must be an integer")
    return value


def _predicate(item: Any, where: str) -> PredicatePolicy:
    item = _mapping(item, where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: Required value")
    arg = item.get("argument")
    if arg is None:
        return PredicatePolicy(name)
    arg = _mapping(arg, f"{where}.argument")
    given = [k for k in ("serviceAffinity", "labelsPresence") if arg.get(k) is not None]
    if len(given) != 1:  # upstream validatePredicate
        raise ConfigError(f"{where}.argument: exactly 1 predicate argument is required, numArgs: {len(given)}, "
                          f"predicate {name}")
    if given[0] == "serviceAffinity":
        sa = _mapping(arg["serviceAffinity"], f"{where}.argument.serviceAffinity")
        return PredicatePolicy(name, service_affinity_labels=_strings(sa.get("labels"),
                                                                      f"{where}.argument.serviceAffinity.labels"))
    lp = _mapping(arg["labelsPresence"], f"{where}.argument.labelsPresence")
    return PredicatePolicy(name, labels_presence=(_strings(lp.get("labels"), f"{where}.argument.labelsPresence.labels"),
                                                  _bool(lp.get("presence"),
                                                        f"{where}.argument.labelsPresence.presence")))


def _priority(item: Any, where: str) -> PriorityPolicy:
    item = _mapping(item, where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: Required value")
    weight = _int(item.get("weight"), f"{where}.weight")
    if weight <= 0 or weight >= MAX_WEIGHT:  # upstream ValidatePolicy
        raise ConfigError(f"{where}.weight: priority {name} should have a positive weight applied to it "
                          "or it has overflown")
    arg = item.get("argument")
    if arg is None:
        return PriorityPolicy(name, weight)
    arg = _mapping(arg, f"{where}.argument")
    given = [k for k in ("serviceAntiAffinity", "labelPreference", "requestedToCapacityRatioArguments")
             if arg.get(k) is not None]
    if len(given) != 1:  # upstream validatePriority
        raise ConfigError(f"{where}.argument: exactly 1 priority argument is required, numArgs: {len(given)}, "
                          f"priority {name}")
    key = given[0]
    value = _mapping(arg[key], f"{where}.argument.{key}")
    if key == "serviceAntiAffinity":
        label = value.get("label")
        if not isinstance(label, str) or not label:
            raise ConfigError(f"{where}.argument.serviceAntiAffinity.label: Required value")
        return PriorityPolicy(name, weight, service_anti_affinity_label=label)
    if key == "labelPreference":
        label = value.get("label")
        if not isinstance(label, str) or not label:
            raise ConfigError(f"{where}.argument.labelPreference.label: Required value")
        return PriorityPolicy(name, weight, label_preference=(
            label, _bool(value.get("presence"), f"{where}.argument.labelPreference.presence")))
    return PriorityPolicy(name, weight, requested_to_capacity_ratio=dict(value))


def _check_custom_priorities(priorities: list[PriorityPolicy]) -> None:
    """A RequestedToCapacityRatio priority is declared once; LabelPreference and
    ServiceAntiAffinity ones may repeat with the same weight (upstream validateCustomPriorities)."""
    seen: dict[str, PriorityPolicy] = {}
    for i, p in enumerate(priorities):
        kind = p.custom
        if not kind:
            continue
        first = seen.get(kind)
        if first is None:
            seen[kind] = p
        elif kind == "RequestedToCapacityRatio":
            raise ConfigError(f"priorities[{i}]: priority {p.name!r} redeclares custom priority {kind!r}, "
                              f"from: {first.name!r}")
        elif first.weight != p.weight:
            raise ConfigError(f"priorities[{i}].weight: {kind}  priority {p.name!r} has a different weight "
                              f"with {first.name!r}")


def parse_policy(data: Any, source: str = "policy") -> Policy:
    """A validated Policy from its decoded form (errors: `source: field: what`)."""
    try:
        return _parse(data)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def _parse(data: Any) -> Policy:
    if data is None:
        data = {}
    data = _mapping(data, "policy")
    kind, version = data.get("kind"), data.get("apiVersion")
    if kind is not None and kind != "Policy":
        raise ConfigError(f"kind: Invalid value: {kind!r}: must be Policy")
    if version is not None and version != "v1":
        raise ConfigError(f"apiVersion: Invalid value: {version!r}: must be v1")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        log.warning("policy: ignoring unknown field(s) %s (upstream's decoder ignores them too)", ", ".join(unknown))
    policy = Policy()
    if data.get("predicates") is not None:
        policy.predicates = [_predicate(p, f"predicates[{i}]")
                             for i, p in enumerate(_list(data["predicates"], "predicates"))]
    if data.get("priorities") is not None:
        policy.priorities = [_priority(p, f"priorities[{i}]")
                             for i, p in enumerate(_list(data["priorities"], "priorities"))]
        _check_custom_priorities(policy.priorities)
    if data.get("extenders") is not None:
        policy.extenders = [_mapping(e, f"extenders[{i}]") for i, e in enumerate(_list(data["extenders"],
                                                                                       "extenders"))]
    weight = _int(data.get("hardPodAffinitySymmetricWeight"), "hardPodAffinitySymmetricWeight")
    if not 0 <= weight <= 100:
        raise ConfigError(f"hardPodAffinitySymmetricWeight: Invalid value: {weight}: not in valid range [0-100]")
    policy.hard_pod_affinity_symmetric_weight = weight
    policy.always_check_all_predicates = _bool(data.get("alwaysCheckAllPredicates"), "alwaysCheckAllPredicates")
    return policy

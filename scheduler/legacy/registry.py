"""The legacy registry (upstream pkg/scheduler/framework/plugins/legacy_registry.go, 1.19-1.22):
what each predicate and priority of a Policy becomes in a framework profile: which plugins
at which extension points, with which weights and args.

`translate(policy)` is upstream's createFromPolicy: the predicates (given, or the defaults;
always the mandatory ones) in upstream's fixed order, then the priorities sorted by name,
each through its producer; PrioritySort, DefaultPreemption and DefaultBinder besides (and
SchedulingGates: kubeling's API has scheduling gates, which a profile must honour). The
result is a KubeSchedulerConfiguration profile (`plugins` per extension point, with
`multiPoint` disabled, and `pluginConfig`), so that the profile a Policy became is one a
user can read, print and write themselves (`python -m scheduler --print-config`).

One gate of upstream's matters here, DefaultPodTopologySpread (off in 1.19, on from 1.20):
off, SelectorSpreadPriority is the SelectorSpread plugin; on, PodTopologySpread with the
System default constraints. Plugins kubeling does not have (the volume plugins) are left
out of the profile and named in `Translation.omitted` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubeling.options import ConfigError
from scheduler.legacy.policy import Policy, PredicatePolicy, PriorityPolicy

__all__ = ["Translation", "translate", "PREDICATE_ORDERING", "MANDATORY_PREDICATES", "DEFAULT_PREDICATES",
           "DEFAULT_PRIORITIES", "PREDICATES", "PRIORITIES", "NOT_IN_KUBELING", "legacy_extenders",
           "FeatureGates"]

# Where a predicate sits in the filter order, whatever the Policy's order (upstream predicateOrdering).
PREDICATE_ORDERING = (
    "CheckNodeUnschedulable", "GeneralPredicates", "HostName", "PodFitsHostPorts", "MatchNodeSelector",
    "PodFitsResources", "NoDiskConflict", "PodToleratesNodeTaints", "CheckNodeLabelPresence",
    "CheckServiceAffinity", "MaxEBSVolumeCount", "MaxGCEPDVolumeCount", "MaxCSIVolumeCountPred",
    "MaxAzureDiskVolumeCount", "MaxCinderVolumeCount", "CheckVolumeBinding", "NoVolumeZoneConflict",
    "EvenPodsSpread", "MatchInterPodAffinity",
)
# Always configured, named or not.
MANDATORY_PREDICATES = frozenset({"PodToleratesNodeTaints", "CheckNodeUnschedulable"})
# A Policy without `predicates` gets these; without `priorities`, these with their weights.
DEFAULT_PREDICATES = frozenset({
    "NoVolumeZoneConflict", "MaxEBSVolumeCount", "MaxGCEPDVolumeCount", "MaxAzureDiskVolumeCount",
    "MaxCSIVolumeCountPred", "MatchInterPodAffinity", "NoDiskConflict", "GeneralPredicates",
    "PodToleratesNodeTaints", "CheckVolumeBinding", "CheckNodeUnschedulable", "EvenPodsSpread",
})
DEFAULT_PRIORITIES = {
    "SelectorSpreadPriority": 1, "InterPodAffinityPriority": 1, "LeastRequestedPriority": 1,
    "BalancedResourceAllocation": 1, "NodePreferAvoidPodsPriority": 10000, "NodeAffinityPriority": 1,
    "TaintTolerationPriority": 1, "ImageLocalityPriority": 1, "EvenPodsSpreadPriority": 2,
}
# Older names upstream still took: the one it stands for.
_PREDICATE_ALIASES = {"PodFitsPorts": "PodFitsHostPorts"}
_PRIORITY_ALIASES = {"ServiceSpreadingPriority": "SelectorSpreadPriority"}
# Removed in 1.17 when node conditions became taints (TaintNodesByCondition): the mandatory
# predicates (taints, unschedulable) do its work now; a Policy that names it is still taken.
_CONDITION_PREDICATES = ("CheckNodeCondition", "CheckNodeMemoryPressure", "CheckNodeDiskPressure",
                         "CheckNodePIDPressure")

# Upstream plugins that kubeling does not have, and why a profile runs without them.
NOT_IN_KUBELING = {
    "VolumeZone": "it compares volumes' zone and region labels with nodes'; kubeling's volumes carry node "
                  "affinity instead (VolumeBinding judges it)",
    "EBSLimits": "it counts awsElasticBlockStore volumes, which kubeling's pods cannot have",
    "GCEPDLimits": "it counts gcePersistentDisk volumes, which kubeling's pods cannot have",
    "AzureDiskLimits": "it counts azureDisk volumes, which kubeling's pods cannot have",
    "CinderLimits": "it counts cinder volumes, which kubeling's pods cannot have",
}

POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
          "preBind", "bind", "postBind")


@dataclass(frozen=True)
class FeatureGates:
    """The upstream feature gates the translation depends on."""

    default_pod_topology_spread: bool = False  # DefaultPodTopologySpread (on by default from 1.20)


@dataclass
class _Args:
    """What the custom predicates and priorities accumulate for their plugins' args
    (upstream ConfigProducerArgs)."""

    weight: int = 0
    node_label: dict[str, list[str]] | None = None
    service_affinity: dict[str, list[str]] | None = None
    requested_to_capacity_ratio: dict[str, Any] | None = None
    inter_pod_affinity: dict[str, Any] | None = None


@dataclass
class Translation:
    """A profile's `plugins` and `pluginConfig` (KubeSchedulerConfiguration shape), whether
    it runs all filters (alwaysCheckAllPredicates), and the plugins left out, with why."""

    plugins: dict[str, Any] = field(default_factory=dict)
    plugin_config: list[dict[str, Any]] = field(default_factory=list)
    run_all_filters: bool = False
    omitted: dict[str, str] = field(default_factory=dict)
    predicates: list[str] = field(default_factory=list)  # in the order they run
    priorities: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a reader of the profile should know

    def enable(self, point: str, name: str, weight: int | None = None) -> None:
        """upstream appendToPluginSet: once per point, the highest weight kept."""
        if name in NOT_IN_KUBELING:
            self.omitted[name] = NOT_IN_KUBELING[name]
            return
        enabled = self.plugins.setdefault(point, {"enabled": []})["enabled"]
        for entry in enabled:
            if entry["name"] == name:
                if weight is not None and weight > entry.get("weight", 0):
                    entry["weight"] = weight
                return
        entry = {"name": name}
        if weight is not None:
            entry["weight"] = weight
        enabled.append(entry)

    def configure(self, name: str, args: dict[str, Any], *, replace: bool = True) -> None:
        """A pluginConfig entry; an existing one is replaced (or kept when not `replace`)."""
        for entry in self.plugin_config:
            if entry["name"] == name:
                if replace:
                    entry["args"] = args
                return
        self.plugin_config.append({"name": name, "args": args})


Producer = Callable[[Translation, _Args, FeatureGates], None]


def _points(*pairs: tuple[str, str]) -> Producer:
    def produce(t: Translation, args: _Args, gates: FeatureGates) -> None:
        for point, name in pairs:
            t.enable(point, name)
    return produce


def _general(t: Translation, args: _Args, gates: FeatureGates) -> None:
    # GeneralPredicates: resources, host name, host ports and node selector in one.
    for point, name in (("filter", "NodeResourcesFit"), ("preFilter", "NodeResourcesFit"), ("filter", "NodeName"),
                        ("filter", "NodePorts"), ("preFilter", "NodePorts"), ("filter", "NodeAffinity"),
                        ("preFilter", "NodeAffinity")):
        t.enable(point, name)


def _node_label_predicate(t: Translation, args: _Args, gates: FeatureGates) -> None:
    t.enable("filter", "NodeLabel")
    if args.node_label is not None:
        t.configure("NodeLabel", args.node_label)


def _service_affinity_predicate(t: Translation, args: _Args, gates: FeatureGates) -> None:
    t.enable("filter", "ServiceAffinity")
    if args.service_affinity is not None:
        t.configure("ServiceAffinity", args.service_affinity)
    t.enable("preFilter", "ServiceAffinity")


PREDICATES: dict[str, Producer] = {
    "GeneralPredicates": _general,
    "PodToleratesNodeTaints": _points(("filter", "TaintToleration")),
    "PodFitsResources": _points(("filter", "NodeResourcesFit"), ("preFilter", "NodeResourcesFit")),
    "HostName": _points(("filter", "NodeName")),
    "PodFitsHostPorts": _points(("filter", "NodePorts"), ("preFilter", "NodePorts")),
    "MatchNodeSelector": _points(("filter", "NodeAffinity"), ("preFilter", "NodeAffinity")),
    "CheckNodeUnschedulable": _points(("filter", "NodeUnschedulable")),
    "CheckVolumeBinding": _points(("preFilter", "VolumeBinding"), ("filter", "VolumeBinding"),
                                  ("reserve", "VolumeBinding"), ("preBind", "VolumeBinding")),
    "NoDiskConflict": _points(("filter", "VolumeRestrictions")),
    "NoVolumeZoneConflict": _points(("filter", "VolumeZone")),
    "MaxCSIVolumeCountPred": _points(("filter", "NodeVolumeLimits")),
    "MaxEBSVolumeCount": _points(("filter", "EBSLimits")),
    "MaxGCEPDVolumeCount": _points(("filter", "GCEPDLimits")),
    "MaxAzureDiskVolumeCount": _points(("filter", "AzureDiskLimits")),
    "MaxCinderVolumeCount": _points(("filter", "CinderLimits")),
    "MatchInterPodAffinity": _points(("filter", "InterPodAffinity"), ("preFilter", "InterPodAffinity")),
    "CheckNodeLabelPresence": _node_label_predicate,
    "CheckServiceAffinity": _service_affinity_predicate,
    "EvenPodsSpread": _points(("preFilter", "PodTopologySpread"), ("filter", "PodTopologySpread")),
}


def _scored(name: str, *, pre_score: bool = False, config: Callable[[_Args], dict[str, Any] | None] | None = None,
            weight: Callable[[_Args], int] | None = None) -> Producer:
    def produce(t: Translation, args: _Args, gates: FeatureGates) -> None:
        if pre_score:
            t.enable("preScore", name)
        t.enable("score", name, weight(args) if weight is not None else args.weight)
        if config is not None and (conf := config(args)) is not None:
            t.configure(name, conf)
    return produce


def _selector_spread(t: Translation, args: _Args, gates: FeatureGates) -> None:
    if not gates.default_pod_topology_spread:
        t.enable("score", "SelectorSpread", args.weight)
        t.enable("preScore", "SelectorSpread")
        return
    t.enable("score", "PodTopologySpread", args.weight)
    t.enable("preScore", "PodTopologySpread")
    # Whichever of SelectorSpreadPriority and EvenPodsSpreadPriority comes first, the
    # System defaults win (upstream's producers say so).
    t.configure("PodTopologySpread", {"defaultingType": "System"})


def _even_pods_spread(t: Translation, args: _Args, gates: FeatureGates) -> None:
    t.enable("preScore", "PodTopologySpread")
    t.enable("score", "PodTopologySpread", args.weight)
    if gates.default_pod_topology_spread:
        # Only the pods' own constraints, unless SelectorSpreadPriority asked for the defaults.
        t.configure("PodTopologySpread", {"defaultingType": "List"}, replace=False)


def _per_label(args: dict[str, list[str]] | None, *keys: str) -> int:
    return sum(len(args.get(k, [])) for k in keys) if args is not None else 0


PRIORITIES: dict[str, Producer] = {
    "SelectorSpreadPriority": _selector_spread,
    "TaintTolerationPriority": _scored("TaintToleration", pre_score=True),
    "NodeAffinityPriority": _scored("NodeAffinity", pre_score=True),
    "ImageLocalityPriority": _scored("ImageLocality"),
    "InterPodAffinityPriority": _scored("InterPodAffinity", pre_score=True, config=lambda a: a.inter_pod_affinity),
    "NodePreferAvoidPodsPriority": _scored("NodePreferAvoidPods"),
    "MostRequestedPriority": _scored("NodeResourcesMostAllocated"),
    "BalancedResourceAllocation": _scored("NodeResourcesBalancedAllocation"),
    "LeastRequestedPriority": _scored("NodeResourcesLeastAllocated"),
    "RequestedToCapacityRatio": _scored("RequestedToCapacityRatio", config=lambda a: a.requested_to_capacity_ratio),
    # n labelPreference priorities (their weights are equal) score as one plugin of n times the weight
    "NodeLabel": _scored("NodeLabel", config=lambda a: a.node_label, weight=lambda a: a.weight * _per_label(
        a.node_label, "presentLabelsPreference", "absentLabelsPreference")),
    "ServiceAffinity": _scored("ServiceAffinity", config=lambda a: a.service_affinity,
                               weight=lambda a: a.weight * _per_label(a.service_affinity,
                                                                      "antiAffinityLabelsPreference")),
    "EvenPodsSpreadPriority": _even_pods_spread,
}


def _extend(args: dict[str, list[str]] | None, key: str, labels: Iterable[str]) -> dict[str, list[str]]:
    """A custom predicate's or priority's labels added to its plugin's args (made on first use)."""
    out = args if args is not None else {}
    out.setdefault(key, []).extend(labels)
    return out


def _process_predicate(p: PredicatePolicy, args: _Args, notes: list[str]) -> str:
    """The registered predicate a Policy entry stands for (upstream ProcessPredicatePolicy).

    An entry with an argument is the custom predicate its argument makes, whatever its
    name: kube-schedulers before 1.19 read it so, and 1.19-1.22 silently dropped the
    argument of an entry that named a registered predicate."""
    if p.service_affinity_labels is not None:
        args.service_affinity = _extend(args.service_affinity, "affinityLabels", p.service_affinity_labels)
        return "CheckServiceAffinity"
    if p.labels_presence is not None:
        labels, presence = p.labels_presence
        args.node_label = _extend(args.node_label, "presentLabels" if presence else "absentLabels", labels)
        return "CheckNodeLabelPresence"
    name = _PREDICATE_ALIASES.get(p.name, p.name)
    if name in PREDICATES:
        return name
    if name in _CONDITION_PREDICATES:
        notes.append(f"{name}: removed in 1.17, when node conditions became taints; TaintToleration and "
                     "NodeUnschedulable (always configured) judge them")
        return "CheckNodeUnschedulable"
    raise ConfigError(f"predicate type not found for {name!r}")


# Registered only for the custom priorities' arguments: named without one, they have nothing to score by.
_NEEDS_ARGUMENT = {"NodeLabel": "labelPreference", "ServiceAffinity": "serviceAntiAffinity",
                   "RequestedToCapacityRatio": "requestedToCapacityRatioArguments"}


def _process_priority(p: PriorityPolicy, args: _Args) -> str:
    """The registered priority a Policy entry stands for (upstream ProcessPriorityPolicy);
    an argument makes the custom priority, as for predicates."""
    if p.service_anti_affinity_label is not None:
        args.service_affinity = _extend(args.service_affinity, "antiAffinityLabelsPreference",
                                        [p.service_anti_affinity_label])
        return "ServiceAffinity"
    if p.label_preference is not None:
        label, presence = p.label_preference
        args.node_label = _extend(args.node_label, "presentLabelsPreference" if presence else "absentLabelsPreference",
                                  [label])
        return "NodeLabel"
    if p.requested_to_capacity_ratio is not None:
        rtcr = p.requested_to_capacity_ratio
        args.requested_to_capacity_ratio = {"shape": rtcr.get("shape") or []}
        if rtcr.get("resources"):  # else the plugin's default: cpu and memory, weight 1
            args.requested_to_capacity_ratio["resources"] = rtcr["resources"]
        return "RequestedToCapacityRatio"
    name = _PRIORITY_ALIASES.get(p.name, p.name)
    if name in _NEEDS_ARGUMENT:
        raise ConfigError(f"priority {name!r} needs its argument ({_NEEDS_ARGUMENT[name]})")
    if name in PRIORITIES:
        return name
    raise ConfigError(f"priority type not found for {name!r}")


def translate(policy: Policy, gates: FeatureGates = FeatureGates(), *,
              hard_pod_affinity_weight: int = 0) -> Translation:
    """The profile a Policy becomes (ConfigError naming the entry for an unknown name).
    `hard_pod_affinity_weight`: the command line's or the configuration's, which the
    Policy's own hardPodAffinitySymmetricWeight overrides (0: not given)."""
    args = _Args()
    notes: list[str] = []
    if policy.predicates is None:
        predicate_keys = set(DEFAULT_PREDICATES)
    else:
        predicate_keys = set()
        for i, pred in enumerate(policy.predicates):
            try:
                predicate_keys.add(_process_predicate(pred, args, notes))
            except ConfigError as err:
                raise ConfigError(f"predicates[{i}].name: {err}") from None
    if policy.priorities is None:
        priority_keys = dict(DEFAULT_PRIORITIES)
    else:
        priority_keys = {}
        for i, prio in enumerate(policy.priorities):
            if prio.name == "EqualPriority":
                continue  # every node the same score: nothing to run
            try:
                priority_keys[_process_priority(prio, args)] = prio.weight
            except ConfigError as err:
                raise ConfigError(f"priorities[{i}].name: {err}") from None
    hard_weight = policy.hard_pod_affinity_symmetric_weight or hard_pod_affinity_weight
    if hard_weight:
        args.inter_pod_affinity = {"hardPodAffinityWeight": hard_weight}

    t = Translation(run_all_filters=policy.always_check_all_predicates, notes=notes)
    # Not upstream's in these releases: a pod's schedulingGates (an API field since) keep it
    # from being scheduled, whatever the profile.
    t.enable("preEnqueue", "SchedulingGates")
    t.enable("queueSort", "PrioritySort")
    t.enable("postFilter", "DefaultPreemption")
    t.enable("bind", "DefaultBinder")
    wanted = predicate_keys | MANDATORY_PREDICATES
    for name in [*(k for k in PREDICATE_ORDERING if k in wanted), *sorted(wanted - set(PREDICATE_ORDERING))]:
        PREDICATES[name](t, args, gates)
        t.predicates.append(name)
    for name in sorted(priority_keys):
        args.weight = priority_keys[name]
        PRIORITIES[name](t, args, gates)
        t.priorities[name] = priority_keys[name]
    if not gates.default_pod_topology_spread and any(
            e["name"] == "PodTopologySpread" for point in t.plugins.values() for e in point["enabled"]):
        # Before the gate there were no default constraints: only the pods' own count.
        t.configure("PodTopologySpread", {"defaultingType": "List"}, replace=False)
    t.plugins = {"multiPoint": {"disabled": [{"name": "*"}]},
                 **{point: t.plugins[point] for point in POINTS if point in t.plugins}}
    return t


def legacy_extenders(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Policy's extenders in the KubeSchedulerConfiguration's shape: their httpTimeout was a
    Go time.Duration, so a number there counts nanoseconds."""
    out = []
    for e in entries:
        e = dict(e)
        timeout = e.get("httpTimeout")
        if isinstance(timeout, int) and not isinstance(timeout, bool):
            e["httpTimeout"] = timeout / 1e9
        out.append(e)
    return out

"""The algorithm providers (upstream pkg/scheduler/algorithmprovider, 1.19-1.22): named
plugin sets a KubeSchedulerConfiguration's `algorithmSource.provider` (or
`--algorithm-provider`) starts a profile from, before the profile's own `plugins` apply.

DefaultProvider is the default profile of those releases; ClusterAutoscalerProvider is the
same with NodeResourcesMostAllocated in place of NodeResourcesLeastAllocated (pack nodes,
so that the autoscaler can empty some). With the DefaultPodTopologySpread gate off (1.19),
SelectorSpread spreads a Service's and a ReplicaSet's pods; on (1.20-1.22), PodTopologySpread's
System default constraints do. The volume plugins are left out (NOT_IN_KUBELING).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubeling.options import ConfigError
from scheduler.legacy.registry import NOT_IN_KUBELING, FeatureGates

__all__ = ["PROVIDERS", "DEFAULT_PROVIDER", "ProviderProfile", "provider_profile"]

DEFAULT_PROVIDER = "DefaultProvider"
CLUSTER_AUTOSCALER_PROVIDER = "ClusterAutoscalerProvider"
PROVIDERS = (CLUSTER_AUTOSCALER_PROVIDER, DEFAULT_PROVIDER)

# (point, [(plugin, weight)]) in upstream's order; weight 0 where the point takes none.
_DEFAULT: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = (
    # SchedulingGates is kubeling's addition: a pod's schedulingGates (an API field since)
    # keep it from being scheduled, whatever the profile.
    ("preEnqueue", (("SchedulingGates", 0),)),
    ("queueSort", (("PrioritySort", 0),)),
    ("preFilter", (("NodeResourcesFit", 0), ("NodePorts", 0), ("PodTopologySpread", 0), ("InterPodAffinity", 0),
                   ("VolumeBinding", 0))),
    ("filter", (("NodeUnschedulable", 0), ("NodeName", 0), ("TaintToleration", 0), ("NodeAffinity", 0),
                ("NodePorts", 0), ("NodeResourcesFit", 0), ("VolumeRestrictions", 0), ("EBSLimits", 0),
                ("GCEPDLimits", 0), ("NodeVolumeLimits", 0), ("AzureDiskLimits", 0), ("VolumeBinding", 0),
                ("VolumeZone", 0), ("PodTopologySpread", 0), ("InterPodAffinity", 0))),
    ("postFilter", (("DefaultPreemption", 0),)),
    ("preScore", (("InterPodAffinity", 0), ("PodTopologySpread", 0), ("TaintToleration", 0))),
    ("score", (("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("InterPodAffinity", 1),
               ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1), ("NodePreferAvoidPods", 10000),
               # doubled: a user's preference, comparable to NodeResourcesLeastAllocated (upstream's words)
               ("PodTopologySpread", 2), ("TaintToleration", 1))),
    ("reserve", (("VolumeBinding", 0),)),
    ("preBind", (("VolumeBinding", 0),)),
    ("bind", (("DefaultBinder", 0),)),
)


@dataclass
class ProviderProfile:
    """A provider's plugins per extension point ((name, weight) in order), the pluginConfig
    it implies, and the plugins left out with why."""

    points: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    plugin_config: list[dict[str, Any]] = field(default_factory=list)
    omitted: dict[str, str] = field(default_factory=dict)


def provider_profile(name: str, gates: FeatureGates | None = None,
                     where: str = "algorithmSource.provider") -> ProviderProfile:
    gates = gates or FeatureGates()
    if name not in PROVIDERS:
        raise ConfigError(f"{where}: algorithm provider {name!r} is not registered "
                          f"(one of: {' | '.join(PROVIDERS)})")
    out = ProviderProfile()
    for point, plugins in _DEFAULT:
        entries = list(plugins)
        if name == CLUSTER_AUTOSCALER_PROVIDER:
            entries = [("NodeResourcesMostAllocated" if n == "NodeResourcesLeastAllocated" else n, w)
                       for n, w in entries]
        if not gates.default_pod_topology_spread and point in ("preScore", "score"):
            entries.append(("SelectorSpread", 0 if point == "preScore" else 1))
        kept = []
        for plugin, weight in entries:
            if plugin in NOT_IN_KUBELING:
                out.omitted[plugin] = NOT_IN_KUBELING[plugin]
            else:
                kept.append((plugin, weight))
        out.points[point] = kept
    if not gates.default_pod_topology_spread:
        # Before the gate there were no default constraints: SelectorSpread spread pods instead.
        out.plugin_config.append({"name": "PodTopologySpread", "args": {"defaultingType": "List"}})
    return out

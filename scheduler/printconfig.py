"""The configuration a scheduler runs, as a KubeSchedulerConfiguration YAML
(`python -m scheduler --print-config`): every profile's plugins spelled out per extension
point, with their weights and args, whatever made them (the defaults, a provider, a Policy).
It reads back as the same profiles: a user can keep it in place of the Policy.

What does not fit the YAML is said in comments: what made each profile, the upstream
plugins left out (with why), notes on old names.
"""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.config import SchedulerConfig
from scheduler.extender import ExtenderConfig
from scheduler.framework.runtime import EXTENSION_POINTS, ExtensionPoints

__all__ = ["render", "profile_plugins"]

API_VERSION = "kubescheduler.config.k8s.io/v1"


def profile_plugins(points: ExtensionPoints) -> dict[str, Any]:
    """The `plugins` of a profile that enables exactly these, per point (multiPoint off)."""
    out: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]}}
    for point in EXTENSION_POINTS:
        names = points.enabled.get(point)
        if not names:
            continue
        if point == "score":
            out[point] = {"enabled": [{"name": n, "weight": max(1, points.weights.get(n, 1))} for n in names]}
        else:
            out[point] = {"enabled": [{"name": n} for n in names]}
    return out


def _extender(e: ExtenderConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"urlPrefix": e.url_prefix}
    for key, value in (("filterVerb", e.filter_verb), ("prioritizeVerb", e.prioritize_verb),
                       ("bindVerb", e.bind_verb)):
        if value:
            out[key] = value
    out.update(weight=e.weight, nodeCacheCapable=e.node_cache_capable, ignorable=e.ignorable,
               httpTimeout=f"{e.http_timeout:g}s")
    if e.managed_resources:
        out["managedResources"] = [{"name": n} for n in sorted(e.managed_resources)]
    return out


def render(config: SchedulerConfig) -> str:
    comments = ["# The configuration this scheduler runs (python -m scheduler --print-config)."]
    data: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "podMaxInUnschedulablePodsDuration": f"{config.pod_max_in_unschedulable_pods_duration:g}s",
        "parallelism": config.parallelism,
    }
    if config.extenders:
        data["extenders"] = [_extender(e) for e in config.extenders]
    profiles = []
    for p in config.profiles:
        comments.append(f"# profile {p.scheduler_name}: plugins from "
                        f"{p.origin or 'the configuration (its profile and the defaults)'}")
        for name, why in sorted(p.omitted.items()):
            comments.append(f"#   left out, {name} (upstream's, not in kubeling): {why}")
        comments.extend(f"#   {note}" for note in p.notes)
        profile: dict[str, Any] = {"schedulerName": p.scheduler_name}
        if p.percentage_of_nodes_to_score is not None:
            profile["percentageOfNodesToScore"] = p.percentage_of_nodes_to_score
        profile["plugins"] = profile_plugins(p.points)
        if p.points.args:
            profile["pluginConfig"] = [{"name": name, "args": args} for name, args in p.points.args.items()]
        if p.run_all_filters:
            profile["runAllFilters"] = True
        if p.record.enabled:
            profile["recordResults"] = {"enabled": True, "maxNodes": p.record.max_nodes,
                                        "topNodes": p.record.top_nodes}
        profiles.append(profile)
    data["profiles"] = profiles
    return "\n".join(comments) + "\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)

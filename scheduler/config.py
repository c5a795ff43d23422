"""Scheduler configuration, shaped like KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).

    profiles:
    - schedulerName: default-scheduler
      plugins:
        multiPoint: {enabled: [{name: MyPlugin, weight: 3}], disabled: [{name: ImageLocality}]}
        score: {disabled: [{name: "*"}], enabled: [{name: NodeResourcesFit, weight: 5}]}
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
      recordResults: true   # kubeling's: every plugin's answer on the pod (`kubeling why`)

A plugin enabled in multiPoint joins every extension point it implements, as upstream.
Errors name the field: `profiles[0].plugins.score.enabled[1].weight: ...`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeling import options
from scheduler.extender import ExtenderConfig, parse_extenders
from scheduler.framework.results import RecordOptions
from scheduler.framework.runtime import EXTENSION_POINTS, ExtensionPoints, PluginFactory

__all__ = ["SchedulerConfig", "Profile", "ConfigError", "load_config", "parse_config", "DEFAULT_PLUGINS"]


class ConfigError(options.ConfigError):
    """A KubeSchedulerConfiguration that cannot be run (the scheduler exits 2)."""


# Upstream's default multiPoint set (those kubeling has), in its order, with its weights.
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0),
]


@dataclass
class Profile:
    scheduler_name: str
    points: ExtensionPoints
    percentage_of_nodes_to_score: int | None = None
    record: RecordOptions = field(default_factory=RecordOptions)  # `recordResults`: why each node


@dataclass
class SchedulerConfig:
    profiles: list[Profile] = field(default_factory=list)
    percentage_of_nodes_to_score: int = 0  # 0: upstream's adaptive default
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    pod_max_in_unschedulable_pods_duration: float = 300.0
    parallelism: int = 16
    extenders: list[ExtenderConfig] = field(default_factory=list)


def load_config(path: str | Path | None, registry: dict[str, PluginFactory]) -> SchedulerConfig:
    if path is None:
        return parse_config({}, registry)
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read scheduler config {path}: {err}") from None
    return parse_config(data, registry)


def _number(data: dict[str, Any], key: str, default: float, lo: float, hi: float | None = None,
            where: str = "") -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}{key}: Invalid value: {value!r}: must be a number")
    if value < lo or (hi is not None and value > hi):
        upper = hi if hi is not None else "inf"
        raise ConfigError(f"{where}{key}: Invalid value: {value!r}: must be in the range [{lo:g}, {upper}]")
    return float(value)


def parse_config(data: Any, registry: dict[str, PluginFactory]) -> SchedulerConfig:
    if not isinstance(data, dict):
        raise ConfigError("the scheduler config must be a mapping")
    kind = data.get("kind", "KubeSchedulerConfiguration")
    if kind != "KubeSchedulerConfiguration":
        raise ConfigError(f"kind: Invalid value: {kind!r}: must be KubeSchedulerConfiguration")
    cfg = SchedulerConfig(
        percentage_of_nodes_to_score=int(_number(data, "percentageOfNodesToScore", 0, 0, 100)),
        pod_initial_backoff_seconds=_number(data, "podInitialBackoffSeconds", 1, 0),
        pod_max_backoff_seconds=_number(data, "podMaxBackoffSeconds", 10, 0),
        parallelism=int(_number(data, "parallelism", 16, 1)),
    )
    duration = data.get("podMaxInUnschedulablePodsDuration", 300)
    try:
        from scheduler.extender import _duration
        cfg.pod_max_in_unschedulable_pods_duration = _duration(duration, "podMaxInUnschedulablePodsDuration")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    try:
        cfg.extenders = parse_extenders(data.get("extenders"))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError("podMaxBackoffSeconds: Invalid value: must be >= podInitialBackoffSeconds")
    profiles = data.get("profiles") or [{"schedulerName": "default-scheduler"}]
    if not isinstance(profiles, list):
        raise ConfigError("profiles: Invalid value: must be a list")
    seen: set[str] = set()
    for i, p in enumerate(profiles):
        where = f"profiles[{i}]"
        if not isinstance(p, dict):
            raise ConfigError(f"{where}: Invalid value: must be a mapping")
        name = p.get("schedulerName", "default-scheduler")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{where}.schedulerName: Required value")
        if name in seen:
            raise ConfigError(f"{where}.schedulerName: Duplicate value: {name!r}")
        seen.add(name)
        pct = p.get("percentageOfNodesToScore")
        if pct is not None:
            pct = int(_number(p, "percentageOfNodesToScore", 0, 0, 100, f"{where}."))
        points = _points(p.get("plugins") or {}, p.get("pluginConfig") or [], registry, where)
        cfg.profiles.append(Profile(name, points, pct, _record(p.get("recordResults"), f"{where}.recordResults")))
    return cfg


def _record(value: Any, where: str) -> RecordOptions:
    """`recordResults: true`, or `{enabled: true, maxNodes: 50, topNodes: 10}` (kubeling's own
    profile option: every attempt's plugin results on the pod, scheduler.framework.results)."""
    if value is None or isinstance(value, bool):
        return RecordOptions(enabled=bool(value))
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: Invalid value: must be true, false or a mapping")
    unknown = set(value) - {"enabled", "maxNodes", "topNodes"}
    if unknown:
        raise ConfigError(f"{where}.{sorted(unknown)[0]}: unknown field")
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.enabled: Invalid value: must be a boolean")
    d = RecordOptions()
    return RecordOptions(enabled, int(_number(value, "maxNodes", d.max_nodes, 1, None, f"{where}.")),
                         int(_number(value, "topNodes", d.top_nodes, 1, None, f"{where}.")))


def _plugin_list(value: Any, where: str) -> list[tuple[str, int]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: Invalid value: must be a list")
    out = []
    for j, item in enumerate(value):
        if not isinstance(item, dict) or not item.get("name"):
            raise ConfigError(f"{where}[{j}].name: Required value")
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise ConfigError(f"{where}[{j}].weight: Invalid value: {weight!r}: must be a non-negative integer")
        out.append((str(item["name"]), weight))
    return out


def _points(plugins: dict[str, Any], plugin_config: list[Any], registry: dict[str, PluginFactory],
            where: str) -> ExtensionPoints:
    if not isinstance(plugins, dict):
        raise ConfigError(f"{where}.plugins: Invalid value: must be a mapping")
    for key in plugins:
        if key != "multiPoint" and key not in EXTENSION_POINTS:
            raise ConfigError(f"{where}.plugins.{key}: unknown extension point")
    multi = plugins.get("multiPoint") or {}
    disabled_multi = {n for n, _ in _plugin_list(multi.get("disabled"), f"{where}.plugins.multiPoint.disabled")}
    multi_plugins = [] if "*" in disabled_multi else [(n, w) for n, w in DEFAULT_PLUGINS if n not in disabled_multi]
    for name, weight in _plugin_list(multi.get("enabled"), f"{where}.plugins.multiPoint.enabled"):
        multi_plugins = [(n, w) for n, w in multi_plugins if n != name] + [(name, weight)]
    for name, _ in multi_plugins:
        if name not in registry:
            raise ConfigError(f"{where}.plugins.multiPoint: plugin {name!r} is not registered")
    points = ExtensionPoints()
    for name, weight in multi_plugins:
        if weight:
            points.weights[name] = weight
    for point, base in EXTENSION_POINTS.items():
        spec = plugins.get(point) or {}
        pw = f"{where}.plugins.{point}"
        disabled = {n for n, _ in _plugin_list(spec.get("disabled"), f"{pw}.disabled")}
        names = [] if "*" in disabled else [
            n for n, _ in multi_plugins if n not in disabled and _implements(registry[n], base)]
        for j, (name, weight) in enumerate(_plugin_list(spec.get("enabled"), f"{pw}.enabled")):
            factory = registry.get(name)
            if factory is None:
                raise ConfigError(f"{pw}.enabled[{j}].name: plugin {name!r} is not registered")
            if not _implements(factory, base):
                raise ConfigError(f"{pw}.enabled[{j}].name: plugin {name!r} does not extend {point}")
            if name not in names:
                names.append(name)
            if weight:
                points.weights[name] = weight
        if names:
            points.enabled[point] = names
    for j, pc in enumerate(plugin_config):
        if not isinstance(pc, dict) or not pc.get("name"):
            raise ConfigError(f"{where}.pluginConfig[{j}].name: Required value")
        args = pc.get("args") or {}
        if not isinstance(args, dict):
            raise ConfigError(f"{where}.pluginConfig[{j}].args: Invalid value: must be a mapping")
        points.args[str(pc["name"])] = args
    if len(points.enabled.get("queueSort", [])) != 1:
        raise ConfigError(f"{where}.plugins.queueSort: exactly one queueSort plugin must be enabled")
    if not points.enabled.get("bind"):
        raise ConfigError(f"{where}.plugins.bind: at least one bind plugin must be enabled")
    return points


def _implements(factory: PluginFactory, base: type) -> bool:
    return isinstance(factory, type) and issubclass(factory, base)

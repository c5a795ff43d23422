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
      runAllFilters: true   # kubeling's: every filter runs on a node, all rejections kept

A plugin enabled in multiPoint joins every extension point it implements, as upstream.
Errors name the field: `profiles[0].plugins.score.enabled[1].weight: ...`.

The older configuration (v1alpha1/v1alpha2, upstream 1.12-1.18) is read too:
`algorithmSource` — a `provider` (DefaultProvider, ClusterAutoscalerProvider: the
profiles' plugins start from its set) or a `policy` (`file: {path}` or `configMap:
{namespace, name}`: a Policy of predicates and priorities, scheduler.legacy, makes every
profile's plugins) — and `schedulerName`, `hardPodAffinitySymmetricWeight`,
`disablePreemption`, `bindTimeoutSeconds`. The deprecated flags of those releases
(`LegacyOptions`: --algorithm-provider, --policy-config-file, --policy-configmap, ...)
override what the file says.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeling import options
from kubeling.options import boolean, flag
from scheduler.extender import ExtenderConfig, parse_extenders
from scheduler.framework.results import RecordOptions
from scheduler.framework.runtime import EXTENSION_POINTS, ExtensionPoints, PluginFactory
from scheduler.legacy.policy import Policy
from scheduler.legacy.providers import PROVIDERS, provider_profile
from scheduler.legacy.registry import FeatureGates, legacy_extenders, translate
from scheduler.legacy.source import read_policy_file

__all__ = ["SchedulerConfig", "Profile", "ConfigError", "load_config", "parse_config", "config_data",
           "algorithm_source", "AlgorithmSource", "PolicySource", "LegacyOptions", "DEFAULT_PLUGINS",
           "DEFAULT_BIND_TIMEOUT_SECONDS"]


class ConfigError(options.ConfigError):
    """A KubeSchedulerConfiguration that cannot be run (the scheduler exits 2)."""


# Upstream's default multiPoint set (those kubeling has), in its order, with its weights.
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("PodTopologySpread", 2),
    ("InterPodAffinity", 2), ("DefaultPreemption", 0), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
    ("DefaultBinder", 0),
]
DEFAULT_BIND_TIMEOUT_SECONDS = 600  # v1alpha1's, for volume binding
DEFAULT_POLICY_CONFIGMAP_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class PolicySource:
    """Where a Policy is read from: a file, or a ConfigMap's `policy.cfg`."""

    file: str = ""
    configmap_namespace: str = ""
    configmap_name: str = ""

    def describe(self) -> str:
        if self.file:
            return f"policy file {self.file}"
        return f"policy ConfigMap {self.configmap_namespace}/{self.configmap_name}"


@dataclass(frozen=True)
class AlgorithmSource:
    """v1alpha1's algorithmSource: a provider's name, or a Policy's source."""

    provider: str = ""
    policy: PolicySource | None = None


@dataclass
class Profile:
    scheduler_name: str
    points: ExtensionPoints
    percentage_of_nodes_to_score: int | None = None
    record: RecordOptions = field(default_factory=RecordOptions)  # `recordResults`: why each node
    run_all_filters: bool = False  # `runAllFilters` (a Policy's alwaysCheckAllPredicates)
    # Upstream plugins the profile names that kubeling does not have: left out, with why.
    omitted: dict[str, str] = field(default_factory=dict)
    origin: str = ""  # what made the plugins, when not the profile itself (a provider, a Policy)
    notes: list[str] = field(default_factory=list)


@dataclass
class SchedulerConfig:
    profiles: list[Profile] = field(default_factory=list)
    percentage_of_nodes_to_score: int = 0  # 0: upstream's adaptive default
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    pod_max_in_unschedulable_pods_duration: float = 300.0
    parallelism: int = 16
    extenders: list[ExtenderConfig] = field(default_factory=list)
    algorithm_source: AlgorithmSource | None = None
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS  # v1alpha1's: into VolumeBinding's args


def _gate_list(text: str) -> dict[str, bool]:
    """--feature-gates Name=true,Other=false (the gates a Policy's translation knows)."""
    out: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in ("DefaultPodTopologySpread",):
            raise argparse.ArgumentTypeError(f"unrecognized feature gate: {name}")
        out[name] = boolean(value)
    return out


@dataclass
class LegacyOptions:
    """The deprecated flags of upstream 1.12-1.22 (DeprecatedOptions): each overrides what
    the configuration file says."""

    algorithm_provider: str = flag("", "DEPRECATED: the scheduling algorithm provider to use, one of: "
                                       + " | ".join(PROVIDERS))
    policy_config_file: str = flag("", "DEPRECATED: file with scheduler policy configuration (kind: Policy). "
                                       "This file is used if policy ConfigMap is not provided or "
                                       "--use-legacy-policy-config=true")
    policy_configmap: str = flag("", "DEPRECATED: name of the ConfigMap object that contains scheduler's "
                                     "policy configuration, in its data under the key 'policy.cfg'; it is watched")
    policy_configmap_namespace: str = flag(DEFAULT_POLICY_CONFIGMAP_NAMESPACE,
                                           "DEPRECATED: the namespace where policy ConfigMap is located")
    use_legacy_policy_config: bool = flag(False, "DEPRECATED: when set to true, scheduler will ignore policy "
                                                 "ConfigMap and uses policy config file", type=boolean)
    scheduler_name: str = flag("", "DEPRECATED: name of the scheduler, used to select which pods will be "
                                   "processed by this scheduler, based on pod's \"spec.schedulerName\"")
    hard_pod_affinity_symmetric_weight: int | None = flag(
        None, "DEPRECATED: the weight of the implicit preferred affinity rule that matches every required pod "
              "affinity rule, for the pods that rule selects (0-100; default 1)", type=int)
    feature_gates: dict[str, bool] = flag(
        default_factory=dict, help="feature gates of upstream the Policy translation follows: "
                                   "DefaultPodTopologySpread=true|false (default false, as in 1.19)", type=_gate_list)

    def gates(self) -> FeatureGates:
        return FeatureGates(default_pod_topology_spread=self.feature_gates.get("DefaultPodTopologySpread", False))

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        """The configuration with these flags applied over it (upstream ApplyTo's precedence:
        a policy file, then a policy ConfigMap, then a provider)."""
        if self.use_legacy_policy_config and not self.policy_config_file:
            raise ConfigError("policyConfigFile: Required value: required when --use-legacy-policy-config is true")
        if self.algorithm_provider and self.algorithm_provider not in PROVIDERS:
            raise ConfigError(f"--algorithm-provider: algorithm provider {self.algorithm_provider!r} is not "
                              f"registered (one of: {' | '.join(PROVIDERS)})")
        weight = self.hard_pod_affinity_symmetric_weight
        if weight is not None and not 0 <= weight <= 100:
            raise ConfigError(f"hardPodAffinitySymmetricWeight: Invalid value: {weight}: not in valid range [0-100]")
        out = dict(data)
        if self.use_legacy_policy_config or (self.policy_config_file and not self.policy_configmap):
            out["algorithmSource"] = {"policy": {"file": {"path": self.policy_config_file}}}
        elif self.policy_configmap:
            out["algorithmSource"] = {"policy": {"configMap": {"namespace": self.policy_configmap_namespace,
                                                               "name": self.policy_configmap}}}
        elif self.algorithm_provider:
            out["algorithmSource"] = {"provider": self.algorithm_provider}
        if self.scheduler_name:
            if isinstance(out.get("profiles"), list) and out["profiles"]:
                first = out["profiles"][0]
                out["profiles"] = [{**first, "schedulerName": self.scheduler_name} if isinstance(first, dict)
                                   else first, *out["profiles"][1:]]
            else:
                out["schedulerName"] = self.scheduler_name
        if weight is not None:
            out["hardPodAffinitySymmetricWeight"] = weight
        return out


def read_config_file(path: str | Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read scheduler config {path}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError("the scheduler config must be a mapping")
    return data


def config_data(path: str | Path | None, legacy: LegacyOptions | None = None) -> dict[str, Any]:
    """The configuration file's contents (empty without one) with the deprecated flags applied."""
    data = read_config_file(path)
    return legacy.apply(data) if legacy is not None else data


def load_config(path: str | Path | None, registry: dict[str, PluginFactory], *,
                legacy: LegacyOptions | None = None) -> SchedulerConfig:
    """The configuration of a file (and flags), its Policy read when it names a policy file.
    A policy ConfigMap is read through the apiserver: see scheduler.legacy.source."""
    data = config_data(path, legacy)
    source = algorithm_source(data)
    policy = read_policy_file(source.policy.file) if source and source.policy and source.policy.file else None
    return parse_config(data, registry, policy=policy, gates=legacy.gates() if legacy else None)


def _number(data: dict[str, Any], key: str, default: float, lo: float, hi: float | None = None,
            where: str = "") -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}{key}: Invalid value: {value!r}: must be a number")
    if value < lo or (hi is not None and value > hi):
        upper = hi if hi is not None else "inf"
        raise ConfigError(f"{where}{key}: Invalid value: {value!r}: must be in the range [{lo:g}, {upper}]")
    return float(value)


def _flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: Invalid value: {value!r}: must be true or false")
    return value


def algorithm_source(data: dict[str, Any]) -> AlgorithmSource | None:
    """v1alpha1's `algorithmSource`, validated (None when not given)."""
    src = data.get("algorithmSource")
    if src is None:
        return None
    if not isinstance(src, dict):
        raise ConfigError("algorithmSource: Invalid value: must be a mapping")
    unknown = set(src) - {"provider", "policy"}
    if unknown:
        raise ConfigError(f"algorithmSource.{sorted(unknown)[0]}: unknown field")
    if ("provider" in src) == ("policy" in src):
        raise ConfigError("algorithmSource: Invalid value: exactly one of provider and policy must be set")
    if "provider" in src:
        name = src["provider"]
        if name not in PROVIDERS:
            raise ConfigError(f"algorithmSource.provider: algorithm provider {name!r} is not registered "
                              f"(one of: {' | '.join(PROVIDERS)})")
        return AlgorithmSource(provider=name)
    policy = src["policy"]
    if not isinstance(policy, dict) or ("file" in policy) == ("configMap" in policy):
        raise ConfigError("algorithmSource.policy: Invalid value: exactly one of file and configMap must be set")
    if "file" in policy:
        path = (policy["file"] or {}).get("path") if isinstance(policy["file"], dict) else None
        if not path or not isinstance(path, str):
            raise ConfigError("algorithmSource.policy.file.path: Required value")
        return AlgorithmSource(policy=PolicySource(file=path))
    cm = policy["configMap"] if isinstance(policy["configMap"], dict) else {}
    name = cm.get("name")
    if not name or not isinstance(name, str):
        raise ConfigError("algorithmSource.policy.configMap.name: Required value")
    namespace = cm.get("namespace") or DEFAULT_POLICY_CONFIGMAP_NAMESPACE
    return AlgorithmSource(policy=PolicySource(configmap_namespace=str(namespace), configmap_name=name))


def parse_config(data: Any, registry: dict[str, PluginFactory], *, policy: Policy | None = None,
                 gates: FeatureGates | None = None) -> SchedulerConfig:
    """The configuration from its decoded form. When it names a Policy (algorithmSource.policy),
    `policy` is that Policy, read by the caller from its file or ConfigMap."""
    if not isinstance(data, dict):
        raise ConfigError("the scheduler config must be a mapping")
    kind = data.get("kind", "KubeSchedulerConfiguration")
    if kind != "KubeSchedulerConfiguration":
        raise ConfigError(f"kind: Invalid value: {kind!r}: must be KubeSchedulerConfiguration")
    gates = gates or FeatureGates()
    cfg = SchedulerConfig(
        percentage_of_nodes_to_score=int(_number(data, "percentageOfNodesToScore", 0, 0, 100)),
        pod_initial_backoff_seconds=_number(data, "podInitialBackoffSeconds", 1, 0),
        pod_max_backoff_seconds=_number(data, "podMaxBackoffSeconds", 10, 0),
        parallelism=int(_number(data, "parallelism", 16, 1)),
        bind_timeout_seconds=int(_number(data, "bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS, 0)),
        algorithm_source=algorithm_source(data),
    )
    duration = data.get("podMaxInUnschedulablePodsDuration", 300)
    try:
        from scheduler.extender import _duration
        cfg.pod_max_in_unschedulable_pods_duration = _duration(duration, "podMaxInUnschedulablePodsDuration")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    source = cfg.algorithm_source
    if source is not None and source.policy is not None and policy is None:
        raise ConfigError(f"algorithmSource.policy: the {source.policy.describe()} was not read")
    extenders = data.get("extenders")
    if policy is not None:
        if extenders:
            raise ConfigError("extenders: Invalid value: cannot be set together with a Policy: "
                              "set them in the Policy's extenders")
        extenders = legacy_extenders(policy.extenders)
    try:
        cfg.extenders = parse_extenders(extenders)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError("podMaxBackoffSeconds: Invalid value: must be >= podInitialBackoffSeconds")
    hard_weight = data.get("hardPodAffinitySymmetricWeight")
    if hard_weight is not None:
        hard_weight = int(_number(data, "hardPodAffinitySymmetricWeight", 1, 0, 100))
    disable_preemption = _flag(data, "disablePreemption")
    scheduler_name = data.get("schedulerName")
    if scheduler_name is not None and (not isinstance(scheduler_name, str) or not scheduler_name):
        raise ConfigError("schedulerName: Required value")
    if scheduler_name is not None and data.get("profiles"):
        raise ConfigError("schedulerName: Invalid value: set with profiles: name each profile instead "
                          "(profiles[].schedulerName)")
    profiles = data.get("profiles") or [{"schedulerName": scheduler_name or "default-scheduler"}]
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
        run_all = p.get("runAllFilters", False)
        if not isinstance(run_all, bool):
            raise ConfigError(f"{where}.runAllFilters: Invalid value: {run_all!r}: must be true or false")
        profile = Profile(name, ExtensionPoints(), pct, _record(p.get("recordResults"), f"{where}.recordResults"),
                          run_all)
        plugins, plugin_config = p.get("plugins") or {}, p.get("pluginConfig") or []
        base: dict[str, list[tuple[str, int]]] | None = None
        if policy is not None:
            assert source is not None and source.policy is not None
            plugins, plugin_config = _from_policy(policy, profile, p, where, gates, hard_weight,
                                                  source.policy.describe())
        elif source is not None and source.provider:
            provided = provider_profile(source.provider, gates)
            base, profile.omitted, profile.origin = provided.points, provided.omitted, f"provider {source.provider}"
            configured = {pc.get("name") for pc in plugin_config if isinstance(pc, dict)}
            plugin_config = [*(pc for pc in provided.plugin_config if pc["name"] not in configured), *plugin_config]
        if hard_weight is not None and policy is None:
            plugin_config = _with_hard_weight(plugin_config, hard_weight, f"{where}.pluginConfig")
        if "bindTimeoutSeconds" in data:  # v1alpha1's: VolumeBindingArgs' since v1alpha2
            plugin_config = _with_bind_timeout(plugin_config, cfg.bind_timeout_seconds)
        profile.points = _points(plugins, plugin_config, registry, where, base)
        if disable_preemption:
            post = [n for n in profile.points.enabled.get("postFilter", []) if n != "DefaultPreemption"]
            if post:
                profile.points.enabled["postFilter"] = post
            else:
                profile.points.enabled.pop("postFilter", None)
        cfg.profiles.append(profile)
    return cfg


def _from_policy(policy: Policy, profile: Profile, given: dict[str, Any], where: str, gates: FeatureGates,
                 hard_weight: int | None, source: str) -> tuple[dict[str, Any], list[Any]]:
    """A profile's plugins and pluginConfig from the Policy (it may set neither itself)."""
    for key in ("plugins", "pluginConfig"):
        if given.get(key):
            raise ConfigError(f"{where}.{key}: Invalid value: cannot be set together with a Policy "
                              "(algorithmSource.policy): the Policy makes the profile's plugins")
    if given.get("runAllFilters") is not None:
        raise ConfigError(f"{where}.runAllFilters: Invalid value: cannot be set together with a Policy: "
                          "its alwaysCheckAllPredicates says it")
    try:
        t = translate(policy, gates, hard_pod_affinity_weight=hard_weight or 0)
    except options.ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    profile.run_all_filters = t.run_all_filters
    profile.omitted, profile.origin, profile.notes = t.omitted, source, t.notes
    return t.plugins, t.plugin_config


def _with_hard_weight(plugin_config: list[Any], weight: int, where: str) -> list[Any]:
    """hardPodAffinitySymmetricWeight (v1alpha1, or the flag) into InterPodAffinity's args."""
    out, done = [], False
    for pc in plugin_config:
        if isinstance(pc, dict) and pc.get("name") == "InterPodAffinity":
            args = pc.get("args") or {}
            if not isinstance(args, dict):
                raise ConfigError(f"{where}: InterPodAffinity args: Invalid value: must be a mapping")
            pc = {**pc, "args": {**args, "hardPodAffinityWeight": weight}}
            done = True
        out.append(pc)
    if not done:
        out.append({"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": weight}})
    return out


def _with_bind_timeout(plugin_config: list[Any], seconds: int) -> list[Any]:
    """bindTimeoutSeconds into VolumeBinding's args, unless its pluginConfig sets it itself."""
    for pc in plugin_config:
        if isinstance(pc, dict) and pc.get("name") == "VolumeBinding":
            return plugin_config
    return [*plugin_config, {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": seconds}}]


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
            where: str, base: dict[str, list[tuple[str, int]]] | None = None) -> ExtensionPoints:
    """The enabled plugins per extension point. They start from `base` (a provider's set, per
    point) or, without one, from the default multiPoint set; multiPoint then adds or removes
    a plugin at every point it implements, and each point's own disabled/enabled come last."""
    if not isinstance(plugins, dict):
        raise ConfigError(f"{where}.plugins: Invalid value: must be a mapping")
    for key in plugins:
        if key != "multiPoint" and key not in EXTENSION_POINTS:
            raise ConfigError(f"{where}.plugins.{key}: unknown extension point")
    multi = plugins.get("multiPoint") or {}
    disabled_multi = {n for n, _ in _plugin_list(multi.get("disabled"), f"{where}.plugins.multiPoint.disabled")}
    if base is None:
        multi_plugins = [] if "*" in disabled_multi else [(n, w) for n, w in DEFAULT_PLUGINS
                                                          if n not in disabled_multi]
        point_base: dict[str, list[tuple[str, int]]] = {}
    else:
        multi_plugins = []
        point_base = {point: [] if "*" in disabled_multi else [(n, w) for n, w in entries if n not in disabled_multi]
                      for point, entries in base.items()}
    for name, weight in _plugin_list(multi.get("enabled"), f"{where}.plugins.multiPoint.enabled"):
        multi_plugins = [(n, w) for n, w in multi_plugins if n != name] + [(name, weight)]
    for name, _ in [*multi_plugins, *(e for entries in point_base.values() for e in entries)]:
        if name not in registry:
            raise ConfigError(f"{where}.plugins.multiPoint: plugin {name!r} is not registered")
    points = ExtensionPoints()
    for name, weight in [*(e for entries in point_base.values() for e in entries), *multi_plugins]:
        if weight:
            points.weights[name] = weight
    for point, cls in EXTENSION_POINTS.items():
        spec = plugins.get(point) or {}
        pw = f"{where}.plugins.{point}"
        disabled = {n for n, _ in _plugin_list(spec.get("disabled"), f"{pw}.disabled")}
        start = [n for n, _ in point_base.get(point, [])]
        start += [n for n, _ in multi_plugins if n not in start and _implements(registry[n], cls)]
        names = [] if "*" in disabled else [n for n in start if n not in disabled]
        for j, (name, weight) in enumerate(_plugin_list(spec.get("enabled"), f"{pw}.enabled")):
            factory = registry.get(name)
            if factory is None:
                raise ConfigError(f"{pw}.enabled[{j}].name: plugin {name!r} is not registered")
            if not _implements(factory, cls):
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

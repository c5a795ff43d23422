"""The older configuration: a Policy of predicates and priorities, the algorithm providers,
algorithmSource and the deprecated flags, translated into profiles as upstream's legacy
registry (1.19-1.22) did: its own test vectors (factory_test.go, legacy_registry_test.go,
algorithmprovider/registry_test.go), upstream's messages for bad input, and the printed
configuration reading back as the same profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubeling.options import ConfigError as BaseConfigError
from protos.kubeling.v1 import core_pb2, meta_pb2
from scheduler.config import ConfigError, LegacyOptions, config_data, load_config, parse_config
from scheduler.framework.runtime import Framework
from scheduler.legacy.policy import Policy, parse_policy
from scheduler.legacy.providers import provider_profile
from scheduler.legacy.registry import NOT_IN_KUBELING, FeatureGates, translate
from scheduler.legacy.source import policy_of, read_policy_file
from scheduler.plugins import in_tree_registry
from scheduler.printconfig import render

GATE_ON = FeatureGates(default_pod_topology_spread=True)
GATE_OFF = FeatureGates(default_pod_topology_spread=False)


def _enabled(plugins: dict[str, Any], point: str) -> list[Any]:
    """A point's plugins as upstream's tests list them: names, (name, weight) for score."""
    entries = plugins.get(point, {}).get("enabled", [])
    return [(e["name"], e["weight"]) if point == "score" else e["name"] for e in entries]


def _config(t: Any, name: str) -> dict[str, Any] | None:
    return next((pc["args"] for pc in t.plugin_config if pc["name"] == name), None)


def _upstream(names: list[Any]) -> list[Any]:
    """Upstream's list without the plugins kubeling leaves out."""
    return [n for n in names if (n[0] if isinstance(n, tuple) else n) not in NOT_IN_KUBELING]


# ---------------------------------------------------------------- upstream's factory_test.go

def test_create_from_config() -> None:
    """TestCreateFromConfig: custom predicates and priorities of the same kind merge into one
    plugin, its weight the priorities' weight times their count."""
    policy = parse_policy(json.loads("""{
        "kind": "Policy", "apiVersion": "v1",
        "predicates": [
            {"name": "TestZoneAffinity", "argument": {"serviceAffinity": {"labels": ["zone"]}}},
            {"name": "TestZoneAffinity", "argument": {"serviceAffinity": {"labels": ["foo"]}}},
            {"name": "TestRequireZone", "argument": {"labelsPresence": {"labels": ["zone"], "presence": true}}},
            {"name": "TestNoFooLabel", "argument": {"labelsPresence": {"labels": ["foo"], "presence": false}}},
            {"name": "PodFitsResources"},
            {"name": "PodFitsHostPorts"}],
        "priorities": [
            {"name": "RackSpread", "weight": 3, "argument": {"serviceAntiAffinity": {"label": "rack"}}},
            {"name": "ZoneSpread", "weight": 3, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
            {"name": "LabelPreference1", "weight": 3,
             "argument": {"labelPreference": {"label": "l1", "presence": true}}},
            {"name": "LabelPreference2", "weight": 3,
             "argument": {"labelPreference": {"label": "l2", "presence": false}}},
            {"name": "NodeAffinityPriority", "weight": 2},
            {"name": "ImageLocalityPriority", "weight": 1}]}"""))
    t = translate(policy, GATE_OFF)
    assert _enabled(t.plugins, "queueSort") == ["PrioritySort"]
    assert _enabled(t.plugins, "bind") == ["DefaultBinder"]
    assert _enabled(t.plugins, "postFilter") == ["DefaultPreemption"]
    for name in ("NodeLabel", "ServiceAffinity"):
        assert name in _enabled(t.plugins, "filter")
        assert (name, 6) in _enabled(t.plugins, "score")
    assert _config(t, "NodeLabel") == {"presentLabels": ["zone"], "absentLabels": ["foo"],
                                       "presentLabelsPreference": ["l1"], "absentLabelsPreference": ["l2"]}
    assert _config(t, "ServiceAffinity") == {"affinityLabels": ["zone", "foo"],
                                             "antiAffinityLabelsPreference": ["rack", "zone"]}
    # the predicates in upstream's fixed order, the mandatory ones added
    assert _enabled(t.plugins, "filter") == ["NodeUnschedulable", "NodePorts", "NodeResourcesFit",
                                             "TaintToleration", "NodeLabel", "ServiceAffinity"]
    assert _enabled(t.plugins, "preFilter") == ["NodePorts", "NodeResourcesFit", "ServiceAffinity"]
    assert _enabled(t.plugins, "score") == [("ImageLocality", 1), ("NodeAffinity", 2), ("NodeLabel", 6),
                                            ("ServiceAffinity", 6)]


def test_create_from_config_with_hard_pod_affinity_symmetric_weight() -> None:
    """TestCreateFromConfigWithHardPodAffinitySymmetricWeight; the Policy's weight wins over
    the flag's (the flag's counts when the Policy gives none)."""
    data = {"priorities": [{"name": "InterPodAffinityPriority", "weight": 1}], "hardPodAffinitySymmetricWeight": 10}
    assert _config(translate(parse_policy(data), hard_pod_affinity_weight=50), "InterPodAffinity") == \
        {"hardPodAffinityWeight": 10}
    del data["hardPodAffinitySymmetricWeight"]
    assert _config(translate(parse_policy(data), hard_pod_affinity_weight=50), "InterPodAffinity") == \
        {"hardPodAffinityWeight": 50}
    assert _config(translate(parse_policy(data)), "InterPodAffinity") is None


def test_create_from_empty_config_uses_the_default_predicates_and_priorities() -> None:
    """TestCreateFromEmptyConfig / ...WithUnspecifiedPredicatesOrPriorities: a Policy without
    predicates or priorities gets the registry's defaults (the zone and cloud-disk volume
    plugins left out)."""
    t = translate(parse_policy({}), GATE_OFF)
    assert _enabled(t.plugins, "filter") == _upstream([
        "NodeUnschedulable", "NodeResourcesFit", "NodeName", "NodePorts", "NodeAffinity", "VolumeRestrictions",
        "TaintToleration", "EBSLimits", "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity"])
    assert set(t.omitted) == {"EBSLimits", "GCEPDLimits", "AzureDiskLimits", "VolumeZone"}
    assert _enabled(t.plugins, "score") == [
        ("NodeResourcesBalancedAllocation", 1), ("PodTopologySpread", 2), ("ImageLocality", 1),
        ("InterPodAffinity", 1), ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1),
        ("NodePreferAvoidPods", 10000), ("SelectorSpread", 1), ("TaintToleration", 1)]
    # before the gate, PodTopologySpread had no default constraints
    assert _config(t, "PodTopologySpread") == {"defaultingType": "List"}
    # an empty list is not a missing one: only the mandatory predicates
    t = translate(parse_policy({"predicates": [], "priorities": []}))
    assert _enabled(t.plugins, "filter") == ["NodeUnschedulable", "TaintToleration"]
    assert "score" not in t.plugins


# ---------------------------------------------------------------- upstream's legacy_registry_test.go

@pytest.mark.parametrize("gates,keys,pre_score,score,config", [
    # default priorities (the gate on, as upstream's test runs them; NodeAffinity's PreScore is 1.21's)
    (GATE_ON, None, ["PodTopologySpread", "InterPodAffinity", "NodeAffinity", "TaintToleration"],
     [("NodeResourcesBalancedAllocation", 1), ("PodTopologySpread", 2), ("ImageLocality", 1),
      ("InterPodAffinity", 1), ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1),
      ("NodePreferAvoidPods", 10000), ("TaintToleration", 1)], {"defaultingType": "System"}),
    (GATE_ON, {"SelectorSpreadPriority": 3}, ["PodTopologySpread"], [("PodTopologySpread", 3)],
     {"defaultingType": "System"}),
    (GATE_ON, {"EvenPodsSpreadPriority": 4}, ["PodTopologySpread"], [("PodTopologySpread", 4)],
     {"defaultingType": "List"}),
    (GATE_OFF, {"SelectorSpreadPriority": 1, "EvenPodsSpreadPriority": 2}, ["PodTopologySpread", "SelectorSpread"],
     [("PodTopologySpread", 2), ("SelectorSpread", 1)], {"defaultingType": "List"}),
])
def test_append_priority_configs(gates: FeatureGates, keys: dict[str, int] | None, pre_score: list[str],
                                 score: list[tuple[str, int]], config: dict[str, Any]) -> None:
    priorities = None if keys is None else [{"name": k, "weight": w} for k, w in keys.items()]
    t = translate(parse_policy({"predicates": [], "priorities": priorities}), gates)
    assert _enabled(t.plugins, "preScore") == pre_score
    assert _enabled(t.plugins, "score") == score
    assert _config(t, "PodTopologySpread") == config


def test_predicates_run_in_upstream_order_whatever_the_policy_says() -> None:
    t = translate(parse_policy({"predicates": [{"name": n} for n in (
        "MatchInterPodAffinity", "EvenPodsSpread", "PodToleratesNodeTaints", "PodFitsResources", "MatchNodeSelector",
        "PodFitsHostPorts", "HostName", "CheckNodeUnschedulable")]}))
    assert t.predicates == ["CheckNodeUnschedulable", "HostName", "PodFitsHostPorts", "MatchNodeSelector",
                            "PodFitsResources", "PodToleratesNodeTaints", "EvenPodsSpread", "MatchInterPodAffinity"]
    assert _enabled(t.plugins, "filter") == ["NodeUnschedulable", "NodeName", "NodePorts", "NodeAffinity",
                                             "NodeResourcesFit", "TaintToleration", "PodTopologySpread",
                                             "InterPodAffinity"]


def test_old_names_and_equal_priority() -> None:
    t = translate(parse_policy({
        "predicates": [{"name": "PodFitsPorts"}, {"name": "CheckNodeCondition"}, {"name": "GeneralPredicates"}],
        "priorities": [{"name": "ServiceSpreadingPriority", "weight": 2}, {"name": "EqualPriority", "weight": 1}]}))
    assert t.predicates == ["CheckNodeUnschedulable", "GeneralPredicates", "PodFitsHostPorts",
                            "PodToleratesNodeTaints"]
    assert _enabled(t.plugins, "filter") == ["NodeUnschedulable", "NodeResourcesFit", "NodeName", "NodePorts",
                                             "NodeAffinity", "TaintToleration"]
    assert _enabled(t.plugins, "score") == [("SelectorSpread", 2)]  # EqualPriority scores nothing
    assert any("CheckNodeCondition" in note for note in t.notes)


def test_a_custom_argument_counts_even_under_a_registered_name() -> None:
    """Before 1.19 an argument made the custom predicate whatever the entry's name; 1.19-1.22
    dropped it silently when the name was a registered one. kubeling reads it."""
    t = translate(parse_policy({"predicates": [
        {"name": "CheckNodeLabelPresence", "argument": {"labelsPresence": {"labels": ["ssd"], "presence": True}}}]}))
    assert _config(t, "NodeLabel") == {"presentLabels": ["ssd"]}


@pytest.mark.parametrize("data,message", [
    ({"predicates": [{"name": "Foo"}]}, "predicates[0].name: predicate type not found for 'Foo'"),
    ({"priorities": [{"name": "Foo", "weight": 1}]}, "priorities[0].name: priority type not found for 'Foo'"),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": 0}]},
     "priorities[0].weight: priority LeastRequestedPriority should have a positive weight applied to it or it "
     "has overflown"),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": -3}]}, "should have a positive weight"),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": 2**62}]}, "or it has overflown"),
    ({"priorities": [{"name": "NodeLabel", "weight": 1}]},
     "priorities[0].name: priority 'NodeLabel' needs its argument (labelPreference)"),
    ({"priorities": [
        {"name": "a", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {"shape": [
            {"utilization": 0, "score": 0}]}}},
        {"name": "b", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {"shape": [
            {"utilization": 0, "score": 0}]}}}]},
     "priorities[1]: priority 'b' redeclares custom priority 'RequestedToCapacityRatio', from: 'a'"),
    ({"priorities": [
        {"name": "a", "weight": 1, "argument": {"labelPreference": {"label": "x", "presence": True}}},
        {"name": "b", "weight": 2, "argument": {"labelPreference": {"label": "y", "presence": True}}}]},
     "priorities[1].weight: LabelPreference  priority 'b' has a different weight with 'a'"),
    ({"priorities": [
        {"name": "a", "weight": 1, "argument": {"serviceAntiAffinity": {"label": "x"}}},
        {"name": "b", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "y"}}}]},
     "ServiceAntiAffinity  priority 'b' has a different weight with 'a'"),
    ({"predicates": [{"name": "x", "argument": {"serviceAffinity": {"labels": ["a"]},
                                                "labelsPresence": {"labels": ["b"]}}}]},
     "predicates[0].argument: exactly 1 predicate argument is required, numArgs: 2, predicate x"),
    ({"priorities": [{"name": "x", "weight": 1, "argument": {}}]},
     "priorities[0].argument: exactly 1 priority argument is required, numArgs: 0, priority x"),
    ({"hardPodAffinitySymmetricWeight": 101},
     "hardPodAffinitySymmetricWeight: Invalid value: 101: not in valid range [0-100]"),
    ({"kind": "KubeSchedulerConfiguration"}, "kind: Invalid value: 'KubeSchedulerConfiguration': must be Policy"),
    ({"apiVersion": "v2"}, "apiVersion: Invalid value: 'v2': must be v1"),
    ({"predicates": {"name": "HostName"}}, "predicates: Invalid value: must be a list"),
    ({"priorities": [{"weight": 1}]}, "priorities[0].name: Required value"),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": "1"}]},
     "priorities[0].weight: Invalid value: '1': must be an integer"),
])
def test_bad_policies_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(BaseConfigError) as info:
        translate(parse_policy(data, "policy.json"))
    assert message in str(info.value)


def test_policy_sources_say_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(BaseConfigError, match=f"missing policy config file {tmp_path}/nope.json"):
        read_policy_file(str(tmp_path / "nope.json"))
    (tmp_path / "broken.json").write_text('{"predicates": [')
    with pytest.raises(BaseConfigError, match="policy file .*broken.json: invalid policy"):
        read_policy_file(str(tmp_path / "broken.json"))
    cm = core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name="sched", namespace="kube-system"),
                            data={"policy.json": "{}"})
    with pytest.raises(BaseConfigError, match="policy ConfigMap kube-system/sched: missing policy config map value "
                                              "at key 'policy.cfg'"):
        policy_of(cm)
    cm.data["policy.cfg"] = "kind: Policy\napiVersion: v1\npredicates: [{name: HostName}]\n"  # YAML as well
    assert policy_of(cm).predicates is not None


# ---------------------------------------------------------------- algorithm providers

_UPSTREAM_DEFAULT_PROVIDER: dict[str, list[Any]] = {  # algorithmprovider/registry_test.go, the gate on (1.20-1.22)
    "preFilter": ["NodeResourcesFit", "NodePorts", "PodTopologySpread", "InterPodAffinity", "VolumeBinding"],
    "filter": ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
               "VolumeRestrictions", "EBSLimits", "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits",
               "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity"],
    "postFilter": ["DefaultPreemption"],
    "preScore": ["InterPodAffinity", "PodTopologySpread", "TaintToleration"],
    "score": [("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("InterPodAffinity", 1),
              ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1), ("NodePreferAvoidPods", 10000),
              ("PodTopologySpread", 2), ("TaintToleration", 1)],
    "reserve": ["VolumeBinding"], "preBind": ["VolumeBinding"], "bind": ["DefaultBinder"],
}


def _provider_points(name: str, gates: FeatureGates) -> dict[str, list[Any]]:
    points = provider_profile(name, gates).points
    return {point: [(n, w) if point == "score" else n for n, w in entries] for point, entries in points.items()}


def test_default_provider_as_upstream() -> None:
    got = _provider_points("DefaultProvider", GATE_ON)
    assert got.pop("preEnqueue") == ["SchedulingGates"]  # kubeling's: gated pods stay gated
    assert got.pop("queueSort") == ["PrioritySort"]
    assert got == {point: _upstream(names) for point, names in _UPSTREAM_DEFAULT_PROVIDER.items()}
    # "DefaultPodTopologySpread disabled": SelectorSpread last at PreScore and Score
    got = _provider_points("DefaultProvider", GATE_OFF)
    assert got["preScore"][-1] == "SelectorSpread" and got["score"][-1] == ("SelectorSpread", 1)
    assert provider_profile("DefaultProvider", GATE_OFF).plugin_config == [
        {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]


def test_cluster_autoscaler_provider_packs_nodes() -> None:
    """TestClusterAutoscalerProvider: MostAllocated in LeastAllocated's place."""
    got = _provider_points("ClusterAutoscalerProvider", GATE_ON)
    want = [("NodeResourcesMostAllocated", 1) if n == "NodeResourcesLeastAllocated" else (n, w)
            for n, w in _UPSTREAM_DEFAULT_PROVIDER["score"]]
    assert got["score"] == want


def test_a_provider_then_the_profiles_own_plugins() -> None:
    """As upstream's createFromProvider: the provider's set, then the profile's disabled and
    enabled (a re-enabled plugin keeps its place and takes the new weight)."""
    cfg = parse_config({"algorithmSource": {"provider": "DefaultProvider"}, "profiles": [{
        "schedulerName": "default-scheduler", "plugins": {
            "score": {"disabled": [{"name": "ImageLocality"}], "enabled": [
                {"name": "NodeAffinity", "weight": 7}, {"name": "NodeResourcesFit", "weight": 3}]}}}]},
        in_tree_registry())
    points = cfg.profiles[0].points
    assert points.enabled["score"] == ["NodeResourcesBalancedAllocation", "InterPodAffinity",
                                       "NodeResourcesLeastAllocated", "NodeAffinity", "NodePreferAvoidPods",
                                       "PodTopologySpread", "TaintToleration", "SelectorSpread", "NodeResourcesFit"]
    assert points.weights["NodeAffinity"] == 7 and points.weights["NodePreferAvoidPods"] == 10000
    assert cfg.profiles[0].origin == "provider DefaultProvider" and "VolumeZone" in cfg.profiles[0].omitted
    assert "VolumeBinding" in points.enabled["preBind"]


# ---------------------------------------------------------------- configuration and flags

def _write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_flags_override_the_configuration_file(tmp_path: Path) -> None:
    config = _write(tmp_path, "config.yaml", {"algorithmSource": {"provider": "ClusterAutoscalerProvider"},
                                             "schedulerName": "from-file", "hardPodAffinitySymmetricWeight": 5})
    policy = _write(tmp_path, "policy.json", {"kind": "Policy", "predicates": [{"name": "HostName"}],
                                              "priorities": [{"name": "InterPodAffinityPriority", "weight": 1}]})
    data = config_data(config, LegacyOptions(algorithm_provider="DefaultProvider"))
    assert data["algorithmSource"] == {"provider": "DefaultProvider"}
    # a policy file before a ConfigMap, unless the ConfigMap is named and the file is not forced
    data = config_data(config, LegacyOptions(policy_config_file=policy, policy_configmap="cm",
                                             use_legacy_policy_config=True, algorithm_provider="DefaultProvider"))
    assert data["algorithmSource"] == {"policy": {"file": {"path": policy}}}
    data = config_data(config, LegacyOptions(policy_config_file=policy, policy_configmap="cm"))
    assert data["algorithmSource"] == {"policy": {"configMap": {"namespace": "kube-system", "name": "cm"}}}
    cfg = load_config(config, in_tree_registry(), legacy=LegacyOptions(
        policy_config_file=policy, scheduler_name="from-flag", hard_pod_affinity_symmetric_weight=20))
    profile = cfg.profiles[0]
    assert profile.scheduler_name == "from-flag" and profile.origin == f"policy file {policy}"
    assert profile.points.args["InterPodAffinity"] == {"hardPodAffinityWeight": 20}
    assert profile.points.enabled["filter"] == ["NodeUnschedulable", "NodeName", "TaintToleration"]
    with pytest.raises(ConfigError, match="policyConfigFile: Required value: required when "
                                          "--use-legacy-policy-config is true"):
        LegacyOptions(use_legacy_policy_config=True).apply({})
    with pytest.raises(ConfigError, match="hardPodAffinitySymmetricWeight: Invalid value: 101"):
        LegacyOptions(hard_pod_affinity_symmetric_weight=101).apply({})


@pytest.mark.parametrize("data,message", [
    ({"algorithmSource": {"provider": "Foo"}}, "algorithmSource.provider: algorithm provider 'Foo' is not registered"),
    ({"algorithmSource": {}}, "algorithmSource: Invalid value: exactly one of provider and policy must be set"),
    ({"algorithmSource": {"policy": {"file": {"path": "a"}, "configMap": {"name": "b"}}}},
     "algorithmSource.policy: Invalid value: exactly one of file and configMap must be set"),
    ({"algorithmSource": {"policy": {"configMap": {"namespace": "x"}}}},
     "algorithmSource.policy.configMap.name: Required value"),
    ({"schedulerName": "a", "profiles": [{"schedulerName": "b"}]}, "schedulerName: Invalid value: set with profiles"),
    ({"disablePreemption": "yes"}, "disablePreemption: Invalid value: 'yes': must be true or false"),
    ({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds: Invalid value: -1"),
    ({"profiles": [{"runAllFilters": 1}]}, "profiles[0].runAllFilters: Invalid value: 1"),
])
def test_older_configuration_errors_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, in_tree_registry())
    assert message in str(info.value)


def test_a_policy_makes_the_profiles_plugins_and_nothing_else_may() -> None:
    source = {"algorithmSource": {"policy": {"file": {"path": "p.json"}}}}
    policy = parse_policy({"predicates": [{"name": "HostName"}]})
    with pytest.raises(ConfigError, match=r"profiles\[0\].plugins: Invalid value: cannot be set together with a "
                                          r"Policy"):
        parse_config({**source, "profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality"}]}}}]},
                     in_tree_registry(), policy=policy)
    with pytest.raises(ConfigError, match="extenders: Invalid value: cannot be set together with a Policy"):
        parse_config({**source, "extenders": [{"urlPrefix": "http://x"}]}, in_tree_registry(), policy=policy)
    with pytest.raises(ConfigError, match="policy file p.json: predicates.0..name: predicate type not found"):
        parse_config(source, in_tree_registry(), policy=parse_policy({"predicates": [{"name": "Nope"}]}))
    # every profile gets the Policy's plugins; names, recordResults and percentages stay its own
    cfg = parse_config({**source, "profiles": [{"schedulerName": "a", "recordResults": True},
                                               {"schedulerName": "b", "percentageOfNodesToScore": 30}]},
                       in_tree_registry(), policy=policy)
    assert [p.points.enabled["filter"] for p in cfg.profiles] == [["NodeUnschedulable", "NodeName",
                                                                   "TaintToleration"]] * 2
    assert cfg.profiles[0].record.enabled and cfg.profiles[1].percentage_of_nodes_to_score == 30


def test_a_policys_extenders_take_their_timeout_in_nanoseconds() -> None:
    cfg = parse_config({"algorithmSource": {"policy": {"file": {"path": "p.json"}}}}, in_tree_registry(),
                       policy=parse_policy({"extenders": [{"urlPrefix": "http://127.0.0.1:1/ext", "filterVerb": "f",
                                                           "httpTimeout": 2500000000, "enableHttps": False}]}))
    assert cfg.extenders[0].http_timeout == 2.5 and cfg.extenders[0].filter_verb == "f"


def test_disable_preemption_leaves_no_post_filter() -> None:
    for data, policy in (({"disablePreemption": True}, None),
                         ({"disablePreemption": True, "algorithmSource": {"policy": {"file": {"path": "p"}}}},
                          Policy())):
        cfg = parse_config(data, in_tree_registry(), policy=policy)
        assert "postFilter" not in cfg.profiles[0].points.enabled


# ---------------------------------------------------------------- the printed configuration

def _frameworks(cfg: Any) -> list[tuple[str, dict[str, list[str]], dict[str, int], dict[str, Any], bool]]:
    out = []
    for p in cfg.profiles:
        fwk = Framework(p.scheduler_name, p.points, in_tree_registry(), None, run_all_filters=p.run_all_filters)
        out.append((p.scheduler_name, p.points.enabled, fwk.weights, p.points.args, fwk.run_all_filters))
    return out


@pytest.mark.parametrize("data,policy", [
    ({}, None),
    ({"algorithmSource": {"provider": "ClusterAutoscalerProvider"}, "disablePreemption": True}, None),
    ({"algorithmSource": {"policy": {"file": {"path": "p.json"}}}, "schedulerName": "legacy"}, Policy()),
    ({"algorithmSource": {"policy": {"file": {"path": "p.json"}}}}, parse_policy({
        "alwaysCheckAllPredicates": True, "hardPodAffinitySymmetricWeight": 7,
        "predicates": [{"name": "GeneralPredicates"}, {"name": "Zone", "argument": {"serviceAffinity": {
            "labels": ["zone"]}}}],
        "priorities": [{"name": "InterPodAffinityPriority", "weight": 2}, {"name": "Ratio", "weight": 3, "argument": {
            "requestedToCapacityRatioArguments": {"shape": [{"utilization": 0, "score": 0},
                                                            {"utilization": 100, "score": 10}],
                                                  "resources": [{"name": "cpu", "weight": 2}]}}}]})),
])
def test_the_printed_configuration_reads_back_as_the_same_profiles(data: dict[str, Any], policy: Policy | None) \
        -> None:
    import yaml
    cfg = parse_config(data, in_tree_registry(), policy=policy)
    text = render(cfg)
    again = parse_config(yaml.safe_load(text), in_tree_registry())
    assert _frameworks(again) == _frameworks(cfg)
    assert again.extenders == cfg.extenders
    assert again.pod_max_backoff_seconds == cfg.pod_max_backoff_seconds
    for name in cfg.profiles[0].omitted:
        assert f"left out, {name}" in text


def test_print_config_prints_what_a_policy_file_becomes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m scheduler --policy-config-file FILE --print-config`: no apiserver needed."""
    import yaml

    from scheduler.__main__ import main
    policy = _write(tmp_path, "policy.json", {"kind": "Policy", "apiVersion": "v1",
                                              "predicates": [{"name": "PodFitsResources"},
                                                             {"name": "NoVolumeZoneConflict"}],
                                              "priorities": [{"name": "MostRequestedPriority", "weight": 2}]})
    assert main(["--policy-config-file", policy, "--scheduler-name", "legacy", "--print-config"]) == 0
    out = capsys.readouterr().out
    printed = yaml.safe_load(out)
    [profile] = printed["profiles"]
    assert profile["schedulerName"] == "legacy"
    assert profile["plugins"]["score"] == {"enabled": [{"name": "NodeResourcesMostAllocated", "weight": 2}]}
    assert "left out, VolumeZone" in out  # NoVolumeZoneConflict's plugin, said why
    assert main(["--algorithm-provider", "ClusterAutoscalerProvider", "--print-config"]) == 0
    assert "NodeResourcesMostAllocated" in capsys.readouterr().out

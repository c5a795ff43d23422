"""Configuration: profiles, plugin sets, weights, args, errors naming the field; out-of-tree plugins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scheduler.config import ConfigError, parse_config
from scheduler.framework.runtime import Framework
from scheduler.plugins import in_tree_registry, registry
from tests.unit.scheduler.builders import make_node, make_pod
from tests.unit.scheduler.harness import RecordingBinder, drain

PLUGIN_PKG = Path(__file__).resolve().parents[2] / "fixtures" / "plugin_pkg"


def test_profiles_and_plugin_sets() -> None:
    cfg = parse_config({
        "percentageOfNodesToScore": 30, "podInitialBackoffSeconds": 2, "podMaxBackoffSeconds": 20,
        "profiles": [
            {"schedulerName": "default-scheduler"},
            {"schedulerName": "bin-packing",
             "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                                   "enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                         "multiPoint": {"disabled": [{"name": "ImageLocality"}]}},
             "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]},
        ]}, in_tree_registry())
    assert cfg.percentage_of_nodes_to_score == 30 and cfg.pod_max_backoff_seconds == 20
    default, packing = cfg.profiles
    assert "NodeResourcesBalancedAllocation" in default.points.enabled["score"]
    assert packing.points.enabled["score"] == ["TaintToleration", "NodeAffinity", "NodeResourcesFit",
                                               "PodTopologySpread", "InterPodAffinity"]
    assert packing.points.weights["NodeResourcesFit"] == 5
    fwk = Framework(packing.scheduler_name, packing.points, in_tree_registry())
    assert fwk.plugins["NodeResourcesFit"].strategy == "MostAllocated"  # type: ignore[attr-defined]


@pytest.mark.parametrize("data,field", [
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "profiles[1].schedulerName"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
     "profiles[0].plugins.score.enabled[0].name"),
    ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "ImageLocality"}]}}}]}, "does not extend filter"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}}]},
     "profiles[0].plugins.score.enabled[0].weight"),
    ({"profiles": [{"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}]}, "profiles[0].plugins.queueSort"),
    ({"profiles": [{"plugins": {"sort": {}}}]}, "profiles[0].plugins.sort"),
    ({"percentageOfNodesToScore": 150}, "percentageOfNodesToScore"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 1}, "podMaxBackoffSeconds"),
    ({"kind": "Deployment"}, "kind"),
])
def test_config_errors_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, in_tree_registry())
    assert field in str(info.value)


def test_plugin_args_are_validated() -> None:
    cfg = parse_config({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "RequestedToCapacityRatio",
                            "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1},
                                                                   {"utilization": 10, "score": 2}]}}}}]}]},
        in_tree_registry())
    with pytest.raises(ConfigError, match=r"shape\[1\].utilization"):
        Framework("default-scheduler", cfg.profiles[0].points, in_tree_registry())


async def test_out_of_tree_plugin_from_an_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGIN_PKG))
    reg = registry()
    assert "PreferLabel" in reg and reg["PreferLabel"].__module__ == "example_kubeling_plugin"
    reg["RecordingBinder"] = RecordingBinder
    cfg = parse_config({"profiles": [{"plugins": {
        "multiPoint": {"enabled": [{"name": "PreferLabel", "weight": 50}]},
        "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "RecordingBinder"}]}},
        "pluginConfig": [{"name": "PreferLabel", "args": {"label": "gpu"}}]}]}, reg)
    from scheduler.scheduler import Scheduler
    sched = Scheduler(cfg, reg)
    sched.bindings = {}  # type: ignore[attr-defined]
    for i in range(3):
        sched.on_node_add(make_node(f"plain{i}", "8", "8Gi", "110"))
    sched.on_node_add(make_node("special", "8", "8Gi", "110", labels={"gpu": "yes"}))
    for i in range(5):
        sched.on_pod_add(make_pod(f"p{i}", {"cpu": "100m"}))
    await drain(sched)
    assert set(sched.bindings.values()) == {"special"}  # type: ignore[attr-defined]
    assert "example_kubeling_plugin" in sys.modules


def test_the_sample_config_in_deploy_is_valid() -> None:
    from scheduler.config import load_config
    cfg = load_config(Path(__file__).resolve().parents[3] / "deploy" / "scheduler-config.yaml", in_tree_registry())
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler", "bin-packing"]
    assert cfg.pod_max_in_unschedulable_pods_duration == 300.0
    for p in cfg.profiles:
        Framework(p.scheduler_name, p.points, in_tree_registry())  # plugin args are valid too

"""examples/coscheduling: an out-of-tree plugin that parks pods at Permit and lets them go
from another pod's Permit, through the handle's waiting pods."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from protos.kubeling.v1 import core_pb2
from scheduler.config import parse_config
from scheduler.plugins import in_tree_registry
from scheduler.scheduler import Scheduler
from tests.unit.scheduler.builders import make_node, make_pod
from tests.unit.scheduler.harness import RecordingBinder

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "coscheduling" / "coscheduling.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("coscheduling", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scheduler(timeout: float = 30.0) -> Scheduler:
    example = _example()
    registry = in_tree_registry()
    registry["Coscheduling"] = example.Coscheduling
    registry["RecordingBinder"] = RecordingBinder
    cfg = parse_config({"profiles": [{
        "plugins": {"permit": {"enabled": [{"name": "Coscheduling"}]},
                    "reserve": {"enabled": [{"name": "Coscheduling"}]},
                    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "RecordingBinder"}]}},
        "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": timeout}}]}]}, registry)
    sched = Scheduler(cfg, registry)
    sched.bindings = {}  # type: ignore[attr-defined]
    sched.on_node_add(make_node("n1", "8", "8Gi", "110"))
    sched.on_node_add(make_node("n2", "8", "8Gi", "110"))
    return sched


def _member(name: str, group: str, size: int) -> core_pb2.Pod:
    pod = make_pod(name, {"cpu": "1"}, labels={"scheduling.kubeling.io/pod-group": group})
    pod.metadata.annotations["scheduling.kubeling.io/min-available"] = str(size)
    return pod


def _bindings(sched: Scheduler) -> dict[str, Any]:
    return sched.bindings  # type: ignore[attr-defined]  # the harness's binder records here


async def test_a_group_is_bound_once_its_last_member_arrives() -> None:
    sched = _scheduler()
    a, b, c = (_member(n, "train", 3) for n in "abc")
    for pod in (a, b):
        sched.on_pod_add(pod)
        await sched.schedule_one()
    waiting = {w.pod.metadata.name: w for w in sched.iterate_over_waiting_pods()}
    assert set(waiting) == {"a", "b"} and _bindings(sched) == {}
    assert waiting["a"].pending_plugins() == ["Coscheduling"]
    assert sched.get_waiting_pod(a.metadata.uid) is waiting["a"]
    sched.on_pod_add(c)
    await sched.schedule_one()
    await sched.wait_for_bindings()
    assert set(_bindings(sched)) == {"a", "b", "c"}
    assert list(sched.iterate_over_waiting_pods()) == []


async def test_a_pod_without_a_group_is_not_held() -> None:
    sched = _scheduler()
    sched.on_pod_add(make_pod("solo", {"cpu": "1"}))
    await sched.schedule_one()
    await sched.wait_for_bindings()
    assert set(_bindings(sched)) == {"solo"}


async def test_an_incomplete_group_times_out_and_frees_its_nodes() -> None:
    sched = _scheduler(timeout=0.2)
    for name in "xy":
        sched.on_pod_add(_member(name, "small", 3))
        await sched.schedule_one()
    await sched.wait_for_bindings()  # both waits end: the timeout, then Unreserve's rejection
    assert _bindings(sched) == {}
    assert all(info.requested.milli_cpu == 0 for info in sched.cache.nodes.values())
    stats = sched.queue.stats()
    assert stats.active == 0 and stats.unschedulable + stats.backoff == 2  # back in the queue, not bound


async def test_rejecting_one_member_through_the_handle_rejects_its_siblings() -> None:
    sched = _scheduler()
    p, q = _member("p", "pair", 3), _member("q", "pair", 3)
    for pod in (p, q):
        sched.on_pod_add(pod)
        await sched.schedule_one()
    assert sched.reject_waiting_pod(p.metadata.uid) is True
    assert sched.reject_waiting_pod("no-such-uid") is False
    await sched.wait_for_bindings()
    assert _bindings(sched) == {} and list(sched.iterate_over_waiting_pods()) == []


async def test_a_bad_group_size_is_unresolvable() -> None:
    sched = _scheduler()
    bad = _member("bad", "g", 1)
    bad.metadata.annotations["scheduling.kubeling.io/min-available"] = "many"
    sched.on_pod_add(bad)
    await sched.schedule_one()
    await sched.wait_for_bindings()
    stats = sched.queue.stats()
    assert _bindings(sched) == {} and stats.unschedulable + stats.backoff == 1

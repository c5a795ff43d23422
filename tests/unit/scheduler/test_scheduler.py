"""The scheduling loop in process: placement, failures, requeue on events, permit, gates."""

from __future__ import annotations

import random

from protos.kubeling.v1 import core_pb2
from scheduler.config import parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import PermitPlugin
from scheduler.framework.status import Code, Status
from scheduler.plugins import in_tree_registry
from scheduler.schedule_one import FitError, num_feasible_nodes_to_find
from scheduler.scheduler import Scheduler
from tests.unit.scheduler.builders import FailureLog, make_node, make_pod
from tests.unit.scheduler.harness import RecordingBinder, drain, make_scheduler


def test_num_feasible_nodes_to_find() -> None:
    assert num_feasible_nodes_to_find(0, 50) == 50
    assert num_feasible_nodes_to_find(0, 100) == 100
    assert num_feasible_nodes_to_find(0, 1000) == 420    # 50 - 1000/125 = 42%
    assert num_feasible_nodes_to_find(0, 5000) == 500    # 50 - 40 = 10%
    assert num_feasible_nodes_to_find(0, 10000) == 500   # floor of 5%
    assert num_feasible_nodes_to_find(0, 200) == 100     # at least 100
    assert num_feasible_nodes_to_find(30, 1000) == 300


async def test_places_pods_within_capacity_spreading_by_least_allocated() -> None:
    sched = make_scheduler(rng=random.Random(1))
    sched.on_node_add(make_node("small", "2", "4Gi", "110"))
    sched.on_node_add(make_node("big", "8", "16Gi", "110"))
    for i in range(10):
        sched.on_pod_add(make_pod(f"p{i}", {"cpu": "500m", "memory": "512Mi"}))
    await drain(sched)
    placed = sched.bindings  # type: ignore[attr-defined]
    assert len(placed) == 10
    on_small = sum(1 for n in placed.values() if n == "small")
    assert on_small * 500 <= 2000 and 10 - on_small <= 16
    assert list(placed.values()).count("big") > on_small  # LeastAllocated prefers the big node
    assert sched.cache.nodes["small"].requested.milli_cpu == on_small * 500


async def test_unschedulable_pod_reports_upstream_message_and_waits_for_a_node() -> None:
    log = FailureLog()
    sched = make_scheduler(recorder=log)
    taint = core_pb2.Taint(key="k", value="v", effect="NoSchedule")
    for i in range(3):
        sched.on_node_add(make_node(f"tiny{i}", "1", "1Gi", "110"))
    for i in range(2):
        sched.on_node_add(make_node(f"tainted{i}", "8", "8Gi", "110", taints=[taint]))
    sched.on_pod_add(make_pod("big", {"cpu": "4"}))
    await drain(sched)
    # upstream's wording, its doubled period included
    assert [(r, m) for r, m, _ in log.failures] == [("Unschedulable",
                         "0/5 nodes are available: 2 node(s) had untolerated taint {k: v}, 3 Insufficient cpu. "
                         "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, "
                         "3 No preemption victims found for incoming pod..")]
    assert "default/big" in sched.queue.unschedulable
    # An unrelated pod event does not move it (NodeResourcesFit and TaintToleration do
    # care about pod deletes, so use a label-only node update: only NodeAffinity cares).
    old = make_node("tiny0", "1", "1Gi", "110")
    new = make_node("tiny0", "1", "1Gi", "110", labels={"x": "y"})
    sched.on_node_update(old, new)
    assert "default/big" in sched.queue.unschedulable
    # A node that fits arrives: the pod moves (to backoff, then active) and is placed.
    sched.queue.initial_backoff = sched.queue.max_backoff = 0.0
    sched.on_node_add(make_node("large", "8", "8Gi", "110"))
    assert "default/big" not in sched.queue.unschedulable
    await drain(sched)
    assert sched.bindings == {"big": "large"}  # type: ignore[attr-defined]


async def test_no_nodes_waits_without_error() -> None:
    log = FailureLog()
    sched = make_scheduler(recorder=log)
    sched.on_pod_add(make_pod("p", {"cpu": "1"}))
    await drain(sched)
    assert [r for r, _, _ in log.failures] == ["Unschedulable"] and "default/p" in sched.queue.unschedulable
    sched.queue.initial_backoff = sched.queue.max_backoff = 0.0
    sched.on_node_add(make_node("n", "2", "2Gi", "110"))
    await drain(sched)
    assert sched.bindings == {"p": "n"}  # type: ignore[attr-defined]


async def test_failed_bind_forgets_and_requeues() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n", "2", "2Gi", "110"))
    RecordingBinder.fail = {"p"}
    try:
        sched.on_pod_add(make_pod("p", {"cpu": "1"}))
        await drain(sched)
        assert not sched.cache.is_assumed("uid-p")
        assert sched.cache.nodes["n"].requested.milli_cpu == 0  # the assumption was forgotten
        assert "default/p" in sched.queue.backoff.items  # errors retry after backoff
    finally:
        RecordingBinder.fail = set()


async def test_assumed_pod_is_seen_by_the_next_cycle() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "1", "1Gi", "110"))
    sched.on_node_add(make_node("n2", "1", "1Gi", "110"))
    sched.on_pod_add(make_pod("a", {"cpu": "1"}))
    sched.on_pod_add(make_pod("b", {"cpu": "1"}))
    # Two cycles back to back, bindings not yet run: b must not land where a was assumed.
    await sched.schedule_one()
    await sched.schedule_one()
    await sched.wait_for_bindings()
    assert sorted(sched.bindings.values()) == ["n1", "n2"]  # type: ignore[attr-defined]


async def test_priority_order_and_scheduling_gates() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n", "1", "1Gi", "110"))
    gated = make_pod("gated", {"cpu": "100m"}, priority=1000)
    gated.spec.schedulingGates.add(name="example.com/wait")
    sched.on_pod_add(gated)
    sched.on_pod_add(make_pod("low", {"cpu": "1"}, priority=1))
    sched.on_pod_add(make_pod("high", {"cpu": "1"}, priority=10))
    assert sched.queue.stats().gated == 1
    await drain(sched)
    assert sched.bindings == {"high": "n"}  # type: ignore[attr-defined]
    ungated = core_pb2.Pod()
    ungated.CopyFrom(gated)
    ungated.spec.ClearField("schedulingGates")
    sched.on_pod_update(gated, ungated)
    assert sched.queue.stats().gated == 0 and "default/gated" in sched.queue.active.items


async def test_permit_wait_allow_and_reject() -> None:
    class Gate(PermitPlugin):
        name = "Gate"

        def permit(self, state: CycleState, pod, node_name: str):
            return Status(Code.WAIT), 5.0

    registry = in_tree_registry()
    registry["Gate"] = Gate
    registry["RecordingBinder"] = RecordingBinder
    cfg = parse_config({"profiles": [{"plugins": {
        "permit": {"enabled": [{"name": "Gate"}]},
        "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "RecordingBinder"}]}}}]}, registry)
    sched = Scheduler(cfg, registry)
    sched.bindings = {}  # type: ignore[attr-defined]
    sched.recorded = {}  # type: ignore[attr-defined]
    sched.on_node_add(make_node("n", "4", "4Gi", "110"))
    sched.on_pod_add(make_pod("ok", {"cpu": "1"}))
    sched.on_pod_add(make_pod("no", {"cpu": "1"}))
    await sched.schedule_one()
    await sched.schedule_one()
    fwk = sched.frameworks["default-scheduler"]
    waiting = {w.pod.metadata.name: w for w in fwk.waiting.values()}
    assert set(waiting) == {"ok", "no"}
    waiting["ok"].allow("Gate")
    waiting["no"].reject("Gate", "not today")
    await sched.wait_for_bindings()
    assert sched.bindings == {"ok": "n"}  # type: ignore[attr-defined]
    assert sched.cache.nodes["n"].requested.milli_cpu == 1000  # the rejected one was unreserved


def test_fit_error_message_format() -> None:
    err = FitError(make_pod("p"), 5, {
        "a": Status.unschedulable("Insufficient cpu"), "b": Status.unschedulable("Insufficient cpu", "Too many pods"),
        "c": Status.unresolvable("node(s) didn't match Pod's node affinity/selector")})
    assert str(err) == ("0/5 nodes are available: 1 Too many pods, 1 node(s) didn't match Pod's node "
                        "affinity/selector, 2 Insufficient cpu.")

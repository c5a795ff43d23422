"""The batch (numpy) paths give exactly the per-node answers, on random clusters."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from protos.kubeling.v1 import core_pb2
from scheduler.cache import Cache, Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import FilterPlugin, ScorePlugin
from scheduler.plugins.imagelocality import ImageLocality
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.noderesources import BalancedAllocation, Fit
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.plugins.tainttoleration import TaintToleration
from tests.unit.scheduler.builders import SnapshotHandle, make_node, make_pod


def _cluster(rng: random.Random, n: int) -> tuple[Cache, Snapshot]:
    cache = Cache()
    effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    for i in range(n):
        taints = [core_pb2.Taint(key=rng.choice(["a", "b"]), value=rng.choice(["x", "y"]), effect=rng.choice(effects))
                  for _ in range(rng.choice([0, 0, 1, 2]))]
        node = make_node(f"n{i}", rng.choice(["0", "1", "2", "4", "3500m"]), rng.choice(["0", "1Gi", "4Gi", "10000"]),
                         rng.choice(["0", "2", "110"]), taints=taints)
        node.spec.unschedulable = rng.random() < 0.1
        if rng.random() < 0.3:
            node.status.images.add(names=["busybox:latest"], sizeBytes=rng.randrange(1, 2000) * 1024 * 1024)
        cache.add_node(node)
        for j in range(rng.choice([0, 1, 3])):
            pod = make_pod(f"e{i}-{j}", _requests(rng), node=f"n{i}")
            if rng.random() < 0.2:
                pod.spec.containers[0].ports.add(containerPort=80, hostPort=rng.choice([80, 8080]), protocol="TCP")
            cache.add_pod(pod)
    snap = Snapshot()
    cache.update_snapshot(snap)
    return cache, snap


def _requests(rng: random.Random) -> dict[str, str]:
    req = {}
    if rng.random() < 0.7:
        req["cpu"] = rng.choice(["100m", "500m", "1", "0"])
    if rng.random() < 0.7:
        req["memory"] = rng.choice(["64Mi", "1Gi", "0", "3000"])
    return req


def _pod(rng: random.Random) -> core_pb2.Pod:
    pod = make_pod("p", *([_requests(rng)] if rng.random() < 0.9 else []))
    if rng.random() < 0.3:
        pod.spec.tolerations.add(key="a", operator="Exists")
    if rng.random() < 0.1:
        pod.spec.tolerations.add(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
    if pod.spec.containers and rng.random() < 0.3:
        pod.spec.containers[0].ports.add(containerPort=80, hostPort=80, protocol="TCP")
    return pod



@pytest.mark.parametrize("seed", range(25))
def test_batch_filters_and_scores_match_per_node(seed: int) -> None:
    rng = random.Random(seed)
    _, snap = _cluster(rng, 60)
    nodes = snap.node_infos()
    rows = np.array(rng.sample(range(len(nodes)), len(nodes)), dtype=np.int64)  # any order
    handle = SnapshotHandle(snap)
    filters: list[FilterPlugin] = [Fit(), NodeUnschedulable(), TaintToleration(), NodePorts()]
    scorers: list[ScorePlugin] = [Fit(), Fit({"scoringStrategy": {"type": "MostAllocated"}}),
                                  Fit({"scoringStrategy": {"resources": [{"name": "memory", "weight": 3},
                                                                         {"name": "cpu", "weight": 1}]}}),
                                  BalancedAllocation(), TaintToleration(), ImageLocality(handle=handle)]  # type: ignore[arg-type]
    for _ in range(8):
        pod = _pod(rng)
        state = CycleState()
        for f in filters:
            if hasattr(f, "pre_filter"):
                _, s = f.pre_filter(state, pod, nodes)
                if s.is_skip:
                    continue
            batch = f.filter_batch(state, pod, snap.table, rows, nodes)
            assert batch is not None, f.name
            passed = [f.filter(state, pod, nodes[r]).ok for r in rows]
            assert batch.tolist() == passed, f.name
        for sc in scorers:
            if hasattr(sc, "pre_score") and sc.pre_score(state, pod, nodes).is_skip:
                continue
            batch = sc.score_batch(state, pod, snap.table, rows, nodes)
            assert batch is not None, sc.name
            one_by_one = [sc.score(state, pod, nodes[r])[0] for r in rows]
            assert batch.tolist() == one_by_one, sc.name
            nb = sc.normalize_batch(state, pod, batch)
            if nb is not None:
                from scheduler.framework.interface import NodeScore
                raw = [NodeScore(nodes[r].name, v) for r, v in zip(rows, one_by_one, strict=True)]
                ns, _ = sc.normalize_score(state, pod, raw)
                assert nb.tolist() == [x.score for x in ns], sc.name


async def test_scheduler_batch_and_per_node_paths_place_the_same_pods() -> None:
    """With nominations present the scheduler takes the per-node path; same cluster, same
    seed: the same placements, and the same recorded results (every filter verdict and
    score the batch path records equals the per-node path's)."""
    from tests.unit.scheduler.harness import drain, make_scheduler

    placements, recorded = [], []
    for force_per_node in (False, True):
        sched = make_scheduler({"profiles": [{"schedulerName": "default-scheduler", "recordResults": True}]},
                               rng=random.Random(3))
        rng = random.Random(11)
        for i in range(30):
            sched.on_node_add(make_node(f"n{i}", rng.choice(["2", "4", "8"]), rng.choice(["4Gi", "8Gi"]), "110"))
        for i in range(3):  # some rejections to record
            sched.on_node_add(make_node(f"t{i}", "8", "8Gi", "110",
                                        taints=[core_pb2.Taint(key="k", value="v", effect="NoSchedule")]))
        sched.on_node_add(make_node("full", "8", "8Gi", "0"))
        if force_per_node:
            ghost = make_pod("ghost", priority=-1)  # a nomination nobody competes with
            from scheduler.framework.types import PodInfo
            sched.queue.add_nominated(PodInfo.of(ghost), "n0")
        for i in range(60):
            sched.on_pod_add(make_pod(f"p{i}", {"cpu": rng.choice(["100m", "500m"]), "memory": "256Mi"}))
        await drain(sched)
        placements.append(dict(sched.bindings))  # type: ignore[attr-defined]
        recorded.append(dict(sched.recorded))  # type: ignore[attr-defined]
    assert placements[0] == placements[1] and len(placements[0]) == 60
    assert recorded[0] == recorded[1]
    some = json.loads(recorded[0]["p0"]["scheduler.kubeling.io/filter-result"])
    assert some["full"]["NodeResourcesFit"] == "Unschedulable: Too many pods"
    assert some["t0"]["TaintToleration"].startswith("UnschedulableAndUnresolvable")
    assert len(json.loads(recorded[0]["p0"]["scheduler.kubeling.io/score-result"])) == 30

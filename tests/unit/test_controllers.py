"""The workload controllers' arithmetic against upstream's: maxSurge/maxUnavailable
fenceposts, how far the new ReplicaSet may grow, stable template hashes, the scale-down
ranking, the work queue's one-key-at-a-time rule, expectations, PDB status."""

from __future__ import annotations

import asyncio

from controllers.deploymentutil import equal_ignore_hash, new_rs_replicas, resolve_fenceposts, template_hash
from controllers.disruption import budget_status
from controllers.expectations import Expectations
from controllers.replicaset import deletion_order
from kubeling.intstr import from_value, scaled_value
from kubeling.workqueue import WorkQueue
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2, policy_pb2


def _deployment(replicas: int, surge: int | str, unavailable: int | str) -> apps_pb2.Deployment:
    d = apps_pb2.Deployment()
    d.spec.replicas = replicas
    d.spec.strategy.type = "RollingUpdate"
    d.spec.strategy.rollingUpdate.maxSurge.CopyFrom(from_value(surge))
    d.spec.strategy.rollingUpdate.maxUnavailable.CopyFrom(from_value(unavailable))
    return d


def _rs(replicas: int) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet()
    rs.spec.replicas = replicas
    return rs


def test_fenceposts_as_upstream() -> None:
    assert resolve_fenceposts(_deployment(10, "25%", "25%")) == (3, 2)  # surge rounds up, unavailable down
    assert resolve_fenceposts(_deployment(1, "25%", "25%")) == (1, 0)
    assert resolve_fenceposts(_deployment(4, 0, 0)) == (0, 1)  # both 0 would never progress
    assert scaled_value(from_value("50%"), 3, round_up=True) == 2


def test_the_new_replicaset_grows_within_max_surge() -> None:
    d = _deployment(4, 1, 1)
    old, new = _rs(4), _rs(0)
    assert new_rs_replicas(d, [old, new], new) == 1  # 4 + 1 surge allowed in total
    old.spec.replicas = 3
    assert new_rs_replicas(d, [old, new], new) == 2
    new.spec.replicas = 4
    old.spec.replicas = 0
    assert new_rs_replicas(d, [old, new], new) == 4  # never past replicas


def test_template_hash_is_stable_and_ignores_its_own_label() -> None:
    t = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": "web"}),
                                 spec=core_pb2.PodSpec(containers=[core_pb2.Container(name="c", image="busybox")]))
    h = template_hash(t)
    labeled = core_pb2.PodTemplateSpec()
    labeled.CopyFrom(t)
    labeled.metadata.labels["pod-template-hash"] = h
    assert template_hash(labeled) == h and equal_ignore_hash(t, labeled)
    assert template_hash(t, 1) != h  # a collision count names another ReplicaSet
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")


def _pod(name: str, node: str = "", phase: str = "Running", ready: bool = True, created: int = 0) -> core_pb2.Pod:
    p = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PodSpec(nodeName=node))
    p.status.phase = phase
    p.metadata.creationTimestamp.seconds = created
    if ready:
        p.status.conditions.add(type="Ready", status="True")
    return p


def test_scale_down_deletes_the_least_valuable_first() -> None:
    pods = [_pod("running", "n1", created=1), _pod("unscheduled", "", "Pending", ready=False),
            _pod("pending", "n1", "Pending", ready=False), _pod("not-ready", "n2", ready=False),
            _pod("newer", "n2", created=5)]
    # (the last two tie on node crowding and readiness: the newer goes first)
    assert [p.metadata.name for p in deletion_order(pods)] == ["unscheduled", "pending", "not-ready", "newer",
                                                                "running"]


async def test_a_key_is_never_processed_twice_at_once() -> None:
    q = WorkQueue("test")
    q.add("a")
    q.add("a")
    assert len(q) == 1
    key = await q.get()
    q.add("a")  # changed while processed: queued again only when done
    assert len(q) == 0
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"
    q.add_rate_limited("b")
    await asyncio.wait_for(q.get(), 1)


def test_expectations() -> None:
    e = Expectations()
    e.expect_creations("rs", 2)
    assert not e.satisfied("rs")
    e.creation_observed("rs")
    e.creation_observed("rs")
    assert e.satisfied("rs")
    e.expect_deletions("rs", ["ns/a"])
    e.deletion_observed("rs", "ns/a")
    e.deletion_observed("rs", "ns/a")  # seen twice (marked, then gone): counted once
    assert e.satisfied("rs")


def test_budget_status() -> None:
    pdb = policy_pb2.PodDisruptionBudget(spec=policy_pb2.PodDisruptionBudgetSpec(minAvailable=from_value(2)))
    pods = [_pod("a"), _pod("b"), _pod("c", ready=False)]
    status = budget_status(pdb, pods, None)
    assert status is not None
    counts = (status.expectedPods, status.currentHealthy, status.desiredHealthy, status.disruptionsAllowed)
    assert counts == (3, 2, 2, 0)
    pdb = policy_pb2.PodDisruptionBudget(spec=policy_pb2.PodDisruptionBudgetSpec(maxUnavailable=from_value("50%")))
    status = budget_status(pdb, pods, 4)
    assert status is not None and (status.desiredHealthy, status.disruptionsAllowed) == (2, 0)
    assert budget_status(pdb, pods, None) is None  # a percentage of pods without a known controller

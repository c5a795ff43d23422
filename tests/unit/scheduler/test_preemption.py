"""DefaultPreemption: victims chosen as upstream chooses them, the pod nominated, then placed."""

from __future__ import annotations

from protos.kubeling.v1 import meta_pb2, policy_pb2
from scheduler.framework.types import PodInfo
from scheduler.plugins.defaultpreemption import split_by_pdb_violation
from tests.unit.scheduler.builders import FailureLog, make_node, make_pod
from tests.unit.scheduler.harness import drain, make_scheduler


def _bound(name: str, node: str, cpu: str, priority: int, started: int = 0):
    pod = make_pod(name, {"cpu": cpu}, node=node, priority=priority)
    pod.status.startTime.seconds = 1_700_000_000 + started
    return pod


async def test_preempts_the_fewest_least_important_pods_and_then_schedules() -> None:
    log = FailureLog()
    sched = make_scheduler(recorder=log)
    sched.queue.initial_backoff = sched.queue.max_backoff = 0.0
    sched.on_node_add(make_node("n1", "4", "8Gi", "110"))
    sched.on_node_add(make_node("n2", "4", "8Gi", "110"))
    for p in (_bound("a", "n1", "1", 1), _bound("b", "n1", "1", 2), _bound("c", "n1", "2", 3),
              _bound("d", "n2", "4", 5)):
        sched.on_pod_add(p)
    sched.on_pod_add(make_pod("urgent", {"cpu": "2"}, priority=10))
    await drain(sched)
    # n1: remove a, b, c; put back c (fits), b and a do not -> victims a, b (highest 2)
    # n2: victim d (highest 5) -> n1 wins
    assert sorted(sched.evicted) == ["a", "b"]  # type: ignore[attr-defined]
    assert [n for _, _, n in log.failures] == ["n1"]
    await drain(sched)  # the victims' deletion moved the pod back
    assert sched.bindings == {"urgent": "n1"}  # type: ignore[attr-defined]
    assert {pi.pod.metadata.name for pi in sched.cache.nodes["n1"].pods} == {"c", "urgent"}


async def test_no_preemption_for_never_policy_or_unresolvable_nodes() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "2", "8Gi", "110"))
    sched.on_pod_add(_bound("low", "n1", "2", 1))
    polite = make_pod("polite", {"cpu": "1"}, priority=100)
    polite.spec.preemptionPolicy = "Never"
    sched.on_pod_add(polite)
    await drain(sched)
    assert sched.evicted == [] and sched.bindings == {}  # type: ignore[attr-defined]
    # A pod that fails on an unresolvable reason (node name) cannot be helped by preemption.
    named = make_pod("named", {"cpu": "1"}, priority=100)
    named.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.add(
        matchFields=[{"key": "metadata.name", "operator": "In", "values": ["elsewhere"]}])
    sched.on_pod_add(named)
    await drain(sched)
    assert sched.evicted == []  # type: ignore[attr-defined]


async def test_equal_or_higher_priority_pods_are_never_victims() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "2", "8Gi", "110"))
    sched.on_pod_add(_bound("peer", "n1", "2", 10))
    sched.on_pod_add(make_pod("p", {"cpu": "1"}, priority=10))
    await drain(sched)
    assert sched.evicted == [] and sched.bindings == {}  # type: ignore[attr-defined]
    assert "default/p" in sched.queue.unschedulable


def test_nominated_pods_are_counted_by_lower_priority_pods() -> None:
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "2", "8Gi", "110"))
    big = make_pod("big", {"cpu": "2"}, priority=10)
    sched.queue.add_nominated(PodInfo.of(big), "n1")
    assert [pi.pod.metadata.name for pi in sched.nominated_for_node("n1")] == ["big"]


async def test_victims_whose_eviction_violates_no_pdb_are_preferred() -> None:
    """Upstream's rule: the node whose victims violate the fewest PodDisruptionBudgets wins,
    before priorities are compared; and on one node, a protected pod is reprieved first."""
    sched = make_scheduler()
    sched.on_node_add(make_node("n1", "2", "8Gi", "110"))
    sched.on_node_add(make_node("n2", "2", "8Gi", "110"))
    guarded = _bound("guarded", "n1", "2", 1)  # the lower priority: chosen without the budget
    guarded.metadata.labels["app"] = "db"
    sched.on_pod_add(guarded)
    sched.on_pod_add(_bound("free", "n2", "2", 5))
    budget = policy_pb2.PodDisruptionBudget(
        metadata=meta_pb2.ObjectMeta(name="db", namespace="default"),
        spec=policy_pb2.PodDisruptionBudgetSpec(selector=meta_pb2.LabelSelector(matchLabels={"app": "db"})),
        status=policy_pb2.PodDisruptionBudgetStatus(disruptionsAllowed=0))
    sched.pdb_lister = lambda: [budget]
    sched.on_pod_add(make_pod("urgent", {"cpu": "2"}, priority=10))
    await drain(sched)
    assert sched.evicted == ["free"]  # type: ignore[attr-defined]

    budget.status.disruptionsAllowed = 1  # the budget allows one: priorities decide again
    violating, fine = split_by_pdb_violation([PodInfo.of(guarded), PodInfo.of(guarded)], [budget])
    assert ([v.pod.metadata.name for v in violating], len(fine)) == (["guarded"], 1)

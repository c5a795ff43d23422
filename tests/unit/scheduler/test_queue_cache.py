"""Queue: backoff timing, moves on events, flush. Cache: assume, confirm, forget, expire, snapshots."""

from __future__ import annotations

import asyncio
import random

from scheduler.cache import Cache, Snapshot
from scheduler.framework.interface import Action, ClusterEvent, Resource
from scheduler.framework.types import PodInfo
from scheduler.plugins.queuesort import PrioritySort
from scheduler.queue import SchedulingQueue
from tests.unit.scheduler.builders import make_node, make_pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _queue(clock: Clock, **kw: object) -> SchedulingQueue:
    events = {"NodeResourcesFit": [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.POD, Action.DELETE)],
              "NodeAffinity": [ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)]}
    return SchedulingQueue(PrioritySort().less, plugin_events=events, clock=clock, **kw)  # type: ignore[arg-type]


async def test_pop_order_priority_then_time() -> None:
    clock = Clock()
    q = _queue(clock)
    q.add(make_pod("old-low", priority=1))
    clock.now += 1
    q.add(make_pod("high", priority=5))
    clock.now += 1
    q.add(make_pod("new-low", priority=1))
    names = [(await q.pop()).pod.metadata.name for _ in range(3)]
    assert names == ["high", "old-low", "new-low"]


async def test_a_sort_key_gives_the_order_less_gives() -> None:
    """With PrioritySort's key the queue compares tuples instead of calling less: the same
    pods come out in the same order, through adds with tied times, updates and deletes."""
    rng = random.Random(7)
    clock = Clock()
    plain, keyed = _queue(clock), _queue(clock, sort_key=PrioritySort().sort_key)
    live: list[str] = []
    for step in range(400):
        roll = rng.random()
        if roll < 0.6 or not live:
            name = f"p{step}"
            pod = make_pod(name, priority=rng.choice([0, 1, 5]))
            for q in (plain, keyed):
                q.add(pod)
            live.append(name)
        elif roll < 0.8:
            changed = make_pod(rng.choice(live), priority=rng.choice([0, 1, 5]))
            for q in (plain, keyed):
                q.update(changed, changed)
        else:
            gone = make_pod(live.pop(rng.randrange(len(live))))
            for q in (plain, keyed):
                q.delete(gone)
        if rng.random() < 0.5:
            clock.now += 1  # else the next pod ties on time: push order decides
    order = [[(await q.pop()).pod.metadata.name for _ in live] for q in (plain, keyed)]
    assert order[0] == order[1] and sorted(order[0]) == sorted(live)


async def test_backoff_doubles_and_caps() -> None:
    clock = Clock()
    q = _queue(clock, initial_backoff=1.0, max_backoff=10.0)
    q.add(make_pod("p"))
    expected = [1, 2, 4, 8, 10, 10]
    for want in expected:
        qpi = await q.pop()
        assert qpi is not None
        assert q.backoff_duration(qpi) == want
        q.add_unschedulable(qpi, q.scheduling_cycle, error=True)  # errors go to backoffQ
        assert "default/p" in q.backoff.items
        clock.now += want - 0.01
        q.flush_backoff_completed()
        assert "default/p" in q.backoff.items  # not yet
        clock.now += 0.02
        q.flush_backoff_completed()
        assert "default/p" in q.active.items
    assert qpi.attempts == len(expected)


async def test_unschedulable_moves_only_on_events_its_plugins_registered() -> None:
    clock = Clock()
    q = _queue(clock, initial_backoff=1.0, max_backoff=1.0)
    q.add(make_pod("p"))
    qpi = await q.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    assert "default/p" in q.unschedulable
    assert q.move_all_on_event(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)) == 0
    assert "default/p" in q.unschedulable
    clock.now += 5  # past its backoff: straight to activeQ
    assert q.move_all_on_event(ClusterEvent(Resource.NODE, Action.ADD)) == 1
    assert "default/p" in q.active.items


async def test_a_move_request_during_the_cycle_sends_the_pod_to_backoff() -> None:
    clock = Clock()
    q = _queue(clock)
    q.add(make_pod("p"))
    qpi = await q.pop()
    assert qpi is not None
    cycle = q.scheduling_cycle
    q.move_all_on_event(ClusterEvent(Resource.NODE, Action.ADD))  # while it was being scheduled
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(qpi, cycle)
    assert "default/p" in q.backoff.items  # it may fit now: retry after backoff, do not park it


async def test_leftover_unschedulable_pods_are_flushed() -> None:
    clock = Clock()
    q = _queue(clock, max_unschedulable=300.0)
    q.add(make_pod("p"))
    qpi = await q.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeAffinity"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    clock.now += 299
    q.flush_unschedulable_leftover()
    assert "default/p" in q.unschedulable
    clock.now += 2
    q.flush_unschedulable_leftover()
    assert "default/p" in q.active.items


async def test_pop_waits_for_a_pod() -> None:
    q = _queue(Clock())
    task = asyncio.create_task(q.pop())
    await asyncio.sleep(0.05)
    assert not task.done()
    q.add(make_pod("late"))
    assert (await asyncio.wait_for(task, 1)).pod.metadata.name == "late"


def test_cache_assume_confirm_forget_expire() -> None:
    clock = Clock()
    cache = Cache(ttl=30.0, clock=clock)
    cache.add_node(make_node("n", "4", "4Gi", "110"))
    pod = make_pod("a", {"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n")
    assert cache.is_assumed(pod.metadata.uid) and cache.nodes["n"].requested.milli_cpu == 1000
    cache.forget_pod(pod.metadata.uid)
    assert not cache.is_assumed(pod.metadata.uid) and cache.nodes["n"].requested.milli_cpu == 0
    # assumed, binding finished, then confirmed by the informer
    cache.assume_pod(PodInfo.of(pod), "n")
    cache.finish_binding(pod.metadata.uid)
    bound = make_pod("a", {"cpu": "1"}, node="n")
    bound.metadata.uid = pod.metadata.uid
    cache.add_pod(bound)
    assert not cache.is_assumed(pod.metadata.uid) and cache.nodes["n"].requested.milli_cpu == 1000
    clock.now += 100
    assert cache.cleanup_expired() == []  # confirmed pods never expire
    # an assumption never confirmed expires ttl after its binding finished
    other = make_pod("b", {"cpu": "1"})
    cache.assume_pod(PodInfo.of(other), "n")
    cache.finish_binding(other.metadata.uid)
    clock.now += 29
    assert cache.cleanup_expired() == []
    clock.now += 2
    assert cache.cleanup_expired() == [other.metadata.uid]
    assert cache.nodes["n"].requested.milli_cpu == 1000


def test_snapshot_is_incremental() -> None:
    cache = Cache()
    for i in range(3):
        cache.add_node(make_node(f"n{i}", "4", "4Gi", "110"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos()] == ["n0", "n1", "n2"]
    before = {name: id(info) for name, info in snap.infos.items()}
    cache.add_pod(make_pod("p", {"cpu": "1"}, node="n1"))
    cache.update_snapshot(snap)
    after = {name: id(info) for name, info in snap.infos.items()}
    assert after["n0"] == before["n0"] and after["n2"] == before["n2"]  # untouched: not copied again
    assert after["n1"] != before["n1"] and snap.get("n1").requested.milli_cpu == 1000
    cache.remove_node(make_node("n0"))
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos()] == ["n1", "n2"]


def test_image_spread_counts_across_nodes() -> None:
    cache = Cache()
    for i in range(2):
        n = make_node(f"n{i}", "4", "4Gi", "110")
        n.status.images.add(names=["busybox:1.35"], sizeBytes=5_000_000)
        cache.add_node(n)
    assert cache.nodes["n0"].image_states["busybox:1.35"].num_nodes == 2
    cache.remove_node(make_node("n1"))
    assert cache.nodes["n0"].image_states["busybox:1.35"].num_nodes == 1

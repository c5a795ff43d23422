"""The eviction manager's judgement: thresholds parsed as upstream's flags, hard and soft
thresholds met, the pressure conditions' transition period, which pod goes and why."""

from __future__ import annotations

import pytest

from kubelet.eviction import EvictionManager, Observation, PodUsage, parse_grace_periods, parse_thresholds
from protos.kubeling.v1 import core_pb2, meta_pb2

MI = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pod(name: str, request: str = "", priority: int = 0) -> core_pb2.Pod:
    c = core_pb2.Container(name="c", image="busybox")
    if request:
        c.resources.requests["memory"] = request
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default", uid=name),
                        spec=core_pb2.PodSpec(containers=[c], priority=priority))


def test_thresholds_as_upstream_writes_them() -> None:
    hard = parse_thresholds({"memory.available": "100Mi", "nodefs.available": "10%"})
    assert hard[0].value(8 * 1024 * MI) == 100 * MI and hard[1].value(1000) == 100
    soft = parse_thresholds({"memory.available": "1Gi"}, parse_grace_periods({"memory.available": "1m30s"}))
    assert soft[0].grace_period == 90
    for bad in ({"memory.free": "1Mi"}, {"memory.available": "lots"}, {"nodefs.available": "120%"}):
        with pytest.raises(ValueError):
            parse_thresholds(bad)
    with pytest.raises(ValueError, match="no grace period"):
        parse_thresholds({"memory.available": "1Gi"}, {})


def test_hard_at_once_soft_after_its_grace_and_pressure_stays_for_the_transition_period() -> None:
    clock = Clock()
    manager = EvictionManager(parse_thresholds({"memory.available": "100Mi"}),
                              parse_thresholds({"nodefs.available": "20%"}, {"nodefs.available": 30.0}),
                              pressure_transition_period=60, clock=clock)
    low = {"memory.available": Observation(50 * MI, 1024 * MI), "nodefs.available": Observation(10, 100)}
    met = manager.judge(low)
    assert [t.signal for t, _ in met] == ["memory.available"]  # the soft one only starts its grace period
    assert manager.pressure() == {"MemoryPressure"}
    clock.now = 31
    assert {t.signal for t, _ in manager.judge(low)} == {"memory.available", "nodefs.available"}
    assert manager.pressure() == {"MemoryPressure", "DiskPressure"}
    fine = {"memory.available": Observation(500 * MI, 1024 * MI), "nodefs.available": Observation(50, 100)}
    clock.now = 60
    assert manager.judge(fine) == [] and manager.pressure() == {"MemoryPressure", "DiskPressure"}
    clock.now = 92
    assert manager.pressure() == set()


def test_the_pod_over_its_request_goes_first_with_upstreams_message() -> None:
    manager = EvictionManager(parse_thresholds({"memory.available": "100Mi"}))
    met = manager.judge({"memory.available": Observation(50 * MI, 1024 * MI)})
    within, hog, important = _pod("within", "200Mi"), _pod("hog"), _pod("important", priority=2000000000)
    usage = {"within": PodUsage(150 * MI, {"c": 150 * MI}), "hog": PodUsage(600 * MI, {"c": 600 * MI}),
             "important": PodUsage(900 * MI, {"c": 900 * MI})}
    chosen = manager.choose(met, [within, hog, important], usage)
    assert chosen is not None and chosen.pod.metadata.name == "hog" and chosen.grace == 0
    assert chosen.message == ("The node was low on resource: memory. Threshold quantity: 102400Ki, available: "
                              "51200Ki. Container c was using 614400Ki, request is 0, has larger consumption of "
                              "memory. ")
    # within their requests: the lower priority first
    low, high = _pod("low", "1Gi", priority=1), _pod("high", "1Gi", priority=10)
    chosen = manager.choose(met, [high, low], {"low": PodUsage(MI), "high": PodUsage(MI)})
    assert chosen is not None and chosen.pod.metadata.name == "low"
    assert manager.choose(met, [important], usage) is None  # critical pods are never evicted


def test_memory_is_reclaimed_first_and_disk_names_ephemeral_storage() -> None:
    manager = EvictionManager(parse_thresholds({"memory.available": "100Mi", "nodefs.available": "10%"}))
    both = manager.judge({"memory.available": Observation(50 * MI, 1024 * MI),
                          "nodefs.available": Observation(5, 100)})
    assert manager.resource_short(both) == "memory"
    disk = [m for m in both if m[0].signal == "nodefs.available"]
    assert manager.resource_short(disk) == "ephemeral-storage"
    chosen = manager.choose(disk, [_pod("writer"), _pod("quiet")], {"writer": PodUsage(10 * MI),
                                                                    "quiet": PodUsage(MI)})
    assert chosen is not None and chosen.pod.metadata.name == "writer"
    assert chosen.message.startswith("The node was low on resource: ephemeral-storage. Threshold quantity: 10%")


def test_allocatable_is_capacity_less_reserved_and_the_hard_memory_threshold() -> None:
    from kubelet.node import allocatable
    manager = EvictionManager(parse_thresholds({"memory.available": "100Mi"}))
    capacity = {"cpu": "2", "memory": "8388608Ki", "pods": "110"}
    assert allocatable(capacity, {}, manager.hard_memory) == {"cpu": "2", "memory": "8286208Ki", "pods": "110"}
    reserved = {"cpu": "300m", "memory": "200Mi"}
    assert allocatable(capacity, reserved, manager.hard_memory) == {"cpu": "1700m", "memory": "8081408Ki",
                                                                    "pods": "110"}

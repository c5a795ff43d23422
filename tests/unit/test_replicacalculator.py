"""The HorizontalPodAutoscaler's arithmetic (controllers/replicacalculator.py) against
upstream's replica_calculator and behavior rules: the tolerance, ready/unready/missing
pods, value targets, stabilization windows and rate policies."""

from __future__ import annotations

import pytest

from controllers.replicacalculator import MetricError, Scaler, Usage, default_rules, resource_replicas
from protos.kubeling.v1 import autoscaling_pb2, core_pb2, meta_pb2

NOW = 10_000.0


def pod(name: str, cpu: str = "100m", *, ready: bool = True, phase: str = "Running", started: float = NOW - 3600,
        deleting: bool = False) -> core_pb2.Pod:
    p = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PodSpec(containers=[
        core_pb2.Container(name="main", resources=core_pb2.ResourceRequirements(requests={"cpu": cpu}))]))
    p.status.phase = phase
    p.status.startTime.FromSeconds(int(started))
    cond = p.status.conditions.add(type="Ready", status="True" if ready else "False")
    cond.lastTransitionTime.FromSeconds(int(started + 5))
    if deleting:
        p.metadata.deletionTimestamp.FromSeconds(int(NOW))
    return p


def usage(**millicores: int) -> dict[str, Usage]:
    return {name: Usage(value, NOW - 10, 30) for name, value in millicores.items()}


def utilization(percent: int) -> autoscaling_pb2.MetricTarget:
    return autoscaling_pb2.MetricTarget(type="Utilization", averageUtilization=percent)


def test_scale_up_in_proportion_to_usage() -> None:
    pods = [pod("a"), pod("b")]
    # 200% of the request each against a 50% target: 4x the pods
    assert resource_replicas(2, pods, usage(a=200, b=200), utilization(50), "cpu", now=NOW) == (8, 200, 200)


def test_within_tolerance_nothing_changes() -> None:
    pods = [pod("a"), pod("b")]
    replicas, shown, _ = resource_replicas(2, pods, usage(a=52, b=54), utilization(50), "cpu", now=NOW)
    assert (replicas, shown) == (2, 53)


def test_a_tolerance_per_direction() -> None:
    pods = [pod("a"), pod("b")]
    # 60% against a 50% target: 1.2, outside the default band, inside a 0.25 scale-up band
    assert resource_replicas(2, pods, usage(a=60, b=60), utilization(50), "cpu", now=NOW)[0] == 3
    assert resource_replicas(2, pods, usage(a=60, b=60), utilization(50), "cpu", now=NOW,
                             tolerance=(0.1, 0.25))[0] == 2


def test_missing_metrics_count_against_the_direction() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    # a and b idle, c unmeasured: scaling down assumes c uses its whole request
    replicas, _, _ = resource_replicas(3, pods, usage(a=0, b=0), utilization(50), "cpu", now=NOW)
    assert replicas == 2  # (0 + 0 + 100) / 300 = 33% of 50% target → ceil(0.67 * 3)
    # a and b busy, c unmeasured: scaling up assumes c uses nothing
    replicas, _, _ = resource_replicas(3, pods, usage(a=100, b=100), utilization(50), "cpu", now=NOW)
    assert replicas == 4  # (100 + 100 + 0) / 300 = 67% / 50% → ceil(1.33 * 3)


def test_unready_and_ignored_pods() -> None:
    pods = [pod("a"), pod("starting", phase="Pending"), pod("gone", deleting=True), pod("broken", phase="Failed")]
    replicas, _, _ = resource_replicas(4, pods, usage(a=100, gone=900, broken=900), utilization(50), "cpu", now=NOW)
    # a runs at twice the target, but the pod still starting counts as using nothing when
    # scaling up: 50% overall, the target; the deleted and the failed pod are not counted
    assert replicas == 4


def test_errors_in_upstreams_words() -> None:
    with pytest.raises(MetricError, match="no pods returned by selector while calculating replica count"):
        resource_replicas(1, [], {}, utilization(50), "cpu", now=NOW)
    no_request = pod("a")
    no_request.spec.containers[0].resources.requests.clear()
    with pytest.raises(MetricError, match="missing request for cpu in container main of Pod a"):
        resource_replicas(1, [no_request], usage(a=10), utilization(50), "cpu", now=NOW)
    with pytest.raises(MetricError, match="did not receive metrics for targeted pods"):
        resource_replicas(1, [pod("a", phase="Pending")], usage(a=10), utilization(50), "cpu", now=NOW)


def test_average_value_target() -> None:
    target = autoscaling_pb2.MetricTarget(type="AverageValue", averageValue="100m")
    assert resource_replicas(2, [pod("a"), pod("b")], usage(a=300, b=300), target, "cpu", now=NOW) == (6, None, 300)


def test_scale_down_waits_for_the_stabilization_window() -> None:
    scaler = Scaler()
    up, down = default_rules(True), default_rules(False)
    assert scaler.stabilize(current=6, desired=6, up=up, down=down, now=NOW) == 6
    # the load dropped: the highest recommendation of the last 300 s still holds
    assert scaler.stabilize(current=6, desired=2, up=up, down=down, now=NOW + 60) == 6
    assert scaler.stabilize(current=6, desired=2, up=up, down=down, now=NOW + 301) == 2


def test_rate_policies_and_limits() -> None:
    scaler = Scaler()
    up, down = default_rules(True), default_rules(False)
    # up: the larger of +100% and +4 pods per 15 s
    assert scaler.limit(2, 20, 1, 30, up, down, NOW)[0] == 6
    replicas, limited = scaler.limit(10, 40, 1, 30, up, down, NOW)
    assert (replicas, limited.reason) == (20, "ScaleUpLimit")
    replicas, limited = scaler.limit(10, 40, 1, 15, up, down, NOW)
    assert (replicas, limited.reason, limited.message) == (
        15, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    scaler.record(4, NOW, 15)  # scaled 2 → 6 just now: within the period the base is 2
    assert scaler.limit(6, 40, 1, 30, up, down, NOW + 5)[0] == 6
    assert scaler.limit(6, 40, 1, 30, up, down, NOW + 16)[0] == 12
    replicas, limited = scaler.limit(5, 0, 2, 30, up, down, NOW)
    assert (replicas, limited.reason) == (2, "TooFewReplicas")
    slow = autoscaling_pb2.HPAScalingRules(selectPolicy="Max", policies=[
        autoscaling_pb2.HPAScalingPolicy(type="Pods", value=1, periodSeconds=60)])
    replicas, limited = scaler.limit(5, 1, 1, 30, up, slow, NOW)
    assert (replicas, limited.reason) == (4, "ScaleDownLimit")
    assert scaler.limit(5, 5, 1, 30, up, down, NOW)[1].reason == "DesiredWithinRange"
    disabled = autoscaling_pb2.HPAScalingRules(selectPolicy="Disabled")
    assert scaler.limit(5, 9, 1, 30, disabled, down, NOW)[0] == 5

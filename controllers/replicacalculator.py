"""How many replicas a HorizontalPodAutoscaler's metrics call for, and how fast it may get
there, as upstream's pkg/controller/podautoscaler (replica_calculator.go and the
behavior normalization of horizontal.go). Pure arithmetic on pods and their metrics,
apart from the controller."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import autoscaling_pb2, core_pb2

__all__ = ["MetricError", "Usage", "group_pods", "resource_replicas", "Scaler", "ScaleEvent", "Limited",
           "TOLERANCE", "CPU_INITIALIZATION_PERIOD", "INITIAL_READINESS_DELAY", "default_rules", "millis"]

TOLERANCE = 0.1  # upstream's --horizontal-pod-autoscaler-tolerance
CPU_INITIALIZATION_PERIOD = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period
INITIAL_READINESS_DELAY = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay


class MetricError(Exception):
    """A metric that cannot be computed; its message goes into the HPA's condition."""


@dataclass(frozen=True)
class Usage:
    """One pod's usage of a resource (milli-units) and when it was measured."""

    value: int
    timestamp: float
    window: float


def millis(text: str) -> int:
    try:
        return parse_quantity(text).milli_value()
    except QuantityError:
        raise MetricError(f"invalid quantity {text!r}") from None


def _ready_condition(pod: core_pb2.Pod) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == "Ready"), None)


def group_pods(pods: Sequence[core_pb2.Pod], metrics: Mapping[str, Usage], resource: str,
               now: float) -> tuple[int, set[str], set[str], set[str]]:
    """upstream's groupPods: (ready pods with metrics, unready, missing metrics, ignored)."""
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        name = pod.metadata.name
        if pod.metadata.HasField("deletionTimestamp") or pod.status.phase == "Failed":
            ignored.add(name)
            continue
        if pod.status.phase == "Pending":
            unready.add(name)
            continue
        usage = metrics.get(name)
        if usage is None:
            missing.add(name)
            continue
        if resource == "cpu":
            cond = _ready_condition(pod)
            start = pod.status.startTime.seconds if pod.status.HasField("startTime") else None
            if cond is None or start is None:
                not_ready = True
            elif start + CPU_INITIALIZATION_PERIOD > now:
                # starting up: a sample from before it was ready for a whole window does not count
                not_ready = cond.status == "False" or usage.timestamp < cond.lastTransitionTime.seconds + usage.window
            else:
                # never ready since it started: not counted
                not_ready = cond.status == "False" and start + INITIAL_READINESS_DELAY > cond.lastTransitionTime.seconds
            if not_ready:
                unready.add(name)
                continue
        ready += 1
    return ready, unready, missing, ignored


def _requests(pods: Sequence[core_pb2.Pod], resource: str, container: str) -> dict[str, int]:
    """upstream's calculatePodRequests (milli-units per pod)."""
    out = {}
    for pod in pods:
        total = 0
        for c in pod.spec.containers:
            if container and c.name != container:
                continue
            request = c.resources.requests.get(resource)
            if request is None:
                raise MetricError(f"missing request for {resource} in container {c.name} of Pod {pod.metadata.name}")
            total += millis(request)
        out[pod.metadata.name] = total
    return out


def _ratio(metrics: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """upstream's GetResourceUtilizationRatio: (usage/target, utilization %, average usage)."""
    used = requested = count = 0
    for name, value in metrics.items():
        if name in requests:
            used += value
            requested += requests[name]
            count += 1
    if requested == 0:
        raise MetricError("no metrics returned matched known pods")
    utilization = int(used * 100 / requested)
    return utilization / target, utilization, used // count


def _within(ratio: float, tolerance: tuple[float, float]) -> bool:
    down, up = tolerance
    return 1.0 - down <= ratio <= 1.0 + up


def resource_replicas(current: int, pods: Sequence[core_pb2.Pod], metrics: Mapping[str, Usage],
                      target: autoscaling_pb2.MetricTarget, resource: str, container: str = "",
                      now: float | None = None, tolerance: tuple[float, float] = (TOLERANCE, TOLERANCE),
                      ) -> tuple[int, int | None, int]:
    """(replicas proposed, utilization % or None for a value target, average usage in
    milli-units) for a Resource or ContainerResource metric (upstream's GetResourceReplicas
    and GetRawResourceReplicas). `tolerance`: (down, up), the ratio's band around 1 that
    changes nothing (the behavior's scaleDown and scaleUp tolerance, else 0.1 each)."""
    now = time.time() if now is None else now
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    ready, unready, missing, ignored = group_pods(pods, metrics, resource, now)
    usage = {n: u.value for n, u in metrics.items() if n not in unready and n not in ignored
             and n in {p.metadata.name for p in pods}}
    if not usage:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    if target.type == "Utilization":
        requests = _requests(pods, resource, container)
        goal = target.averageUtilization

        def compute(values: Mapping[str, int]) -> tuple[float, int, int]:
            return _ratio(values, requests, goal)
    else:
        average = millis(target.averageValue)
        requests = {}

        def compute(values: Mapping[str, int]) -> tuple[float, int, int]:
            mean = sum(values.values()) // len(values)
            return sum(values.values()) / len(values) / average, 0, mean
    ratio, utilization, raw = compute(usage)
    shown = utilization if target.type == "Utilization" else None
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if _within(ratio, tolerance):
            return current, shown, raw
        return math.ceil(ratio * ready), shown, raw
    # Missing metrics: assume the most conservative usage (100% of the request when scaling
    # down, none when scaling up); unready pods count as using nothing when scaling up.
    filled = dict(usage)
    for name in missing:
        filled[name] = (requests.get(name, 0) if target.type == "Utilization" else millis(target.averageValue)) \
            if ratio < 1.0 else 0
    if scale_up_with_unready:
        for name in unready:
            filled[name] = 0
    new_ratio, _, _ = compute(filled)
    if _within(new_ratio, tolerance) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, shown, raw
    proposed = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and proposed > current) or (new_ratio > 1.0 and proposed < current):
        return current, shown, raw
    return proposed, shown, raw


# ---------------------------------------------------------------- behavior

def default_rules(up: bool) -> autoscaling_pb2.HPAScalingRules:
    """upstream's defaults: up at once by 100% or 4 pods a 15 s (the larger); down by 100%
    a 15 s after a 300 s stabilization window."""
    rules = autoscaling_pb2.HPAScalingRules(selectPolicy="Max", stabilizationWindowSeconds=0 if up else 300)
    rules.policies.add(type="Percent", value=100, periodSeconds=15)
    if up:
        rules.policies.add(type="Pods", value=4, periodSeconds=15)
    return rules


@dataclass(frozen=True)
class ScaleEvent:
    change: int
    at: float


@dataclass(frozen=True)
class Limited:
    """The ScalingLimited condition: (status, reason, message)."""

    status: str
    reason: str
    message: str


@dataclass
class Scaler:
    """One HPA's memory between syncs: recent recommendations (the stabilization windows)
    and recent scale events (the rate policies)."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)

    def stabilize(self, current: int, desired: int, up: autoscaling_pb2.HPAScalingRules,
                  down: autoscaling_pb2.HPAScalingRules, now: float) -> int:
        """upstream's stabilizeRecommendationWithBehaviors."""
        up_cutoff, down_cutoff = now - up.stabilizationWindowSeconds, now - down.stabilizationWindowSeconds
        up_rec = down_rec = desired
        for at, replicas in self.recommendations:
            if at > up_cutoff:
                up_rec = min(up_rec, replicas)
            if at > down_cutoff:
                down_rec = max(down_rec, replicas)
        keep = max(up.stabilizationWindowSeconds, down.stabilizationWindowSeconds)
        self.recommendations = [(at, r) for at, r in self.recommendations if at > now - keep]
        self.recommendations.append((now, desired))
        recommendation = current
        if recommendation < up_rec:
            recommendation = up_rec
        if recommendation > down_rec:
            recommendation = down_rec
        return recommendation

    @staticmethod
    def _changed(events: Sequence[ScaleEvent], period: int, now: float) -> int:
        return sum(e.change for e in events if e.at > now - period)

    def _up_limit(self, current: int, rules: autoscaling_pb2.HPAScalingRules, now: float) -> int:
        if rules.selectPolicy == "Disabled":
            return current
        pick = min if rules.selectPolicy == "Min" else max
        result: int | None = None
        for policy in rules.policies:
            start = current - self._changed(self.up_events, policy.periodSeconds, now)
            proposed = start + policy.value if policy.type == "Pods" else \
                math.ceil(start * (1 + policy.value / 100))
            result = proposed if result is None else pick(result, proposed)
        return current if result is None else result

    def _down_limit(self, current: int, rules: autoscaling_pb2.HPAScalingRules, now: float) -> int:
        if rules.selectPolicy == "Disabled":
            return current
        # Max picks the policy that allows the larger change: the fewer replicas
        pick = max if rules.selectPolicy == "Min" else min
        result: int | None = None
        for policy in rules.policies:
            start = current + self._changed(self.down_events, policy.periodSeconds, now)
            proposed = start - policy.value if policy.type == "Pods" else int(start * (1 - policy.value / 100))
            result = proposed if result is None else pick(result, proposed)
        return current if result is None else result

    def limit(self, current: int, desired: int, low: int, high: int, up: autoscaling_pb2.HPAScalingRules,
              down: autoscaling_pb2.HPAScalingRules, now: float) -> tuple[int, Limited]:
        """upstream's convertDesiredReplicasWithBehaviorRate: the rate policies, then
        minReplicas and maxReplicas."""
        within = Limited("False", "DesiredWithinRange", "the desired count is within the acceptable range")
        if desired > current:
            rate = max(self._up_limit(current, up, now), current)
            if high < rate:
                cap, reason = high, Limited("True", "TooManyReplicas",
                                            "the desired replica count is more than the maximum replica count")
            else:
                cap, reason = rate, Limited("True", "ScaleUpLimit",
                                            "the desired replica count is increasing faster than the maximum scale "
                                            "rate")
            return (cap, reason) if desired > cap else (desired, within)
        if desired < current:
            rate = min(self._down_limit(current, down, now), current)
            if low > rate:
                floor, reason = low, Limited("True", "TooFewReplicas",
                                             "the desired replica count is less than the minimum replica count")
            else:
                floor, reason = rate, Limited("True", "ScaleDownLimit",
                                              "the desired replica count is decreasing faster than the maximum scale "
                                              "rate")
            return (floor, reason) if desired < floor else (desired, within)
        if desired > high:
            return high, Limited("True", "TooManyReplicas",
                                 "the desired replica count is more than the maximum replica count")
        if desired < low:
            return low, Limited("True", "TooFewReplicas", "the desired replica count is less than the minimum replica "
                                                          "count")
        return desired, within

    def record(self, change: int, now: float, keep: float) -> None:
        """A rescale, for the rate policies' periods (kept `keep` seconds)."""
        self.up_events = [e for e in self.up_events if e.at > now - keep]
        self.down_events = [e for e in self.down_events if e.at > now - keep]
        if change > 0:
            self.up_events.append(ScaleEvent(change, now))
        elif change < 0:
            self.down_events.append(ScaleEvent(-change, now))


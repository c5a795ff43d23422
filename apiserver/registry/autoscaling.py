"""autoscaling HorizontalPodAutoscalers: v2 stored, v1 served from it (upstream's
pkg/apis/autoscaling defaults, validation and v1 conversion).

v1 says one thing v2 says otherwise: targetCPUUtilizationPercentage is v2's Resource
metric on cpu with an Utilization target; currentCPUUtilizationPercentage its status.
What v1 cannot say (other metrics, behavior) is kept from the stored object when a v1
client writes it back (upstream keeps it in annotations for the same purpose)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import scheme
from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import autoscaling_pb2 as pb

__all__ = ["STRATEGIES", "CONVERSIONS", "HorizontalPodAutoscalerStrategy", "HorizontalPodAutoscalerV1Strategy",
           "to_v1", "to_v2", "DEFAULT_CPU_UTILIZATION"]

DEFAULT_CPU_UTILIZATION = 80  # upstream's: a HPA without metrics targets 80% of the cpu requested
_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
_TARGET_TYPES = ("AverageValue", "Utilization", "Value")
_MAX_PERIOD, _MAX_WINDOW = 1800, 3600


def _cpu_metric(utilization: int) -> pb.MetricSpec:
    return pb.MetricSpec(type="Resource", resource=pb.ResourceMetricSource(
        name="cpu", target=pb.MetricTarget(type="Utilization", averageUtilization=utilization)))


def _reference(ref: pb.CrossVersionObjectReference, path: str, check: Checker) -> None:
    if not ref.kind:
        check.add(f"{path}.kind", "Required value")
    if not ref.name:
        check.add(f"{path}.name", "Required value")


def _replicas(min_replicas: int | None, max_replicas: int, check: Checker) -> None:
    if min_replicas is not None and min_replicas < 1:
        check.invalid("spec.minReplicas", min_replicas, "must be greater than or equal to 1")
    if max_replicas < 1:
        check.invalid("spec.maxReplicas", max_replicas, "must be greater than 0")
    elif min_replicas is not None and max_replicas < min_replicas:
        check.invalid("spec.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`")


def _quantity(path: str, text: str, check: Checker) -> None:
    try:
        if parse_quantity(text).value <= 0:
            check.invalid(path, text, "must be positive")
    except QuantityError:
        check.invalid(path, text, "quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def _target(target: pb.MetricTarget, path: str, check: Checker, *, utilization: bool) -> None:
    if target.type not in _TARGET_TYPES:
        check.add(f"{path}.type", "Required value: must specify a metric target type" if not target.type
                  else f'Invalid value: "{target.type}": must be either Utilization, Value, or AverageValue')
        return
    if target.type == "Utilization":
        if not utilization:
            check.add(f"{path}.type", f'Invalid value: "{target.type}": must be either Value or AverageValue')
        if not target.HasField("averageUtilization"):
            check.add(f"{path}.averageUtilization", "Required value: must set either a target raw value or a "
                                                    "target utilization")
        elif target.averageUtilization < 1:
            check.invalid(f"{path}.averageUtilization", target.averageUtilization, "must be greater than 0")
    elif target.type == "AverageValue":
        if not target.HasField("averageValue"):
            check.add(f"{path}.averageValue", "Required value: must set either a target raw value or a target "
                                              "utilization")
        else:
            _quantity(f"{path}.averageValue", target.averageValue, check)
    elif not target.HasField("value"):
        check.add(f"{path}.value", "Required value: must set either a target raw value or a target utilization")
    else:
        _quantity(f"{path}.value", target.value, check)


def _metric(metric: pb.MetricSpec, path: str, check: Checker) -> None:
    if metric.type not in _METRIC_TYPES:
        check.add(f"{path}.type", "Required value: must specify a metric source type" if not metric.type else
                  f'Unsupported value: "{metric.type}": supported values: '
                  + ", ".join(f'"{t}"' for t in _METRIC_TYPES))
        return
    field = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods", "Object": "object",
             "External": "external"}[metric.type]
    if not metric.HasField(field):
        check.add(f"{path}.{field}", "Required value: must populate information for the given metric source")
        return
    if metric.type in ("Resource", "ContainerResource"):
        source = metric.resource if metric.type == "Resource" else metric.containerResource
        if not source.name:
            check.add(f"{path}.{field}.name", "Required value: must specify a resource name")
        if metric.type == "ContainerResource" and not metric.containerResource.container:
            check.add(f"{path}.{field}.container", "Required value: must specify a container")
        _target(source.target, f"{path}.{field}.target", check, utilization=True)
    elif metric.type == "Pods":
        if not metric.pods.metric.name:
            check.add(f"{path}.pods.metric.name", "Required value: must specify a metric name")
        _target(metric.pods.target, f"{path}.pods.target", check, utilization=False)
    elif metric.type == "Object":
        _reference(metric.object.describedObject, f"{path}.object.describedObject", check)
        if not metric.object.metric.name:
            check.add(f"{path}.object.metric.name", "Required value: must specify a metric name")
        _target(metric.object.target, f"{path}.object.target", check, utilization=False)
    else:
        if not metric.external.metric.name:
            check.add(f"{path}.external.metric.name", "Required value: must specify a metric name")
        _target(metric.external.target, f"{path}.external.target", check, utilization=False)


def _rules(rules: pb.HPAScalingRules, path: str, check: Checker) -> None:
    if rules.HasField("stabilizationWindowSeconds") and not 0 <= rules.stabilizationWindowSeconds <= _MAX_WINDOW:
        check.invalid(f"{path}.stabilizationWindowSeconds", rules.stabilizationWindowSeconds,
                      f"must be less than or equal to {_MAX_WINDOW}" if rules.stabilizationWindowSeconds > 0
                      else "must be greater than or equal to zero")
    if rules.HasField("selectPolicy"):
        check.unsupported(f"{path}.selectPolicy", rules.selectPolicy, ("Disabled", "Max", "Min"))
    if not rules.policies and rules.selectPolicy != "Disabled":
        check.add(f"{path}.policies", "Required value: must specify at least one Policy")
    for i, policy in enumerate(rules.policies):
        at = f"{path}.policies[{i}]"
        check.unsupported(f"{at}.type", policy.type, ("Percent", "Pods"))
        if policy.value <= 0:
            check.invalid(f"{at}.value", policy.value, "must be greater than zero")
        if not 0 < policy.periodSeconds <= _MAX_PERIOD:
            check.invalid(f"{at}.periodSeconds", policy.periodSeconds,
                          "must be greater than zero" if policy.periodSeconds <= 0
                          else f"must be less than or equal to {_MAX_PERIOD}")
    if rules.HasField("tolerance"):
        try:
            if parse_quantity(rules.tolerance).value < 0:
                check.invalid(f"{path}.tolerance", rules.tolerance, "must be greater than or equal to 0")
        except QuantityError:
            check.invalid(f"{path}.tolerance", rules.tolerance, "must be a quantity")


def default_rules(rules: pb.HPAScalingRules, up: bool) -> None:
    """upstream's SetDefaults_HorizontalPodAutoscalerBehavior: scale up at once by 100% or
    4 pods a 15 s (the larger), down by 100% a 15 s after a 300 s window."""
    if not rules.HasField("selectPolicy"):
        rules.selectPolicy = "Max"
    if not rules.HasField("stabilizationWindowSeconds"):
        rules.stabilizationWindowSeconds = 0 if up else 300
    if not rules.policies:
        rules.policies.add(type="Percent", value=100, periodSeconds=15)
        if up:
            rules.policies.add(type="Pods", value=4, periodSeconds=15)


class HorizontalPodAutoscalerStrategy(Strategy[pb.HorizontalPodAutoscaler]):
    resource = scheme.HORIZONTALPODAUTOSCALERS

    def prepare_for_create(self, obj: pb.HorizontalPodAutoscaler) -> None:
        obj.ClearField("status")

    def default(self, obj: pb.HorizontalPodAutoscaler) -> None:
        spec = obj.spec
        if not spec.HasField("minReplicas"):
            spec.minReplicas = 1
        if not spec.metrics:
            spec.metrics.append(_cpu_metric(DEFAULT_CPU_UTILIZATION))
        if spec.HasField("behavior"):
            default_rules(spec.behavior.scaleUp, up=True)
            default_rules(spec.behavior.scaleDown, up=False)

    def validate(self, obj: pb.HorizontalPodAutoscaler, check: Checker) -> None:
        spec = obj.spec
        _reference(spec.scaleTargetRef, "spec.scaleTargetRef", check)
        _replicas(spec.minReplicas if spec.HasField("minReplicas") else None, spec.maxReplicas, check)
        for i, metric in enumerate(spec.metrics):
            _metric(metric, f"spec.metrics[{i}]", check)
        if spec.HasField("behavior"):
            for name in ("scaleUp", "scaleDown"):
                if spec.behavior.HasField(name):
                    _rules(getattr(spec.behavior, name), f"spec.behavior.{name}", check)

    def validate_status(self, new: pb.HorizontalPodAutoscaler, check: Checker) -> None:
        for name in ("currentReplicas", "desiredReplicas"):
            if getattr(new.status, name) < 0:
                check.invalid(f"status.{name}", getattr(new.status, name), "must be greater than or equal to 0")


class HorizontalPodAutoscalerV1Strategy(Strategy[pb.HorizontalPodAutoscalerV1]):
    """autoscaling/v1's defaults and validation (its writes are stored as v2)."""

    resource = scheme.HORIZONTALPODAUTOSCALERS_V1

    def prepare_for_create(self, obj: pb.HorizontalPodAutoscalerV1) -> None:
        obj.ClearField("status")

    def default(self, obj: pb.HorizontalPodAutoscalerV1) -> None:
        if not obj.spec.HasField("minReplicas"):
            obj.spec.minReplicas = 1

    def validate(self, obj: pb.HorizontalPodAutoscalerV1, check: Checker) -> None:
        spec = obj.spec
        _reference(spec.scaleTargetRef, "spec.scaleTargetRef", check)
        _replicas(spec.minReplicas if spec.HasField("minReplicas") else None, spec.maxReplicas, check)
        if spec.HasField("targetCPUUtilizationPercentage") and spec.targetCPUUtilizationPercentage < 1:
            check.invalid("spec.targetCPUUtilizationPercentage", spec.targetCPUUtilizationPercentage,
                          "must be greater than or equal to 1")


def _cpu_utilization(metrics: list[pb.MetricSpec]) -> pb.MetricSpec | None:
    return next((m for m in metrics if m.type == "Resource" and m.resource.name == "cpu"
                 and m.resource.target.type == "Utilization"), None)


def to_v1(obj: pb.HorizontalPodAutoscaler) -> pb.HorizontalPodAutoscalerV1:
    out = pb.HorizontalPodAutoscalerV1(metadata=obj.metadata)
    spec = out.spec
    spec.scaleTargetRef.CopyFrom(obj.spec.scaleTargetRef)
    if obj.spec.HasField("minReplicas"):
        spec.minReplicas = obj.spec.minReplicas
    spec.maxReplicas = obj.spec.maxReplicas
    cpu = _cpu_utilization(list(obj.spec.metrics))
    if cpu is not None:
        spec.targetCPUUtilizationPercentage = cpu.resource.target.averageUtilization
    st, status = obj.status, out.status
    if st.HasField("observedGeneration"):
        status.observedGeneration = st.observedGeneration
    if st.HasField("lastScaleTime"):
        status.lastScaleTime.CopyFrom(st.lastScaleTime)
    status.currentReplicas, status.desiredReplicas = st.currentReplicas, st.desiredReplicas
    current = next((m for m in st.currentMetrics if m.type == "Resource" and m.resource.name == "cpu"
                    and m.resource.current.HasField("averageUtilization")), None)
    if current is not None:
        status.currentCPUUtilizationPercentage = current.resource.current.averageUtilization
    return out


def to_v2(obj: pb.HorizontalPodAutoscalerV1, stored: pb.HorizontalPodAutoscaler | None) -> pb.HorizontalPodAutoscaler:
    """v1 written as v2; what v1 cannot say comes from the stored object."""
    out = pb.HorizontalPodAutoscaler()
    if stored is not None:
        out.CopyFrom(stored)
    out.metadata.CopyFrom(obj.metadata)
    spec = out.spec
    spec.scaleTargetRef.CopyFrom(obj.spec.scaleTargetRef)
    if obj.spec.HasField("minReplicas"):
        spec.minReplicas = obj.spec.minReplicas
    else:
        spec.ClearField("minReplicas")
    spec.maxReplicas = obj.spec.maxReplicas
    others = [m for m in spec.metrics if not (m.type == "Resource" and m.resource.name == "cpu")]
    del spec.metrics[:]
    if obj.spec.HasField("targetCPUUtilizationPercentage"):
        spec.metrics.append(_cpu_metric(obj.spec.targetCPUUtilizationPercentage))
    spec.metrics.extend(others)
    st, status = obj.status, out.status
    if st.HasField("observedGeneration"):
        status.observedGeneration = st.observedGeneration
    if st.HasField("lastScaleTime"):
        status.lastScaleTime.CopyFrom(st.lastScaleTime)
    status.currentReplicas, status.desiredReplicas = st.currentReplicas, st.desiredReplicas
    if st.HasField("currentCPUUtilizationPercentage"):
        kept = [m for m in status.currentMetrics if not (m.type == "Resource" and m.resource.name == "cpu")]
        del status.currentMetrics[:]
        status.currentMetrics.add(type="Resource", resource=pb.ResourceMetricStatus(
            name="cpu", current=pb.MetricValueStatus(averageUtilization=st.currentCPUUtilizationPercentage)))
        status.currentMetrics.extend(kept)
    return out


# This group's resources, for the registry's table; its second version's conversions.
STRATEGIES = (HorizontalPodAutoscalerStrategy, HorizontalPodAutoscalerV1Strategy)
CONVERSIONS = {scheme.HORIZONTALPODAUTOSCALERS_V1: (to_v1, to_v2)}

"""policy/v1 PodDisruptionBudgets, validated as upstream's pkg/apis/policy validation."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.pods import validate_label_selector
from kubeling import scheme
from kubeling.intstr import scaled_value
from protos.kubeling.v1 import core_pb2, policy_pb2

__all__ = ["STRATEGIES", "PodDisruptionBudgetStrategy"]


def _int_or_percent(path: str, value: core_pb2.IntOrString, check: Checker) -> None:
    try:
        n = scaled_value(value, 100, round_up=True)
    except ValueError:
        check.invalid(path, value.strVal, "must be an integer or percentage (e.g '5%')")
        return
    if n < 0:
        check.invalid(path, n, "must be greater than or equal to 0")
    if value.type == 1 and n > 100:
        check.invalid(path, value.strVal, "must not be greater than 100%")


class PodDisruptionBudgetStrategy(Strategy[policy_pb2.PodDisruptionBudget]):
    resource = scheme.POD_DISRUPTION_BUDGETS

    def prepare_for_create(self, obj: policy_pb2.PodDisruptionBudget) -> None:
        obj.ClearField("status")

    def validate(self, obj: policy_pb2.PodDisruptionBudget, check: Checker) -> None:
        spec = obj.spec
        if spec.HasField("minAvailable") and spec.HasField("maxUnavailable"):
            check.add("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
        for name in ("minAvailable", "maxUnavailable"):
            if spec.HasField(name):
                _int_or_percent(f"spec.{name}", getattr(spec, name), check)
        validate_label_selector(spec.selector, "spec.selector", check)
        if spec.HasField("unhealthyPodEvictionPolicy"):
            check.unsupported("spec.unhealthyPodEvictionPolicy", spec.unhealthyPodEvictionPolicy,
                              ("IfHealthyBudget", "AlwaysAllow"))

    def validate_status(self, new: policy_pb2.PodDisruptionBudget, check: Checker) -> None:
        for name in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
            if getattr(new.status, name) < 0:
                check.invalid(f"status.{name}", getattr(new.status, name), "must be greater than or equal to 0")


# This group's resources, for the registry's table.
STRATEGIES = (PodDisruptionBudgetStrategy,)

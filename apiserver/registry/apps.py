"""apps/v1 ReplicaSets and Deployments: defaults and validation as upstream's
pkg/apis/apps (SetDefaults_Deployment, ValidateDeployment, ValidateReplicaSet)."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import validate_count, validate_selector_and_template
from kubeling import scheme
from kubeling.intstr import scaled_value
from protos.kubeling.v1 import apps_pb2, core_pb2

__all__ = ["STRATEGIES", "ReplicaSetStrategy", "DeploymentStrategy"]

_RESTART = ("Always",)


def _selector_immutable(new_sel: object, old_sel: object, check: Checker) -> None:
    if new_sel != old_sel:
        check.add("spec.selector", "Invalid value: field is immutable")


class ReplicaSetStrategy(Strategy[apps_pb2.ReplicaSet]):
    resource = scheme.REPLICASETS

    def prepare_for_create(self, obj: apps_pb2.ReplicaSet) -> None:
        obj.ClearField("status")

    def default(self, obj: apps_pb2.ReplicaSet) -> None:
        if not obj.spec.HasField("replicas"):
            obj.spec.replicas = 1
        if not obj.metadata.labels:  # upstream: an unlabeled ReplicaSet takes its template's labels
            obj.metadata.labels.update(obj.spec.template.metadata.labels)
        default_pod_spec(obj.spec.template.spec)

    def validate(self, obj: apps_pb2.ReplicaSet, check: Checker) -> None:
        spec = obj.spec
        validate_count("spec.replicas", spec.replicas, check)
        validate_count("spec.minReadySeconds", spec.minReadySeconds, check)
        validate_selector_and_template(spec.selector, spec.HasField("selector"), spec.template, "replicaset", check,
                                       restart_policies=_RESTART)
        canonicalize_resources(spec.template.spec)

    def validate_update(self, new: apps_pb2.ReplicaSet, old: apps_pb2.ReplicaSet, check: Checker) -> None:
        _selector_immutable(new.spec.selector, old.spec.selector, check)

    def validate_status(self, new: apps_pb2.ReplicaSet, check: Checker) -> None:
        st = new.status
        for name in ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            validate_count(f"status.{name}", getattr(st, name), check)
        if st.readyReplicas > st.replicas:
            check.invalid("status.readyReplicas", st.readyReplicas, "cannot be greater than status.replicas")
        if st.availableReplicas > st.readyReplicas:
            check.invalid("status.availableReplicas", st.availableReplicas,
                          "cannot be greater than readyReplicas")


class DeploymentStrategy(Strategy[apps_pb2.Deployment]):
    resource = scheme.DEPLOYMENTS

    def prepare_for_create(self, obj: apps_pb2.Deployment) -> None:
        obj.ClearField("status")

    def default(self, obj: apps_pb2.Deployment) -> None:
        spec = obj.spec
        if not spec.HasField("replicas"):
            spec.replicas = 1
        spec.strategy.type = spec.strategy.type or "RollingUpdate"
        if spec.strategy.type == "RollingUpdate":
            ru = spec.strategy.rollingUpdate
            for field in ("maxUnavailable", "maxSurge"):
                if not ru.HasField(field):
                    getattr(ru, field).CopyFrom(core_pb2.IntOrString(type=1, strVal="25%"))
        if not spec.HasField("revisionHistoryLimit"):
            spec.revisionHistoryLimit = 10
        if not spec.HasField("progressDeadlineSeconds"):
            spec.progressDeadlineSeconds = 600
        default_pod_spec(spec.template.spec)

    def validate(self, obj: apps_pb2.Deployment, check: Checker) -> None:
        spec = obj.spec
        validate_count("spec.replicas", spec.replicas, check)
        validate_count("spec.minReadySeconds", spec.minReadySeconds, check)
        validate_count("spec.revisionHistoryLimit", spec.revisionHistoryLimit, check)
        validate_selector_and_template(spec.selector, spec.HasField("selector"), spec.template, "deployment", check,
                                       restart_policies=_RESTART)
        strategy = spec.strategy
        check.unsupported("spec.strategy.type", strategy.type, ("Recreate", "RollingUpdate"))
        if strategy.type == "Recreate" and strategy.HasField("rollingUpdate"):
            check.add("spec.strategy.rollingUpdate", "Forbidden: may not be specified when strategy `type` is "
                                                      "'Recreate'")
        if strategy.type == "RollingUpdate":
            ru = strategy.rollingUpdate
            values = {}
            for field in ("maxUnavailable", "maxSurge"):
                try:
                    values[field] = scaled_value(getattr(ru, field), 100, round_up=True)
                except ValueError as err:
                    check.invalid(f"spec.strategy.rollingUpdate.{field}", str(err), "must be an integer or percentage "
                                                                                    "(e.g '5%')")
                    continue
                if values[field] < 0:
                    check.invalid(f"spec.strategy.rollingUpdate.{field}", values[field],
                                  "must be greater than or equal to 0")
            if values.get("maxUnavailable") == 0 and values.get("maxSurge") == 0:
                check.invalid("spec.strategy.rollingUpdate.maxUnavailable", 0, "may not be 0 when `maxSurge` is 0")
            if ru.maxUnavailable.type == 1 and values.get("maxUnavailable", 0) > 100:
                check.invalid("spec.strategy.rollingUpdate.maxUnavailable", ru.maxUnavailable.strVal,
                              "must not be greater than 100%")
        if spec.progressDeadlineSeconds <= spec.minReadySeconds:
            check.invalid("spec.progressDeadlineSeconds", spec.progressDeadlineSeconds,
                          "must be greater than minReadySeconds")
        canonicalize_resources(spec.template.spec)

    def validate_update(self, new: apps_pb2.Deployment, old: apps_pb2.Deployment, check: Checker) -> None:
        _selector_immutable(new.spec.selector, old.spec.selector, check)

    def validate_status(self, new: apps_pb2.Deployment, check: Checker) -> None:
        st = new.status
        for name in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
            validate_count(f"status.{name}", getattr(st, name), check)


# This group's resources, for the registry's table.
STRATEGIES = (ReplicaSetStrategy, DeploymentStrategy)

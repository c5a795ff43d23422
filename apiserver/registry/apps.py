"""apps/v1 ReplicaSets, Deployments, DaemonSets, StatefulSets and ControllerRevisions:
defaults and validation as upstream's pkg/apis/apps (SetDefaults_Deployment,
SetDefaults_DaemonSet, SetDefaults_StatefulSet, ValidateDeployment, ValidateReplicaSet,
ValidateDaemonSet, ValidateStatefulSet, ValidateControllerRevision)."""

from __future__ import annotations

from apiserver.registry.core.persistentvolumes import PersistentVolumeClaimStrategy
from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.storage import validate_pvc
from apiserver.validation.workloads import (
    nested,
    validate_count,
    validate_int_or_percent,
    validate_selector_and_template,
)
from kubeling import names, scheme
from kubeling.intstr import scaled_value
from protos.kubeling.v1 import apps_pb2, core_pb2

__all__ = ["STRATEGIES", "ReplicaSetStrategy", "DeploymentStrategy", "DaemonSetStrategy", "StatefulSetStrategy",
           "ControllerRevisionStrategy"]

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


class DaemonSetStrategy(Strategy[apps_pb2.DaemonSet]):
    resource = scheme.DAEMONSETS

    def prepare_for_create(self, obj: apps_pb2.DaemonSet) -> None:
        obj.ClearField("status")

    def default(self, obj: apps_pb2.DaemonSet) -> None:
        spec = obj.spec
        strategy = spec.updateStrategy
        strategy.type = strategy.type or "RollingUpdate"
        if strategy.type == "RollingUpdate":
            ru = strategy.rollingUpdate
            if not ru.HasField("maxUnavailable"):
                ru.maxUnavailable.CopyFrom(core_pb2.IntOrString(type=0, intVal=1))
            if not ru.HasField("maxSurge"):
                ru.maxSurge.CopyFrom(core_pb2.IntOrString(type=0, intVal=0))
        if not spec.HasField("revisionHistoryLimit"):
            spec.revisionHistoryLimit = 10
        default_pod_spec(spec.template.spec)

    def validate(self, obj: apps_pb2.DaemonSet, check: Checker) -> None:
        spec = obj.spec
        validate_selector_and_template(spec.selector, spec.HasField("selector"), spec.template, "daemonset", check,
                                       restart_policies=_RESTART)
        validate_count("spec.minReadySeconds", spec.minReadySeconds, check)
        validate_count("spec.revisionHistoryLimit", spec.revisionHistoryLimit, check)
        strategy = spec.updateStrategy
        check.unsupported("spec.updateStrategy.type", strategy.type, ("OnDelete", "RollingUpdate"))
        if strategy.type == "RollingUpdate":
            path = "spec.updateStrategy.rollingUpdate"
            unavailable = validate_int_or_percent(f"{path}.maxUnavailable", strategy.rollingUpdate.maxUnavailable,
                                                  check)
            surge = validate_int_or_percent(f"{path}.maxSurge", strategy.rollingUpdate.maxSurge, check)
            if unavailable == 0 and surge == 0:
                check.invalid(f"{path}.maxUnavailable", 0, "may not be 0 when `maxSurge` is 0")
        canonicalize_resources(spec.template.spec)

    def validate_update(self, new: apps_pb2.DaemonSet, old: apps_pb2.DaemonSet, check: Checker) -> None:
        _selector_immutable(new.spec.selector, old.spec.selector, check)

    def validate_status(self, new: apps_pb2.DaemonSet, check: Checker) -> None:
        st = new.status
        for name in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                     "updatedNumberScheduled", "numberAvailable", "numberUnavailable", "collisionCount"):
            validate_count(f"status.{name}", getattr(st, name), check)
        validate_count("status.observedGeneration", st.observedGeneration, check)


# What a StatefulSet's update may change (upstream's ValidateStatefulSetUpdate).
_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                        "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
_RETENTION = ("Retain", "Delete")


class StatefulSetStrategy(Strategy[apps_pb2.StatefulSet]):
    resource = scheme.STATEFULSETS

    def prepare_for_create(self, obj: apps_pb2.StatefulSet) -> None:
        obj.ClearField("status")

    def default(self, obj: apps_pb2.StatefulSet) -> None:
        spec = obj.spec
        if not spec.HasField("replicas"):
            spec.replicas = 1
        spec.podManagementPolicy = spec.podManagementPolicy or "OrderedReady"
        strategy = spec.updateStrategy
        strategy.type = strategy.type or "RollingUpdate"
        if strategy.type == "RollingUpdate" and not strategy.rollingUpdate.HasField("partition"):
            strategy.rollingUpdate.partition = 0
        if not spec.HasField("revisionHistoryLimit"):
            spec.revisionHistoryLimit = 10
        policy = spec.persistentVolumeClaimRetentionPolicy
        policy.whenDeleted = policy.whenDeleted or "Retain"
        policy.whenScaled = policy.whenScaled or "Retain"
        claims = PersistentVolumeClaimStrategy()
        for template in spec.volumeClaimTemplates:
            claims.default(template)
            template.ClearField("status")
            template.status.phase = "Pending"  # upstream's defaulting of every claim
        default_pod_spec(spec.template.spec)

    def validate(self, obj: apps_pb2.StatefulSet, check: Checker) -> None:
        spec = obj.spec
        validate_count("spec.replicas", spec.replicas, check)
        validate_count("spec.minReadySeconds", spec.minReadySeconds, check)
        validate_count("spec.revisionHistoryLimit", spec.revisionHistoryLimit, check)
        validate_count("spec.ordinals.start", spec.ordinals.start, check)
        check.unsupported("spec.podManagementPolicy", spec.podManagementPolicy, ("OrderedReady", "Parallel"))
        strategy = spec.updateStrategy
        check.unsupported("spec.updateStrategy.type", strategy.type, ("OnDelete", "RollingUpdate"))
        if strategy.type == "OnDelete" and strategy.HasField("rollingUpdate"):
            check.add("spec.updateStrategy.rollingUpdate",
                      "Invalid value: only allowed for updateStrategy 'RollingUpdate'")
        if strategy.type == "RollingUpdate":
            path = "spec.updateStrategy.rollingUpdate"
            validate_count(f"{path}.partition", strategy.rollingUpdate.partition, check)
            if strategy.rollingUpdate.HasField("maxUnavailable"):
                n = validate_int_or_percent(f"{path}.maxUnavailable", strategy.rollingUpdate.maxUnavailable, check)
                if n == 0:
                    check.invalid(f"{path}.maxUnavailable", 0, "must be greater than 0")
        policy = spec.persistentVolumeClaimRetentionPolicy
        path = "spec.persistentVolumeClaimRetentionPolicy"
        check.unsupported(f"{path}.whenDeleted", policy.whenDeleted, _RETENTION)
        check.unsupported(f"{path}.whenScaled", policy.whenScaled, _RETENTION)
        if spec.serviceName:
            check.name("spec.serviceName", spec.serviceName, names.dns1123_label)
        # Containers may mount the claim templates by name (upstream leaves a set's pod spec
        # unvalidated for that; here it is validated with them as the volumes they become).
        template = core_pb2.PodTemplateSpec()
        template.CopyFrom(spec.template)
        mounted = {v.name for v in template.spec.volumes}
        for claim in spec.volumeClaimTemplates:
            if claim.metadata.name and claim.metadata.name not in mounted:
                template.spec.volumes.add(name=claim.metadata.name).persistentVolumeClaim.claimName = \
                    claim.metadata.name
        validate_selector_and_template(spec.selector, spec.HasField("selector"), template, "statefulset", check,
                                       restart_policies=_RESTART)
        for i, template in enumerate(spec.volumeClaimTemplates):
            with nested(f"spec.volumeClaimTemplates[{i}]", check) as inner:
                validate_pvc(template, inner)
        canonicalize_resources(spec.template.spec)

    def validate_update(self, new: apps_pb2.StatefulSet, old: apps_pb2.StatefulSet, check: Checker) -> None:
        a, b = apps_pb2.StatefulSetSpec(), apps_pb2.StatefulSetSpec()
        a.CopyFrom(new.spec)
        b.CopyFrom(old.spec)
        for name in _STATEFULSET_MUTABLE:
            a.ClearField(name)
            b.ClearField(name)
        if a != b:
            fields = ", ".join(f"'{f}'" for f in _STATEFULSET_MUTABLE[:-1])
            check.add("spec", f"Forbidden: updates to statefulset spec for fields other than {fields} and "
                              f"'{_STATEFULSET_MUTABLE[-1]}' are forbidden")

    def validate_status(self, new: apps_pb2.StatefulSet, check: Checker) -> None:
        st = new.status
        for name in ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
                     "collisionCount"):
            validate_count(f"status.{name}", getattr(st, name), check)
        if st.readyReplicas > st.replicas:
            check.invalid("status.readyReplicas", st.readyReplicas, "cannot be greater than status.replicas")
        if st.availableReplicas > st.readyReplicas:
            check.invalid("status.availableReplicas", st.availableReplicas, "cannot be greater than "
                                                                            "status.readyReplicas")


class ControllerRevisionStrategy(Strategy[apps_pb2.ControllerRevision]):
    """Immutable snapshots of a DaemonSet's or StatefulSet's template (their history)."""

    resource = scheme.CONTROLLERREVISIONS

    def validate(self, obj: apps_pb2.ControllerRevision, check: Checker) -> None:
        if not obj.HasField("data"):
            check.add("data", "Required value: data is mandatory")
        validate_count("revision", obj.revision, check)

    def validate_update(self, new: apps_pb2.ControllerRevision, old: apps_pb2.ControllerRevision,
                        check: Checker) -> None:
        if new.data != old.data:
            check.add("data", "Invalid value: field is immutable")


# This group's resources, for the registry's table.
STRATEGIES = (ReplicaSetStrategy, DeploymentStrategy, DaemonSetStrategy, StatefulSetStrategy,
              ControllerRevisionStrategy)

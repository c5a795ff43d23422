"""v1 ReplicationControllers (upstream's pkg/registry/core/replicationcontroller): the
ReplicaSet before set-based selectors. Defaults as SetDefaults_ReplicationController
(selector and labels from the template's labels, one replica), validation as
ValidateReplicationController."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import go_map, validate_count, validate_template
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["ReplicationControllerStrategy"]


class ReplicationControllerStrategy(Strategy[core_pb2.ReplicationController]):
    resource = scheme.REPLICATIONCONTROLLERS

    def prepare_for_create(self, obj: core_pb2.ReplicationController) -> None:
        obj.ClearField("status")

    def default(self, obj: core_pb2.ReplicationController) -> None:
        spec = obj.spec
        labels = spec.template.metadata.labels
        if not spec.selector:
            spec.selector.update(labels)
        if not obj.metadata.labels:
            obj.metadata.labels.update(labels)
        if not spec.HasField("replicas"):
            spec.replicas = 1
        default_pod_spec(spec.template.spec)

    def validate(self, obj: core_pb2.ReplicationController, check: Checker) -> None:
        spec = obj.spec
        validate_count("spec.replicas", spec.replicas, check)
        validate_count("spec.minReadySeconds", spec.minReadySeconds, check)
        if not spec.selector:
            check.add("spec.selector", "Required value")
        else:
            check.labels("spec.selector", spec.selector)
        if not spec.HasField("template"):
            check.add("spec.template", "Required value")
            return
        labels = dict(spec.template.metadata.labels)
        if spec.selector and any(labels.get(k) != v for k, v in spec.selector.items()):
            check.add("spec.template.metadata.labels",
                      f"Invalid value: {go_map(labels)}: `selector` does not match template `labels`")
        validate_template(spec.template, "spec.template", check)
        policy = spec.template.spec.restartPolicy
        if policy and policy != "Always":
            check.add("spec.template.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: '
                                                          '"Always"')
        if spec.template.spec.HasField("activeDeadlineSeconds"):
            check.add("spec.template.spec.activeDeadlineSeconds",
                      "Forbidden: activeDeadlineSeconds in ReplicationController is not Supported")
        canonicalize_resources(spec.template.spec)

    def validate_status(self, new: core_pb2.ReplicationController, check: Checker) -> None:
        st = new.status
        for name in ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            validate_count(f"status.{name}", getattr(st, name), check)
        if st.readyReplicas > st.replicas:
            check.invalid("status.readyReplicas", st.readyReplicas, "cannot be greater than status.replicas")
        if st.availableReplicas > st.readyReplicas:
            check.invalid("status.availableReplicas", st.availableReplicas,
                          "cannot be greater than readyReplicas")

"""batch/v1 Jobs: defaults, the generated selector and validation as upstream's
pkg/registry/batch/job strategy and pkg/apis/batch validation."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import validate_count, validate_selector_and_template
from kubeling import scheme
from protos.kubeling.v1 import batch_pb2, meta_pb2

__all__ = ["STRATEGIES", "JobStrategy", "CONTROLLER_UID", "JOB_NAME"]

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
_LEGACY_CONTROLLER_UID, _LEGACY_JOB_NAME = "controller-uid", "job-name"


class JobStrategy(Strategy[batch_pb2.Job]):
    resource = scheme.JOBS

    def prepare_for_create(self, obj: batch_pb2.Job) -> None:
        obj.ClearField("status")
        if obj.spec.manualSelector:
            return
        # Upstream's generateSelector: the Job's uid picks its pods, whatever else they carry.
        uid, name = obj.metadata.uid, obj.metadata.name
        labels = obj.spec.template.metadata.labels
        for key, value in ((CONTROLLER_UID, uid), (JOB_NAME, name), (_LEGACY_CONTROLLER_UID, uid),
                           (_LEGACY_JOB_NAME, name)):
            labels.setdefault(key, value)
        if not obj.spec.HasField("selector"):
            obj.spec.selector.CopyFrom(meta_pb2.LabelSelector(matchLabels={CONTROLLER_UID: uid}))

    def default(self, obj: batch_pb2.Job) -> None:
        spec = obj.spec
        if not spec.HasField("completions") and not spec.HasField("parallelism"):
            spec.completions = 1
        if not spec.HasField("parallelism"):
            spec.parallelism = 1
        if not spec.HasField("backoffLimit"):
            spec.backoffLimit = 6
        if not spec.HasField("completionMode"):
            spec.completionMode = "NonIndexed"
        if not spec.HasField("suspend"):
            spec.suspend = False
        if not spec.HasField("manualSelector"):
            spec.manualSelector = False
        default_pod_spec(spec.template.spec)

    def validate(self, obj: batch_pb2.Job, check: Checker) -> None:
        spec = obj.spec
        for name in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
            validate_count(f"spec.{name}", getattr(spec, name), check)
        if spec.HasField("activeDeadlineSeconds") and spec.activeDeadlineSeconds <= 0:
            check.invalid("spec.activeDeadlineSeconds", spec.activeDeadlineSeconds,
                          "must be greater than or equal to 1")
        check.unsupported("spec.completionMode", spec.completionMode, ("NonIndexed",))
        if not spec.manualSelector and spec.selector.matchLabels.get(CONTROLLER_UID) != obj.metadata.uid:
            check.add("spec.selector", "Invalid value: `selector` not auto-generated")
        validate_selector_and_template(spec.selector, spec.HasField("selector"), spec.template, "job", check,
                                       restart_policies=("OnFailure", "Never"))
        canonicalize_resources(spec.template.spec)

    def validate_update(self, new: batch_pb2.Job, old: batch_pb2.Job, check: Checker) -> None:
        for name in ("selector", "template", "completions", "completionMode"):
            if getattr(new.spec, name) != getattr(old.spec, name):
                check.add(f"spec.{name}", "Invalid value: field is immutable")

    def validate_status(self, new: batch_pb2.Job, check: Checker) -> None:
        for name in ("active", "succeeded", "failed"):
            validate_count(f"status.{name}", getattr(new.status, name), check)


# This group's resources, for the registry's table.
STRATEGIES = (JobStrategy,)

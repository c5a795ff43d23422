"""batch/v1 Jobs and CronJobs: defaults, the generated selector and validation as
upstream's pkg/registry/batch/job and cronjob strategies and pkg/apis/batch validation."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import nested, validate_count, validate_selector_and_template, validate_template
from kubeling import cron, scheme
from protos.kubeling.v1 import batch_pb2, meta_pb2

__all__ = ["STRATEGIES", "JobStrategy", "CronJobStrategy", "CONTROLLER_UID", "JOB_NAME"]

_JOB_RESTART = ("OnFailure", "Never")
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
_LEGACY_CONTROLLER_UID, _LEGACY_JOB_NAME = "controller-uid", "job-name"


def default_job_spec(spec: batch_pb2.JobSpec) -> None:
    """SetDefaults_Job, for a Job and a CronJob's job template."""
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


def _validate_job_spec(spec: batch_pb2.JobSpec, check: Checker) -> None:
    """What a Job's spec and a job template's share (upstream's validateJobSpec), at `spec.`."""
    for name in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        validate_count(f"spec.{name}", getattr(spec, name), check)
    if spec.HasField("activeDeadlineSeconds") and spec.activeDeadlineSeconds <= 0:
        check.invalid("spec.activeDeadlineSeconds", spec.activeDeadlineSeconds,
                      "must be greater than or equal to 1")
    check.unsupported("spec.completionMode", spec.completionMode, ("NonIndexed",))
    canonicalize_resources(spec.template.spec)


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
        default_job_spec(obj.spec)

    def validate(self, obj: batch_pb2.Job, check: Checker) -> None:
        spec = obj.spec
        _validate_job_spec(spec, check)
        if not spec.manualSelector and spec.selector.matchLabels.get(CONTROLLER_UID) != obj.metadata.uid:
            check.add("spec.selector", "Invalid value: `selector` not auto-generated")
        validate_selector_and_template(spec.selector, spec.HasField("selector"), spec.template, "job", check,
                                       restart_policies=_JOB_RESTART)

    def validate_update(self, new: batch_pb2.Job, old: batch_pb2.Job, check: Checker) -> None:
        for name in ("selector", "template", "completions", "completionMode"):
            if getattr(new.spec, name) != getattr(old.spec, name):
                check.add(f"spec.{name}", "Invalid value: field is immutable")

    def validate_status(self, new: batch_pb2.Job, check: Checker) -> None:
        for name in ("active", "succeeded", "failed"):
            validate_count(f"status.{name}", getattr(new.status, name), check)


_CONCURRENCY = ("Allow", "Forbid", "Replace")
# A Job's name is the CronJob's and 11 more characters (-<minutes since the epoch>), and a
# Job's pods carry it in a label (upstream's validation.DNS1035LabelMaxLength - 11).
_CRONJOB_NAME_MAX = 52


class CronJobStrategy(Strategy[batch_pb2.CronJob]):
    resource = scheme.CRONJOBS

    def prepare_for_create(self, obj: batch_pb2.CronJob) -> None:
        obj.ClearField("status")

    def default(self, obj: batch_pb2.CronJob) -> None:
        spec = obj.spec
        spec.concurrencyPolicy = spec.concurrencyPolicy or "Allow"
        if not spec.HasField("suspend"):
            spec.suspend = False
        if not spec.HasField("successfulJobsHistoryLimit"):
            spec.successfulJobsHistoryLimit = 3
        if not spec.HasField("failedJobsHistoryLimit"):
            spec.failedJobsHistoryLimit = 1
        default_job_spec(spec.jobTemplate.spec)

    def validate_name(self, name: str) -> list[str]:
        problems = super().validate_name(name)
        if len(name) > _CRONJOB_NAME_MAX:
            problems.append(f"must be no more than {_CRONJOB_NAME_MAX} characters")
        return problems

    def validate(self, obj: batch_pb2.CronJob, check: Checker) -> None:
        spec = obj.spec
        if not spec.schedule:
            check.add("spec.schedule", "Required value")
        else:
            try:
                cron.parse(spec.schedule)
            except cron.CronError as err:
                check.invalid("spec.schedule", spec.schedule, str(err))
            if "TZ" in spec.schedule:
                check.invalid("spec.schedule", spec.schedule,
                              "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
        if spec.HasField("timeZone"):
            try:
                cron.zone(spec.timeZone or "<empty>")
            except cron.CronError as err:
                check.invalid("spec.timeZone", spec.timeZone, str(err))
        check.unsupported("spec.concurrencyPolicy", spec.concurrencyPolicy, _CONCURRENCY)
        if spec.HasField("startingDeadlineSeconds"):
            validate_count("spec.startingDeadlineSeconds", spec.startingDeadlineSeconds, check)
        validate_count("spec.successfulJobsHistoryLimit", spec.successfulJobsHistoryLimit, check)
        validate_count("spec.failedJobsHistoryLimit", spec.failedJobsHistoryLimit, check)
        template = spec.jobTemplate
        check.labels("spec.jobTemplate.metadata.labels", template.metadata.labels)
        check.annotations("spec.jobTemplate.metadata.annotations", template.metadata.annotations)
        with nested("spec.jobTemplate", check) as inner:
            _validate_job_spec(template.spec, inner)
            validate_template(template.spec.template, "spec.template", inner)
            policy = template.spec.template.spec.restartPolicy
            if policy not in _JOB_RESTART:
                inner.add("spec.template.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: '
                          + ", ".join(f'"{p}"' for p in _JOB_RESTART))
            if template.spec.HasField("selector"):
                inner.add("spec.selector", "Invalid value: `selector` will be auto-generated")
            if template.spec.manualSelector:
                inner.add("spec.manualSelector", 'Unsupported value: true: supported values: "nil", "false"')


# This group's resources, for the registry's table.
STRATEGIES = (JobStrategy, CronJobStrategy)

"""batch/v1 Jobs and CronJobs: defaults, the generated selector and validation as
upstream's pkg/registry/batch/job and cronjob strategies and pkg/apis/batch validation."""

from __future__ import annotations

from apiserver.registry.core.pods import canonicalize_resources, default_pod_spec
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.workloads import nested, validate_count, validate_selector_and_template, validate_template
from kubeling import cron, scheme
from kubeling.indexset import parse_indexes
from protos.kubeling.v1 import batch_pb2, meta_pb2

__all__ = ["STRATEGIES", "JobStrategy", "CronJobStrategy", "CONTROLLER_UID", "JOB_NAME"]

_JOB_RESTART = ("OnFailure", "Never")
_MAX_INT32 = 2**31 - 1
_MAX_RULES = 20  # upstream's maxPodFailurePolicyRules and maxSuccessPolicyRules
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
        # with a limit per index, the Job's own one would only get in the way
        spec.backoffLimit = _MAX_INT32 if spec.HasField("backoffLimitPerIndex") else 6
    if not spec.HasField("podReplacementPolicy"):
        spec.podReplacementPolicy = "Failed" if spec.HasField("podFailurePolicy") else "TerminatingOrFailed"
    for rule in spec.podFailurePolicy.rules:
        for pattern in rule.onPodConditions:
            pattern.status = pattern.status or "True"
    if not spec.HasField("completionMode"):
        spec.completionMode = "NonIndexed"
    if not spec.HasField("suspend"):
        spec.suspend = False
    if not spec.HasField("manualSelector"):
        spec.manualSelector = False
    default_pod_spec(spec.template.spec)


def _validate_job_spec(spec: batch_pb2.JobSpec, check: Checker) -> None:
    """What a Job's spec and a job template's share (upstream's validateJobSpec), at `spec.`."""
    for name in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished", "backoffLimitPerIndex",
                 "maxFailedIndexes"):
        validate_count(f"spec.{name}", getattr(spec, name), check)
    if spec.HasField("activeDeadlineSeconds") and spec.activeDeadlineSeconds <= 0:
        check.invalid("spec.activeDeadlineSeconds", spec.activeDeadlineSeconds,
                      "must be greater than or equal to 1")
    check.unsupported("spec.completionMode", spec.completionMode, ("NonIndexed", "Indexed"))
    indexed = spec.completionMode == "Indexed"
    if indexed and not spec.HasField("completions"):
        check.add("spec.completions", "Required value: when completion mode is Indexed")
    if spec.HasField("backoffLimitPerIndex") and not indexed:
        check.invalid("spec.backoffLimitPerIndex", spec.backoffLimitPerIndex, "requires indexed completion mode")
    if spec.HasField("maxFailedIndexes"):
        if not spec.HasField("backoffLimitPerIndex"):
            check.add("spec.backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified")
        if spec.HasField("completions") and spec.maxFailedIndexes > spec.completions:
            check.invalid("spec.maxFailedIndexes", spec.maxFailedIndexes, "must be less than or equal to completions")
    check.unsupported("spec.podReplacementPolicy", spec.podReplacementPolicy, ("TerminatingOrFailed", "Failed"))
    if spec.HasField("podFailurePolicy"):
        _validate_failure_policy(spec, check)
        if spec.podReplacementPolicy != "Failed":
            check.add("spec.podReplacementPolicy", f'Unsupported value: "{spec.podReplacementPolicy}": supported '
                                                   'values: "Failed"')
    if spec.HasField("successPolicy"):
        _validate_success_policy(spec, check)
    canonicalize_resources(spec.template.spec)


def _validate_failure_policy(spec: batch_pb2.JobSpec, check: Checker) -> None:
    """upstream's validatePodFailurePolicy."""
    path = "spec.podFailurePolicy.rules"
    if spec.template.spec.restartPolicy != "Never":
        check.invalid("spec.template.spec.restartPolicy", spec.template.spec.restartPolicy,
                      'only "Never" is supported when podFailurePolicy is specified')
    if len(spec.podFailurePolicy.rules) > _MAX_RULES:
        check.add(path, f"Too many: {len(spec.podFailurePolicy.rules)}: must have at most {_MAX_RULES} items")
    for i, rule in enumerate(spec.podFailurePolicy.rules):
        at = f"{path}[{i}]"
        check.unsupported(f"{at}.action", rule.action, ("Count", "FailIndex", "FailJob", "Ignore"))
        if rule.action == "FailIndex" and not spec.HasField("backoffLimitPerIndex"):
            check.invalid(f"{at}.action", rule.action, "requires the backoffLimitPerIndex to be set")
        has_codes, has_conditions = rule.HasField("onExitCodes"), bool(rule.onPodConditions)
        if has_codes and has_conditions:
            check.invalid(at, "", "specifying both OnExitCodes and OnPodConditions is not supported")
        elif not has_codes and not has_conditions:
            check.invalid(at, "", "specifying one of OnExitCodes and OnPodConditions is required")
        if has_codes:
            codes = rule.onExitCodes
            check.unsupported(f"{at}.onExitCodes.operator", codes.operator, ("In", "NotIn"))
            values = list(codes.values)
            if not values:
                check.add(f"{at}.onExitCodes.values", "Invalid value: []: at least one value is required")
            if len(set(values)) != len(values):
                check.add(f"{at}.onExitCodes.values", "Duplicate value")
            if values != sorted(values):
                check.add(f"{at}.onExitCodes.values", "Invalid value: must be ordered")
            if codes.operator == "In" and 0 in values:
                check.invalid(f"{at}.onExitCodes.values", 0, "must not be 0 for the In operator")
            if codes.HasField("containerName"):
                names_in = {c.name for c in (*spec.template.spec.containers, *spec.template.spec.initContainers)}
                if codes.containerName not in names_in:
                    check.invalid(f"{at}.onExitCodes.containerName", codes.containerName,
                                  "must be one of the container or initContainer names in the pod template")
        for j, pattern in enumerate(rule.onPodConditions):
            check.unsupported(f"{at}.onPodConditions[{j}].status", pattern.status, ("False", "True", "Unknown"))
            if not pattern.type:
                check.add(f"{at}.onPodConditions[{j}].type", "Required value")


def _validate_success_policy(spec: batch_pb2.JobSpec, check: Checker) -> None:
    """upstream's validateSuccessPolicy."""
    path = "spec.successPolicy"
    if spec.completionMode != "Indexed":
        check.invalid(path, "", "requires indexed completion mode")
        return
    rules = spec.successPolicy.rules
    if not rules or len(rules) > _MAX_RULES:
        check.add(f"{path}.rules", f"Invalid value: must have between 1 and {_MAX_RULES} rules")
    for i, rule in enumerate(rules):
        at = f"{path}.rules[{i}]"
        if not rule.HasField("succeededIndexes") and not rule.HasField("succeededCount"):
            check.invalid(at, "", "at least one of succeededCount or succeededIndexes must be specified")
        total = spec.completions
        if rule.HasField("succeededIndexes"):
            try:
                total = len(parse_indexes(rule.succeededIndexes, spec.completions))
            except ValueError:
                check.invalid(f"{at}.succeededIndexes", rule.succeededIndexes,
                              f"error parsing succeededIndexes: must be indexes below completions "
                              f"({spec.completions}), as 1,3-5")
        if rule.HasField("succeededCount"):
            if rule.succeededCount < 0:
                check.invalid(f"{at}.succeededCount", rule.succeededCount, "must be greater than or equal to 0")
            elif rule.succeededCount > total:
                check.invalid(f"{at}.succeededCount", rule.succeededCount,
                              f"must be less than or equal to {total} (the number of indexes it counts)")


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
        for name in ("selector", "template", "completions", "completionMode", "podFailurePolicy",
                     "backoffLimitPerIndex", "successPolicy", "managedBy"):
            if getattr(new.spec, name) != getattr(old.spec, name) or \
                    new.spec.HasField(name) != old.spec.HasField(name):
                check.add(f"spec.{name}", "Invalid value: field is immutable")

    def prepare_for_status_update(self, new: batch_pb2.Job, old: batch_pb2.Job) -> None:
        """upstream's jobStatusStrategy: the spec is the stored one; labels and annotations
        may change with the status (the conformance test "Jobs, apply changes to status")."""
        labels, annotations = dict(new.metadata.labels), dict(new.metadata.annotations)
        super().prepare_for_status_update(new, old)
        new.metadata.labels.clear()
        new.metadata.labels.update(labels)
        new.metadata.annotations.clear()
        new.metadata.annotations.update(annotations)

    def validate_status(self, new: batch_pb2.Job, check: Checker) -> None:
        for name in ("active", "succeeded", "failed", "ready", "terminating"):
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

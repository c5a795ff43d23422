"""What the Job controller decides from a Job's spec and its pods, as upstream's
pkg/controller/job helpers: a failed pod against the podFailurePolicy's rules, and the
successPolicy's rules against the completed indexes."""

from __future__ import annotations

from dataclasses import dataclass

from kubeling.indexset import parse_indexes
from protos.kubeling.v1 import batch_pb2, core_pb2

__all__ = ["PolicyMatch", "match_failure_policy", "match_success_policy",
           "COMPLETION_INDEX", "INDEX_FAILURE_COUNT", "INDEX_IGNORED_FAILURE_COUNT", "TRACKING_FINALIZER",
           "index_of"]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation and label
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def index_of(pod: core_pb2.Pod) -> int | None:
    text = pod.metadata.annotations.get(COMPLETION_INDEX, "")
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class PolicyMatch:
    action: str  # FailJob, FailIndex, Ignore, Count
    message: str
    index: int  # the rule's


def _exit_code_matches(req: batch_pb2.PodFailurePolicyOnExitCodesRequirement, pod: core_pb2.Pod) -> \
        core_pb2.ContainerStatus | None:
    statuses = [*pod.status.initContainerStatuses, *pod.status.containerStatuses]
    for status in statuses:
        if req.HasField("containerName") and status.name != req.containerName:
            continue
        if not status.state.HasField("terminated"):
            continue
        code = status.state.terminated.exitCode
        if code == 0:
            continue  # a container that succeeded matches no rule
        if (req.operator == "In") == (code in req.values):
            return status
    return None


def match_failure_policy(policy: batch_pb2.PodFailurePolicy, pod: core_pb2.Pod) -> PolicyMatch | None:
    """The first rule a failed pod matches (upstream's matchPodFailurePolicy), with
    upstream's message for the FailJob and FailIndex actions."""
    meta = pod.metadata
    for i, rule in enumerate(policy.rules):
        if rule.HasField("onExitCodes"):
            status = _exit_code_matches(rule.onExitCodes, pod)
            if status is not None:
                code = status.state.terminated.exitCode
                message = f"Container {status.name} for pod {meta.namespace}/{meta.name} failed with exit code " \
                          f"{code} matching {rule.action} rule at index {i}"
                return PolicyMatch(rule.action, message, i)
            continue
        for pattern in rule.onPodConditions:
            want = pattern.status or "True"
            cond = next((c for c in pod.status.conditions if c.type == pattern.type and c.status == want), None)
            if cond is not None:
                return PolicyMatch(rule.action, f"Pod {meta.namespace}/{meta.name} has condition {cond.type} "
                                                f"matching {rule.action} rule at index {i}", i)
    return None


def match_success_policy(policy: batch_pb2.SuccessPolicy, completed: set[int], completions: int) -> int | None:
    """The index of the first rule the completed indexes satisfy (upstream's
    matchSuccessPolicy): all of succeededIndexes done, or succeededCount of them (of any
    index when succeededIndexes is not given)."""
    for i, rule in enumerate(policy.rules):
        if rule.HasField("succeededIndexes"):
            try:
                wanted = parse_indexes(rule.succeededIndexes, completions)
            except ValueError:
                continue
            done = len(wanted & completed)
            if rule.HasField("succeededCount"):
                if done >= rule.succeededCount:
                    return i
            elif wanted and done == len(wanted):
                return i
        elif rule.HasField("succeededCount") and len(completed) >= rule.succeededCount:
            return i
    return None

"""What the Deployment controller computes, as upstream's pkg/controller/deployment/util:
the pod-template hash that names a ReplicaSet, revisions in annotations, maxSurge and
maxUnavailable resolved against replicas, how many pods the new ReplicaSet may have,
and the status a set of ReplicaSets adds up to."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from controllers.history import hash_bytes
from kubeling.intstr import scaled_value
from protos.kubeling.v1 import apps_pb2, core_pb2

__all__ = ["POD_TEMPLATE_HASH", "REVISION", "REVISION_HISTORY", "DESIRED_REPLICAS", "MAX_REPLICAS",
           "template_hash", "equal_ignore_hash", "revision_of", "max_revision", "resolve_fenceposts",
           "new_rs_replicas", "max_surge", "copyable_annotations", "complete", "total_replicas",
           "available_replicas"]

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_NOT_COPIED = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED_REPLICAS,
               MAX_REPLICAS, "deprecated.deployment.rollback.to"}


def _without_hash(template: core_pb2.PodTemplateSpec) -> core_pb2.PodTemplateSpec:
    copy = core_pb2.PodTemplateSpec()
    copy.CopyFrom(template)
    copy.metadata.labels.pop(POD_TEMPLATE_HASH, None)
    return copy


def template_hash(template: core_pb2.PodTemplateSpec, collision_count: int | None = None) -> str:
    """A short, stable name suffix for a template (upstream's ComputeHash + SafeEncodeString)."""
    data = _without_hash(template).SerializeToString(deterministic=True)
    return hash_bytes(data, collision_count.to_bytes(4, "little") if collision_count is not None else b"")


def equal_ignore_hash(a: core_pb2.PodTemplateSpec, b: core_pb2.PodTemplateSpec) -> bool:
    return _without_hash(a).SerializeToString(deterministic=True) == \
        _without_hash(b).SerializeToString(deterministic=True)


def revision_of(rs: apps_pb2.ReplicaSet) -> int:
    text = rs.metadata.annotations.get(REVISION, "")
    return int(text) if text.isdigit() else 0


def max_revision(sets: Iterable[apps_pb2.ReplicaSet]) -> int:
    return max((revision_of(rs) for rs in sets), default=0)


def resolve_fenceposts(d: apps_pb2.Deployment) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as counts; both 0 would block: unavailable becomes 1."""
    if d.spec.strategy.type != "RollingUpdate":
        return 0, 0
    ru, replicas = d.spec.strategy.rollingUpdate, d.spec.replicas
    surge = scaled_value(ru.maxSurge, replicas, round_up=True)
    unavailable = scaled_value(ru.maxUnavailable, replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: apps_pb2.Deployment) -> int:
    return resolve_fenceposts(d)[0]


def total_replicas(sets: Sequence[apps_pb2.ReplicaSet]) -> int:
    return sum(rs.spec.replicas for rs in sets)


def available_replicas(sets: Sequence[apps_pb2.ReplicaSet]) -> int:
    return sum(rs.status.availableReplicas for rs in sets)


def new_rs_replicas(d: apps_pb2.Deployment, all_sets: Sequence[apps_pb2.ReplicaSet],
                    new_rs: apps_pb2.ReplicaSet | None) -> int:
    """How many pods the new ReplicaSet may have now (upstream's NewRSNewReplicas)."""
    current_new = new_rs.spec.replicas if new_rs is not None else 0
    if d.spec.strategy.type == "Recreate":
        return d.spec.replicas
    surge = max_surge(d)
    current = total_replicas(all_sets)
    allowed_total = d.spec.replicas + surge
    if current >= allowed_total:
        return current_new
    scale_up = min(allowed_total - current, d.spec.replicas - current_new)
    return current_new + max(0, scale_up)


def copyable_annotations(d: apps_pb2.Deployment) -> dict[str, str]:
    return {k: v for k, v in d.metadata.annotations.items() if k not in _NOT_COPIED}


def complete(d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus) -> bool:
    """upstream's DeploymentComplete."""
    want = d.spec.replicas
    return (status.updatedReplicas == want and status.replicas == want and status.availableReplicas == want
            and status.observedGeneration >= d.metadata.generation)


def proportions(sets: Sequence[apps_pb2.ReplicaSet], delta: int) -> list[int]:
    """Split `delta` replicas over ReplicaSets in proportion to their sizes (upstream's
    proportional scaling, without its annotation bookkeeping); the remainder goes to the
    largest (newest on ties)."""
    total = total_replicas(sets)
    if total == 0:
        return [delta if i == len(sets) - 1 else 0 for i in range(len(sets))]
    shares = [math.trunc(delta * rs.spec.replicas / total) for rs in sets]
    leftover = delta - sum(shares)
    largest = max(range(len(sets)), key=lambda i: (sets[i].spec.replicas, sets[i].metadata.creationTimestamp.seconds))
    shares[largest] += leftover
    return shares

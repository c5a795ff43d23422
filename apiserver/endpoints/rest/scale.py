"""The `scale` subresource of Deployments and ReplicaSets: an autoscaling/v1 Scale whose
spec.replicas is the object's, written back to the object (what `kubectl scale` and
autoscalers read and patch)."""

from __future__ import annotations

from typing import Any

from apiserver.endpoints.rest import patch as patches
from kubeling import errors
from kubeling.kjson import format_time
from kubeling.selectors import from_label_selector_proto
from protos.kubeling.v1 import apps_pb2

__all__ = ["scale_of", "replicas_from", "patched_scale"]

Scalable = apps_pb2.Deployment | apps_pb2.ReplicaSet


def scale_of(obj: Scalable) -> dict[str, Any]:
    meta = obj.metadata
    selector = from_label_selector_proto(obj.spec.selector)
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid,
                         "resourceVersion": meta.resourceVersion,
                         "creationTimestamp": format_time(meta.creationTimestamp)},
            "spec": {"replicas": obj.spec.replicas},
            "status": {"replicas": obj.status.replicas, "selector": str(selector) if selector else ""}}


def replicas_from(scale: Any, current: Scalable) -> tuple[int, str]:
    """spec.replicas of a Scale body (PUT) and its resourceVersion precondition ("" for none)."""
    if not isinstance(scale, dict):
        raise errors.BadRequest("the body must be an autoscaling/v1 Scale object")
    kind = scale.get("kind")
    if kind not in (None, "Scale"):
        raise errors.BadRequest(f"the scale subresource takes a Scale, not a {kind}")
    spec = scale.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise _invalid(current, f"Invalid value: {replicas!r}: must be an integer")
    if replicas < 0:
        raise _invalid(current, f"Invalid value: {replicas}: must be greater than or equal to 0")
    meta = scale.get("metadata") or {}
    version = meta.get("resourceVersion", "") if isinstance(meta, dict) else ""
    return replicas, version if isinstance(version, str) else ""


def _invalid(current: Scalable, detail: str) -> errors.Invalid:
    name = current.metadata.name
    violation = errors.FieldViolation("spec.replicas", detail)
    return errors.Invalid(f'Scale.autoscaling "{name}" is invalid: {violation}',
                          metadata={"kind": "Scale", "name": name}, violations=[violation])


def patched_scale(kind: str, current: Scalable, body: Any) -> dict[str, Any]:
    live = scale_of(current)
    if kind == "json":
        return patches.json_patch(live, body)
    if kind == "merge":
        return patches.merge_patch(live, body)
    if kind == "strategic":
        return patches.strategic_merge_patch(live, body)
    raise errors.BadRequest("the scale subresource takes JSON, merge or strategic merge patches")

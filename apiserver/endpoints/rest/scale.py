"""The `scale` subresource over REST (apiserver.registry.scale makes the Scale): a PUT's
body read, a PATCH applied to the current Scale (what `kubectl scale` and autoscalers
send)."""

from __future__ import annotations

from typing import Any

from apiserver.registry.scale import Scales, scale_of
from kubeling import errors, patches

__all__ = ["scale_of", "replicas_from", "patched_scale", "Scales"]


def replicas_from(scale: Any, current: Any) -> tuple[int, str]:
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


def _invalid(current: Any, detail: str) -> errors.Invalid:
    name = current.metadata.name
    violation = errors.FieldViolation("spec.replicas", detail)
    return errors.Invalid(f'Scale.autoscaling "{name}" is invalid: {violation}',
                          metadata={"kind": "Scale", "name": name}, violations=[violation])


def patched_scale(kind: str, live: dict[str, Any], body: Any) -> dict[str, Any]:
    if kind == "json":
        return patches.json_patch(live, body)
    if kind == "merge":
        return patches.merge_patch(live, body)
    if kind == "strategic":
        return patches.strategic_merge_patch(live, body)
    raise errors.BadRequest("the scale subresource takes JSON, merge or strategic merge patches")

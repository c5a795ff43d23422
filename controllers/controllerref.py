"""Owners and the objects they control, as upstream's controller_ref_manager: a controller
claims the objects its selector matches (adopting orphans, releasing those that stopped
matching), never one another controller owns; and the pod facts controllers count by
(active, ready, available)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kubeling import errors
from kubeling.client import ResourceClient
from kubeling.selectors import LabelSelector
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["drop_owner", "controller_of", "controller_ref", "claim", "is_active", "is_ready", "is_available",
           "ready_since", "update_with_retry"]

log = logging.getLogger(__name__)


def controller_of(obj: Any) -> meta_pb2.OwnerReference | None:
    return next((r for r in obj.metadata.ownerReferences if r.controller), None)


def controller_ref(owner: Any, api_version: str, kind: str) -> meta_pb2.OwnerReference:
    return meta_pb2.OwnerReference(apiVersion=api_version, kind=kind, name=owner.metadata.name,
                                   uid=owner.metadata.uid, controller=True, blockOwnerDeletion=True)


def drop_owner(obj: Any, uid: str) -> bool:
    """Remove the reference to owner `uid`; whether there was one."""
    refs = obj.metadata.ownerReferences
    kept = [r for r in refs if r.uid != uid]
    if len(kept) == len(refs):
        return False
    del refs[:]
    refs.extend(kept)
    return True


def is_active(pod: core_pb2.Pod) -> bool:
    """upstream's IsPodActive: not finished and not being deleted."""
    return pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.HasField("deletionTimestamp")


def _ready_condition(pod: core_pb2.Pod) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == "Ready"), None)


def is_ready(pod: core_pb2.Pod) -> bool:
    c = _ready_condition(pod)
    return c is not None and c.status == "True"


def ready_since(pod: core_pb2.Pod) -> float:
    c = _ready_condition(pod)
    return c.lastTransitionTime.seconds if c is not None else 0.0


def is_available(pod: core_pb2.Pod, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least minReadySeconds (upstream's IsPodAvailable)."""
    if not is_ready(pod):
        return False
    return min_ready_seconds == 0 or ready_since(pod) + min_ready_seconds <= now


async def update_with_retry(resource: ResourceClient[Any], obj: Any, change: Callable[[Any], bool]) -> Any | None:
    """Apply `change` (which says whether it changed anything) to the object and write it,
    re-reading it on conflicts; None when the object is gone."""
    current = obj
    for _ in range(5):
        copy = type(current)()
        copy.CopyFrom(current)
        if not change(copy):
            return current
        try:
            return await resource.update(copy)
        except errors.Conflict:
            pass
        except errors.NotFound:
            return None
        try:
            current = await resource.get(obj.metadata.name, obj.metadata.namespace)
        except errors.NotFound:
            return None
    raise errors.Conflict(f"{resource.kind} {obj.metadata.name}: kept changing while it was updated")


async def claim(resource: ResourceClient[Any], owner: Any, api_version: str, kind: str, selector: LabelSelector,
                candidates: Sequence[Any], *, can_adopt: bool) -> list[Any]:
    """The candidates `owner` controls after adopting matching orphans and releasing
    what it owns but no longer selects."""
    uid = owner.metadata.uid
    claimed = []
    for obj in candidates:
        ref = controller_of(obj)
        matches = selector.matches(obj.metadata.labels)
        if ref is not None and ref.uid != uid:
            continue  # another controller's
        if ref is not None:
            if matches:
                claimed.append(obj)
                continue
            if owner.metadata.HasField("deletionTimestamp"):
                continue  # upstream: a controller being deleted does not release

            await update_with_retry(resource, obj, lambda o: drop_owner(o, uid))
            log.info("%s %s/%s: released %s %s (no longer matches)", kind, owner.metadata.namespace,
                     owner.metadata.name, resource.kind, obj.metadata.name)
            continue
        if not matches or not can_adopt or owner.metadata.HasField("deletionTimestamp") \
                or obj.metadata.HasField("deletionTimestamp"):
            continue

        def adopt(o: Any) -> bool:
            if controller_of(o) is not None:
                return False
            o.metadata.ownerReferences.append(controller_ref(owner, api_version, kind))
            return True
        adopted = await update_with_retry(resource, obj, adopt)
        if adopted is not None:
            ref = controller_of(adopted)
            if ref is not None and ref.uid == uid:
                log.info("%s %s/%s: adopted %s %s", kind, owner.metadata.namespace, owner.metadata.name,
                         resource.kind, obj.metadata.name)
                claimed.append(adopted)
    return claimed

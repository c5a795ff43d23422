"""pods/binding: assign a pod to a node, once."""

from __future__ import annotations

from apiserver.registry.generic.store import Registry
from apiserver.registry.generic.strategy import now
from apiserver.storage.etcd import StaleRevision
from kubeling import errors, names
from protos.kubeling.v1 import core_pb2

__all__ = ["bind"]


async def bind(pods: Registry[core_pb2.Pod], binding: core_pb2.Binding) -> core_pb2.Pod:
    """Set spec.nodeName (only when empty) and the PodScheduled condition, as upstream's
    BindingREST.assignPod: a pod is never bound twice, and never while being deleted."""
    meta, target = binding.metadata, binding.target
    violations = []
    if not meta.name:
        violations.append(errors.FieldViolation("metadata.name", "Required value"))
    if not target.name:
        violations.append(errors.FieldViolation("target.name", "Required value"))
    elif names.dns1123_subdomain(target.name):
        violations.append(errors.FieldViolation("target.name",
                                                f"Invalid value: {target.name!r}: not a valid node name"))
    if target.kind not in ("", "Node"):
        violations.append(errors.FieldViolation("target.kind",
                                                f"Unsupported value: {target.kind!r}: supported values: \"Node\""))
    if violations:
        raise errors.Invalid(f'Binding "{meta.name}" is invalid: ' + ", ".join(map(str, violations)),
                             violations=violations)
    namespace = meta.namespace or "default"
    key = pods.key(namespace, meta.name)
    state = pods.cached_for_update(key)  # one etcd call when the cache is current (store.py)
    for _ in range(20):
        if state is None:
            state = await pods.current_for_update(key, meta.name)
        pod, revision, fresh = state
        try:
            _check_assignable(pods, pod, binding)
        except errors.Conflict:
            if fresh:
                raise
            state = None  # the cache's copy may be old: ask etcd before refusing
            continue
        pod.spec.nodeName = target.name
        for k, v in meta.annotations.items():
            pod.metadata.annotations[k] = v
        _set_scheduled(pod)
        try:
            rev = await pods.storage.update(key, pods.encode(pod), revision)
        except StaleRevision as stale:
            state = pods.refused_for_update(stale, meta.name)  # someone else may have bound it meanwhile
            continue
        pod.metadata.resourceVersion = str(rev)
        return pod
    raise pods._conflict(meta.name, "too many concurrent writers; try again")


def _check_assignable(pods: Registry[core_pb2.Pod], pod: core_pb2.Pod, binding: core_pb2.Binding) -> None:
    meta, name = binding.metadata, binding.metadata.name
    if meta.uid and meta.uid != pod.metadata.uid:
        raise pods._conflict(name, f"Precondition failed: UID in precondition: {meta.uid}, "
                                   f"UID in object meta: {pod.metadata.uid}")
    if meta.resourceVersion and meta.resourceVersion != pod.metadata.resourceVersion:
        raise pods._conflict(name)
    if pod.metadata.HasField("deletionTimestamp"):
        raise pods._conflict(name, f"pod {name} is being deleted, cannot be assigned to a host")
    if pod.spec.nodeName:
        raise pods._conflict(name, f"pod {name} is already assigned to node {pod.spec.nodeName!r}")


def _set_scheduled(pod: core_pb2.Pod) -> None:
    for cond in pod.status.conditions:
        if cond.type == "PodScheduled":
            if cond.status != "True":
                cond.status = "True"
                cond.lastTransitionTime.CopyFrom(now())
            cond.reason = ""
            cond.message = ""
            return
    pod.status.conditions.add(type="PodScheduled", status="True", lastTransitionTime=now())

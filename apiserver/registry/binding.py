"""pods/binding: assign a pod to a node, once."""

from __future__ import annotations

from apiserver.registry.store import Registry
from apiserver.registry.strategy import now
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
    for _ in range(20):
        kv, _ = await pods.storage.get(key)
        if kv is None:
            raise pods._not_found(meta.name)
        pod = pods.decode(kv)
        if meta.uid and meta.uid != pod.metadata.uid:
            raise pods._conflict(meta.name, f"Precondition failed: UID in precondition: {meta.uid}, "
                                            f"UID in object meta: {pod.metadata.uid}")
        if meta.resourceVersion and meta.resourceVersion != pod.metadata.resourceVersion:
            raise pods._conflict(meta.name)
        if pod.metadata.HasField("deletionTimestamp"):
            raise pods._conflict(meta.name, f"pod {meta.name} is being deleted, cannot be assigned to a host")
        if pod.spec.nodeName:
            raise pods._conflict(meta.name, f"pod {meta.name} is already assigned to node {pod.spec.nodeName!r}")
        pod.spec.nodeName = target.name
        for k, v in meta.annotations.items():
            pod.metadata.annotations[k] = v
        _set_scheduled(pod)
        try:
            rev = await pods.storage.update(key, pods.encode(pod), kv.mod_revision)
        except StaleRevision:
            continue  # re-read: someone else may have bound it meanwhile
        pod.metadata.resourceVersion = str(rev)
        return pod
    raise pods._conflict(meta.name, "too many concurrent writers; try again")


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

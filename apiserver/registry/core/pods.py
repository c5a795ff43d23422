"""Pods: defaults, validation and deletion as kube-apiserver's pod strategy."""

from __future__ import annotations

from typing import Any, ClassVar

from apiserver.registry.generic.strategy import DeletePlan, Strategy
from apiserver.validation import Checker
from apiserver.validation.pods import (
    as_container,
    qos_class,
    validate_ephemeral_update,
    validate_pod,
    validate_pod_resize,
    validate_pod_status,
    validate_pod_update,
)
from kubeling import scheme
from kubeling.quantity import canonical
from kubeling.telemetry import mark_pod_trace
from protos.kubeling.v1 import core_pb2

__all__ = ["PodStrategy", "default_pod_spec", "canonicalize_resources"]

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_GRACE_SECONDS = 30


class PodStrategy(Strategy[core_pb2.Pod]):
    resource = scheme.PODS
    index_field: ClassVar[str | None] = "spec.nodeName"

    def fields(self, obj: core_pb2.Pod) -> dict[str, str]:
        out = super().fields(obj)
        spec, status = obj.spec, obj.status
        out.update({
            "spec.nodeName": spec.nodeName,
            "spec.restartPolicy": spec.restartPolicy,
            "spec.schedulerName": spec.schedulerName,
            "spec.serviceAccountName": spec.serviceAccountName,
            "spec.hostNetwork": "true" if spec.hostNetwork else "false",
            "status.phase": status.phase,
            "status.podIP": status.podIP,
            "status.nominatedNodeName": status.nominatedNodeName,
        })
        return out

    # ---------------------------------------------------------------- create

    def prepare_for_create(self, obj: core_pb2.Pod) -> None:
        # Every create path (gRPC, REST, server-side apply) starts the pod's trace here.
        mark_pod_trace(obj)
        obj.status.Clear()
        obj.status.phase = "Pending"
        obj.status.qosClass = qos_class(obj.spec)

    def default(self, obj: core_pb2.Pod) -> None:
        default_pod_spec(obj.spec)

    def validate(self, obj: core_pb2.Pod, check: Checker) -> None:
        validate_pod(obj.spec, check)
        canonicalize_resources(obj.spec)

    # ---------------------------------------------------------------- update

    def prepare_for_update(self, new: core_pb2.Pod, old: core_pb2.Pod) -> None:
        super().prepare_for_update(new, old)
        # Only pods/ephemeralcontainers changes them (as upstream's podStrategy).
        del new.spec.ephemeralContainers[:]
        new.spec.ephemeralContainers.extend(old.spec.ephemeralContainers)

    def validate_update(self, new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
        validate_pod_update(new, old, check)

    def validate_create(self, obj: core_pb2.Pod, check: Checker) -> None:
        if obj.spec.ephemeralContainers:
            check.add("spec.ephemeralContainers", "Forbidden: cannot be set on create")

    def prepare_for_ephemeral_update(self, new: core_pb2.Pod, old: core_pb2.Pod) -> None:
        """The stored pod with the requested ephemeral containers (the new ones defaulted;
        validation then refuses a change to an existing one)."""
        wanted = list(new.spec.ephemeralContainers)
        new.CopyFrom(old)
        del new.spec.ephemeralContainers[:]
        new.spec.ephemeralContainers.extend(wanted)
        for ec in new.spec.ephemeralContainers[len(old.spec.ephemeralContainers):]:
            c = as_container(ec)
            _default_container(c)
            ec.terminationMessagePath, ec.imagePullPolicy = c.terminationMessagePath, c.imagePullPolicy
            ec.terminationMessagePolicy = c.terminationMessagePolicy

    def validate_ephemeral_update(self, new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
        validate_ephemeral_update(new, old, check)

    def prepare_for_resize(self, new: core_pb2.Pod, old: core_pb2.Pod) -> None:
        """pods/resize: the stored pod with the containers' resources asked for (by name);
        nothing else of the new object counts, as upstream's podResizeStrategy."""
        wanted = {c.name: c.resources for c in [*new.spec.containers, *new.spec.initContainers]}
        new.CopyFrom(old)
        for c in [*new.spec.containers, *new.spec.initContainers]:
            if c.name in wanted:
                c.resources.CopyFrom(wanted[c.name])
                for name, value in c.resources.limits.items():  # limits without requests: requests
                    c.resources.requests.setdefault(name, value)
        canonicalize_resources(new.spec)

    def validate_resize(self, new: core_pb2.Pod, old: core_pb2.Pod, check: Checker) -> None:
        validate_pod_resize(new, old, check)

    def prepare_for_status_update(self, new: core_pb2.Pod, old: core_pb2.Pod) -> None:
        """As upstream's podStatusStrategy: a status write may also change labels and
        annotations (the scheduler's recorded results go with its failure status), nothing
        else of the spec or metadata."""
        labels, annotations = dict(new.metadata.labels), dict(new.metadata.annotations)
        super().prepare_for_status_update(new, old)
        new.metadata.labels.clear()
        new.metadata.labels.update(labels)
        new.metadata.annotations.clear()
        new.metadata.annotations.update(annotations)

    def validate_status(self, new: core_pb2.Pod, check: Checker) -> None:
        check.labels("metadata.labels", new.metadata.labels)
        check.annotations("metadata.annotations", new.metadata.annotations)
        validate_pod_status(new, check)

    # ---------------------------------------------------------------- delete

    def delete_plan(self, obj: core_pb2.Pod, grace_seconds: int | None) -> DeletePlan:
        """Upstream's pod CheckGracefulDeleteStrategy: pods not on a node, or already
        finished, go at once; others wait for their kubelet (grace 0 forces)."""
        if grace_seconds is None:
            grace_seconds = obj.spec.terminationGracePeriodSeconds if obj.spec.HasField(
                "terminationGracePeriodSeconds") else DEFAULT_GRACE_SECONDS
        if not obj.spec.nodeName or obj.status.phase in ("Succeeded", "Failed") or grace_seconds <= 0:
            return DeletePlan(False)
        return DeletePlan(True, grace_seconds)


# -------------------------------------------------------------------- helpers

def default_pod_spec(spec: core_pb2.PodSpec) -> None:
    """Upstream's SetDefaults_PodSpec and its containers' (pods and pod templates alike).
    `priority` and `preemptionPolicy` come from the Priority admission plugin, as upstream."""
    spec.restartPolicy = spec.restartPolicy or "Always"
    spec.schedulerName = spec.schedulerName or DEFAULT_SCHEDULER
    spec.dnsPolicy = spec.dnsPolicy or "ClusterFirst"
    if not spec.HasField("terminationGracePeriodSeconds"):
        spec.terminationGracePeriodSeconds = DEFAULT_GRACE_SECONDS
    for c in list(spec.initContainers) + list(spec.containers):
        _default_container(c)
    for t in spec.tolerations:
        t.operator = t.operator or "Equal"
    for v in spec.volumes:  # a field selector names its version: v1 unless said (SetDefaults_ObjectFieldSelector)
        items = list(v.downwardAPI.items) + [i for s in v.projected.sources for i in s.downwardAPI.items]
        for item in items:
            if item.HasField("fieldRef"):
                item.fieldRef.apiVersion = item.fieldRef.apiVersion or "v1"
    for tsc in spec.topologySpreadConstraints:
        if not tsc.HasField("nodeAffinityPolicy"):
            tsc.nodeAffinityPolicy = "Honor"
        if not tsc.HasField("nodeTaintsPolicy"):
            tsc.nodeTaintsPolicy = "Ignore"


def _default_container(c: core_pb2.Container) -> None:
    for p in c.ports:
        p.protocol = p.protocol or "TCP"
    for e in c.env:
        if e.valueFrom.HasField("fieldRef"):
            e.valueFrom.fieldRef.apiVersion = e.valueFrom.fieldRef.apiVersion or "v1"
    if not c.imagePullPolicy:
        tag = c.image.rsplit("/", 1)[-1]
        untagged_or_latest = (":" not in tag or tag.endswith(":latest")) and "@" not in tag
        c.imagePullPolicy = "Always" if untagged_or_latest else "IfNotPresent"
    c.terminationMessagePath = c.terminationMessagePath or "/dev/termination-log"
    c.terminationMessagePolicy = c.terminationMessagePolicy or "File"
    # Limits without requests: the requests are the limits (upstream defaulting).
    for name, value in c.resources.limits.items():
        if name not in c.resources.requests:
            c.resources.requests[name] = value
    for probe in (c.livenessProbe, c.readinessProbe, c.startupProbe):
        if probe.ByteSize() == 0:
            continue
        probe.timeoutSeconds = probe.timeoutSeconds or 1
        probe.periodSeconds = probe.periodSeconds or 10
        probe.successThreshold = probe.successThreshold or 1
        probe.failureThreshold = probe.failureThreshold or 3
        if probe.HasField("httpGet"):
            probe.httpGet.path = probe.httpGet.path or "/"
            probe.httpGet.scheme = probe.httpGet.scheme or "HTTP"
    for hook in (c.lifecycle.postStart, c.lifecycle.preStop):
        if hook.HasField("httpGet"):
            hook.httpGet.path = hook.httpGet.path or "/"
            hook.httpGet.scheme = hook.httpGet.scheme or "HTTP"


def canonicalize_resources(spec: core_pb2.PodSpec) -> None:
    """Store quantities in canonical form (`1.5` -> `1500m`), as upstream's serialization does."""
    for c in list(spec.containers) + list(spec.initContainers):
        for rl in (c.resources.requests, c.resources.limits):
            _canonicalize(rl)
    _canonicalize(spec.overhead)


def _canonicalize(resources: Any) -> None:
    for name, text in list(resources.items()):
        try:
            resources[name] = canonical(text)
        except ValueError:
            pass  # reported by validation



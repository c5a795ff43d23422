"""What each object uses of a quota, as upstream's evaluators measure it
(pkg/quota/v1/evaluator/core and k8s.io/apiserver/pkg/quota/v1/generic): shared by the
ResourceQuota admission plugin, which charges a write before it is stored, and the quota
controller, which counts what a namespace holds.

Every resource has an evaluator: pods (compute resources, by scope), services (node ports,
load balancers), persistent volume claims (storage, by class) and, for everything else,
the object count `count/<resource>.<group>` (and the legacy names of the core kinds:
`configmaps`, `secrets`, ...).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubeling.podresources import pod_limits, pod_requests, qos_class
from kubeling.quantity import Quantity
from kubeling.quota.resources import ResourceList, add, parse
from protos.kubeling.v1 import core_pb2

__all__ = ["Evaluator", "ScopeRequirement", "evaluator_for", "group_resource_of", "scope_requirements",
           "quota_matches", "CREATE", "UPDATE", "STANDARD_SCOPES", "POD_RESOURCES", "object_count_name",
           "is_quota_resource_name", "pod_counts"]

CREATE, UPDATE = "CREATE", "UPDATE"
STANDARD_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                   "CrossNamespacePodAffinity")
# what a pod's compute usage is counted as (besides hugepages and extended resources)
POD_RESOURCES = ("pods", "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                 "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage")
_SERVICE_RESOURCES = ("services", "count/services", "services.loadbalancers", "services.nodeports")
_CLAIM_RESOURCES = ("persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage")
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
# The core kinds whose plain plural is an object count of its own (upstream's legacy names).
_LEGACY_COUNTS = ("configmaps", "secrets", "replicationcontrollers", "resourcequotas")
# Quotas on these make every container of a pod say how much it asks (upstream's
# backward-compatible "mistake", kept).
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_ONE = Quantity.from_int(1)


def object_count_name(group_resource: str) -> str:
    return f"count/{group_resource}"


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    """A resource of someone's own (example.com/dongle): quota tracks only its requests."""
    return not _is_native(name) and not name.startswith("requests.")


def is_quota_resource_name(name: str) -> bool:
    """What a quota may limit (upstream's IsStandardQuotaResourceName, plus object counts
    and qualified names of extended resources)."""
    if name.startswith("count/") or "/" in name:
        return True
    return name in POD_RESOURCES or name in _SERVICE_RESOURCES or name in _CLAIM_RESOURCES or \
        name in _LEGACY_COUNTS or name.startswith(("hugepages-", "requests.hugepages-"))


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    """One of a quota's scopes (a plain scope is its name with Exists)."""

    scope: str
    operator: str = "Exists"
    values: tuple[str, ...] = ()


def scope_requirements(quota: core_pb2.ResourceQuota) -> list[ScopeRequirement]:
    out = [ScopeRequirement(scope) for scope in quota.spec.scopes]
    out += [ScopeRequirement(r.scopeName, r.operator, tuple(r.values))
            for r in quota.spec.scopeSelector.matchExpressions]
    return out


class Evaluator(Protocol):
    group_resource: str

    def handles(self, operation: str, subresource: str) -> bool:
        """Whether a write of this kind can change what quota counts."""

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        """Of a quota's resource names, those this evaluator counts."""

    def matches_scope(self, req: ScopeRequirement, obj: Any) -> bool: ...

    def usage(self, obj: Any, now: float | None = None) -> ResourceList: ...

    def constraints(self, required: Sequence[str], obj: Any) -> str:
        """Why obj cannot be charged against a quota tracking `required` ("": it can)."""


@dataclass
class _ObjectCount:
    """Any resource: the object count, created objects only (upstream's generic evaluator)."""

    group_resource: str

    @property
    def _names(self) -> tuple[str, ...]:
        legacy = (self.group_resource,) if self.group_resource in _LEGACY_COUNTS else ()
        return (object_count_name(self.group_resource),) + legacy

    def handles(self, operation: str, subresource: str) -> bool:
        return operation == CREATE and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in self._names]

    def matches_scope(self, req: ScopeRequirement, obj: Any) -> bool:
        return False  # scopes are the pods' (and a scoped quota counts nothing else)

    def usage(self, obj: Any, now: float | None = None) -> ResourceList:
        return {name: _ONE for name in self._names}

    def constraints(self, required: Sequence[str], obj: Any) -> str:
        return ""


def _compute(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """A pod's (or a container's) compute usage by quota's names (podComputeUsageHelper)."""
    out: ResourceList = {"pods": _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = q
        elif _is_extended(name):
            out[f"requests.{name}"] = q
    return out


def pod_counts(pod: core_pb2.Pod, now: float) -> bool:
    """Whether a pod's compute resources are charged: not when it has finished, nor once
    its deletion's grace period has run out (upstream's QuotaV1Pod)."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    meta = pod.metadata
    if meta.HasField("deletionTimestamp") and meta.HasField("deletionGracePeriodSeconds"):
        if now > meta.deletionTimestamp.ToNanoseconds() / 1e9 + meta.deletionGracePeriodSeconds:
            return False
    return True


class _Pods:
    group_resource = "pods"

    def handles(self, operation: str, subresource: str) -> bool:
        return (operation == CREATE and not subresource) or (operation == UPDATE and subresource == "resize")

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in POD_RESOURCES or n.startswith(("hugepages-", "requests.hugepages-"))
                or (not _is_native(n) and n.startswith("requests."))]

    def matches_scope(self, req: ScopeRequirement, obj: Any) -> bool:
        spec: core_pb2.PodSpec = obj.spec
        if req.scope in ("Terminating", "NotTerminating"):
            terminating = spec.HasField("activeDeadlineSeconds") and spec.activeDeadlineSeconds >= 0
            return terminating == (req.scope == "Terminating")
        if req.scope in ("BestEffort", "NotBestEffort"):
            return (qos_class(spec) == "BestEffort") == (req.scope == "BestEffort")
        if req.scope == "PriorityClass":
            name = spec.priorityClassName
            if req.operator == "Exists":
                return bool(name)
            if req.operator == "DoesNotExist":
                return not name
            if req.operator == "In":
                return bool(name) and name in req.values
            if req.operator == "NotIn":
                return not name or name not in req.values
            return False
        if req.scope == "CrossNamespacePodAffinity":
            affinity = spec.affinity
            terms = [*affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution,
                     *(w.podAffinityTerm for w in affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution),
                     *affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution,
                     *(w.podAffinityTerm
                       for w in affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution)]
            return any(t.namespaces or t.HasField("namespaceSelector") for t in terms)
        return False

    def usage(self, obj: Any, now: float | None = None) -> ResourceList:
        pod: core_pb2.Pod = obj
        out: ResourceList = {"count/pods": _ONE}  # every pod stored, whatever its state
        if not pod_counts(pod, time.time() if now is None else now):
            return out
        return add(out, _compute(pod_requests(pod.spec), pod_limits(pod.spec)))

    def constraints(self, required: Sequence[str], obj: Any) -> str:
        pod: core_pb2.Pod = obj
        wanted = set(required) & _MUST_SPECIFY
        if not wanted:
            return ""
        missing: dict[str, list[str]] = {}
        for c in [*pod.spec.containers, *pod.spec.initContainers]:
            have = _compute(parse(c.resources.requests), parse(c.resources.limits))
            for name in sorted(wanted - have.keys()):
                missing.setdefault(name, []).append(c.name)
        if not missing:
            return ""
        return "must specify " + "; ".join(f"{name} for: {','.join(sorted(set(containers)))}"
                                           for name, containers in sorted(missing.items()))


class _Services:
    group_resource = "services"

    def handles(self, operation: str, subresource: str) -> bool:
        return operation in (CREATE, UPDATE) and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in _SERVICE_RESOURCES]

    def matches_scope(self, req: ScopeRequirement, obj: Any) -> bool:
        return False

    def usage(self, obj: Any, now: float | None = None) -> ResourceList:
        svc: core_pb2.Service = obj
        out: ResourceList = {"services": _ONE, "count/services": _ONE}
        ports = len(svc.spec.ports)
        if svc.spec.type == "NodePort":
            out["services.nodeports"] = Quantity.from_int(ports)
        elif svc.spec.type == "LoadBalancer":
            out["services.loadbalancers"] = _ONE
            allocate = not svc.spec.HasField("allocateLoadBalancerNodePorts") or svc.spec.allocateLoadBalancerNodePorts
            out["services.nodeports"] = Quantity.from_int(
                ports if allocate else sum(1 for p in svc.spec.ports if p.nodePort))
        return out

    def constraints(self, required: Sequence[str], obj: Any) -> str:
        return ""


class _Claims:
    group_resource = "persistentvolumeclaims"

    def handles(self, operation: str, subresource: str) -> bool:
        return operation in (CREATE, UPDATE) and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in _CLAIM_RESOURCES or (
            _STORAGE_CLASS_SUFFIX in n and n.endswith(("/requests.storage", "/persistentvolumeclaims")))]

    def matches_scope(self, req: ScopeRequirement, obj: Any) -> bool:
        return False

    def usage(self, obj: Any, now: float | None = None) -> ResourceList:
        claim: core_pb2.PersistentVolumeClaim = obj
        out: ResourceList = {"persistentvolumeclaims": _ONE, "count/persistentvolumeclaims": _ONE}
        storage = parse(claim.spec.resources.requests).get("storage")
        allocated = parse(claim.status.allocatedResources).get("storage")
        if allocated is not None and (storage is None or storage < allocated):
            storage = allocated  # a resize that has begun is charged at its larger size
        cls = claim.spec.storageClassName if claim.spec.HasField("storageClassName") else ""
        if cls:
            out[f"{cls}{_STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = _ONE
        if storage is not None:
            out["requests.storage"] = storage
            if cls:
                out[f"{cls}{_STORAGE_CLASS_SUFFIX}requests.storage"] = storage
        return out

    def constraints(self, required: Sequence[str], obj: Any) -> str:
        return ""


_SPECIFIC: dict[str, Evaluator] = {e.group_resource: e for e in (_Pods(), _Services(), _Claims())}


def evaluator_for(group_resource: str) -> Evaluator:
    """The evaluator of a resource (plural.group, or the plural for the core group)."""
    return _SPECIFIC.get(group_resource) or _ObjectCount(group_resource)


def group_resource_of(name: str) -> str:
    """The resource whose objects a quota's resource name counts."""
    if name.startswith("count/"):
        return name[len("count/"):]
    for evaluator in _SPECIFIC.values():
        if evaluator.matching_resources([name]):
            return evaluator.group_resource
    return name if name in _LEGACY_COUNTS else ""


def quota_matches(quota: core_pb2.ResourceQuota, hard: Iterable[str], evaluator: Evaluator, obj: Any) -> bool:
    """Whether the quota counts obj: it limits something the evaluator counts, and obj is
    in every one of its scopes (upstream's generic.Matches)."""
    if not evaluator.matching_resources(hard):
        return False
    return all(evaluator.matches_scope(req, obj) for req in scope_requirements(quota))

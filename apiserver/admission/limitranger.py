"""The LimitRanger admission plugin, as upstream's (plugin/pkg/admission/limitranger): a
new pod's containers get the requests and limits their namespace's LimitRanges default
(noted in the `kubernetes.io/limit-ranger` annotation), then every container, the pod as a
whole and every claim is held to the ranges' min, max and maxLimitRequestRatio. Pods are
judged when made only: their containers' resources never change by an update."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from apiserver.admission.chain import CREATE, UPDATE, AdmissionAttributes, forbidden
from kubeling.podresources import pod_limits, pod_requests
from kubeling.quantity import Quantity
from kubeling.quota.resources import parse
from protos.kubeling.v1 import core_pb2

__all__ = ["LimitRanger", "LIMIT_RANGER_ANNOTATION"]

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"

LimitRanges = Callable[[str], Awaitable[list[core_pb2.LimitRange]]]


def _min(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
         limits: Mapping[str, Quantity]) -> str:
    req, lim = requests.get(name), limits.get(name)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    if req < enforced:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and lim < enforced:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
    return ""


def _max(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
         limits: Mapping[str, Quantity]) -> str:
    req, lim = requests.get(name), limits.get(name)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    if enforced < lim:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and enforced < req:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return ""


def _max_request(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity]) -> str:
    req = requests.get(name)
    if req is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No request is specified"
    if enforced < req:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return ""


def _ratio(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
           limits: Mapping[str, Quantity]) -> str:
    req, lim = requests.get(name), limits.get(name)
    if req is None or req.is_zero():
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or "
                "request is 0")
    if lim is None or lim.is_zero():
        return f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
    observed = lim.value / req.value
    if observed > enforced.value:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {float(observed):f}"
    return ""


def _bounds(kind: str, item: core_pb2.LimitRangeItem, requests: Mapping[str, Quantity],
            limits: Mapping[str, Quantity]) -> list[str]:
    found = [_min(kind, name, q, requests, limits) for name, q in sorted(parse(item.min).items())]
    found += [_max(kind, name, q, requests, limits) for name, q in sorted(parse(item.max).items())]
    found += [_ratio(kind, name, q, requests, limits)
              for name, q in sorted(parse(item.maxLimitRequestRatio).items())]
    return [e for e in found if e]


def _aggregate(errors: list[str]) -> str:
    """Upstream's utilerrors.NewAggregate: one error as it is, several in brackets."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _set_defaults(container: core_pb2.Container, requests: Mapping[str, str], limits: Mapping[str, str],
                  what: str) -> list[str]:
    set_limits = [name for name in limits if name not in container.resources.limits]
    for name in set_limits:
        container.resources.limits[name] = limits[name]
    set_requests = [name for name in requests if name not in container.resources.requests]
    for name in set_requests:
        container.resources.requests[name] = requests[name]
    notes = []
    if set_requests:
        notes.append(f"{', '.join(sorted(set_requests))} request for {what} {container.name}")
    if set_limits:
        notes.append(f"{', '.join(sorted(set_limits))} limit for {what} {container.name}")
    return notes


@dataclass
class LimitRanger:
    limit_ranges: LimitRanges  # a namespace's, from the watch cache
    resources: frozenset[str] = frozenset({"pods", "persistentvolumeclaims"})

    def _applies(self, attrs: AdmissionAttributes) -> bool:
        if attrs.subresource or not attrs.namespace:
            return False
        if attrs.resource == "pods":
            return attrs.operation == CREATE
        return attrs.operation in (CREATE, UPDATE)

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.resource != "pods" or not self._applies(attrs):
            return
        ranges = await self.limit_ranges(attrs.namespace)
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for lr in ranges:
            for item in lr.spec.limits:
                if item.type == "Container":
                    requests.update(item.defaultRequest)
                    limits.update(item.default)
        if not requests and not limits:
            return
        notes: list[str] = []
        for c in pod.spec.containers:
            notes += _set_defaults(c, requests, limits, "container")
        for c in pod.spec.initContainers:
            notes += _set_defaults(c, requests, limits, "init container")
        if notes:
            pod.metadata.annotations[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if not self._applies(attrs):
            return
        ranges = await self.limit_ranges(attrs.namespace)
        if not ranges:
            return
        errors: list[str] = []
        obj = attrs.obj
        for lr in ranges:
            for item in lr.spec.limits:
                if isinstance(obj, core_pb2.Pod):
                    errors += self._pod_errors(item, obj)
                elif isinstance(obj, core_pb2.PersistentVolumeClaim) and item.type == "PersistentVolumeClaim":
                    requests = parse(obj.spec.resources.requests)
                    errors += [e for e in (_min("PersistentVolumeClaim", n, q, requests, {})
                                           for n, q in sorted(parse(item.min).items())) if e]
                    errors += [e for e in (_max_request("PersistentVolumeClaim", n, q, requests)
                                           for n, q in sorted(parse(item.max).items())) if e]
        if errors:
            raise forbidden(attrs, attrs.resource, _aggregate(errors))

    @staticmethod
    def _pod_errors(item: core_pb2.LimitRangeItem, pod: core_pb2.Pod) -> list[str]:
        if item.type == "Container":
            errors: list[str] = []
            for c in [*pod.spec.containers, *pod.spec.initContainers]:
                errors += _bounds("Container", item, parse(c.resources.requests), parse(c.resources.limits))
            return errors
        if item.type == "Pod":
            return _bounds("Pod", item, pod_requests(pod.spec), pod_limits(pod.spec))
        return []

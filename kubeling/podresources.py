"""What a pod asks for, as upstream's helpers reckon it (k8s.io/component-helpers'
resource.PodRequests/PodLimits and the qos helper): shared by the apiserver (quota,
LimitRanger, validation) and the kubelet, so that both judge a pod alike.

Amounts are Quantities by resource name; a missing name is none asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubeling.quantity import Quantity, parse_quantity
from protos.kubeling.v1 import core_pb2

__all__ = ["ResourceList", "container_amounts", "pod_requests", "pod_limits", "qos_class", "is_sidecar",
           "add", "maximum"]

ResourceList = dict[str, Quantity]


def is_sidecar(container: core_pb2.Container) -> bool:
    """An init container that runs beside the app containers (restartPolicy: Always)."""
    return container.HasField("restartPolicy") and container.restartPolicy == "Always"


def _amount(text: str) -> Quantity | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None  # validation reports it; until then it asks for nothing


def container_amounts(values: Mapping[str, str]) -> ResourceList:
    parsed = {name: _amount(text) for name, text in values.items()}
    return {name: q for name, q in parsed.items() if q is not None}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """The sum, by name (a name in either is in the result), in the first's format."""
    out = dict(a)
    for name, q in b.items():
        mine = out.get(name)
        out[name] = q if mine is None or (mine.is_zero() and not q.is_zero()) else mine + q
    return out


def maximum(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for name, q in b.items():
        mine = out.get(name)
        if mine is None or mine < q:
            out[name] = q
    return out


def _pod_amounts(spec: core_pb2.PodSpec, which: str) -> ResourceList:
    """Upstream's PodRequests/PodLimits: the app containers and the sidecars together, or
    the most any init container needs with the sidecars started before it, whichever is
    more; then the runtime's overhead."""
    def of(c: core_pb2.Container) -> ResourceList:
        return container_amounts(getattr(c.resources, which))

    total: ResourceList = {}
    for c in spec.containers:
        total = add(total, of(c))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in spec.initContainers:
        mine = of(c)
        if is_sidecar(c):
            total = add(total, mine)
            sidecars = add(sidecars, mine)
            mine = sidecars
        else:
            mine = add(mine, sidecars)
        init_peak = maximum(init_peak, mine)
    total = maximum(total, init_peak)
    return add(total, container_amounts(spec.overhead)) if spec.overhead else total


def pod_requests(spec: core_pb2.PodSpec) -> ResourceList:
    return _pod_amounts(spec, "requests")


def pod_limits(spec: core_pb2.PodSpec) -> ResourceList:
    return _pod_amounts(spec, "limits")


_QOS_RESOURCES = ("cpu", "memory")


def qos_class(spec: core_pb2.PodSpec) -> str:
    """Guaranteed, Burstable or BestEffort from every container's cpu and memory (upstream's
    GetPodQOS): none asked for anywhere is BestEffort; limits for both in every container,
    equal to the requests in total, is Guaranteed."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    containers: Iterable[core_pb2.Container] = [*spec.initContainers, *spec.containers]
    for c in containers:
        for source, target in ((c.resources.requests, requests), (c.resources.limits, limits)):
            for name in _QOS_RESOURCES:
                q = _amount(source[name]) if name in source else None
                if q is not None and not q.is_zero():
                    target[name] = target[name] + q if name in target else q
        own = container_amounts(c.resources.limits)
        if any(name not in own or own[name].is_zero() for name in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and len(requests) == len(limits) and \
            all(name in limits and limits[name].value == q.value for name, q in requests.items()):
        return "Guaranteed"
    return "Burstable"

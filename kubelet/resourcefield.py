"""A container's resources as the downward API exposes them (pkg/api/v1/resource's
ExtractResourceValueByContainerNameAndNodeAllocatable): `limits.cpu`, `limits.memory`,
`limits.ephemeral-storage`, `requests.*`; a limit the container does not set is the
node's allocatable; the value divided by the divisor (default 1) and rounded up — CPU
in millicores, so that `divisor: 1m` gives millicores."""

from __future__ import annotations

import math
from collections.abc import Mapping

from kubeling.quantity import QuantityError, parse_quantity
from protos.kubeling.v1 import core_pb2

__all__ = ["resource_field_value", "RESOURCE_FIELDS", "ResourceFieldError"]

RESOURCE_FIELDS = ("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory",
                   "requests.ephemeral-storage")


class ResourceFieldError(ValueError):
    """The selector names no container of the pod, or an unsupported resource."""


def resource_field_value(pod: core_pb2.Pod, default_container: str, selector: core_pb2.ResourceFieldSelector,
                         allocatable: Mapping[str, str]) -> str:
    name = selector.containerName or default_container
    container = next((c for c in [*pod.spec.containers, *pod.spec.initContainers] if c.name == name), None)
    if container is None:
        raise ResourceFieldError(f"container {name!r} is not in the pod")
    if selector.resource not in RESOURCE_FIELDS:
        raise ResourceFieldError(f"unsupported container resource: {selector.resource!r}")
    kind, _, resource = selector.resource.partition(".")
    values = container.resources.limits if kind == "limits" else container.resources.requests
    text = values.get(resource) or (allocatable.get(resource, "0") if kind == "limits" else "0")
    try:
        quantity = parse_quantity(text)
        divisor = parse_quantity(selector.divisor or "1")
    except QuantityError as exc:
        raise ResourceFieldError(str(exc)) from None
    if resource == "cpu":
        return str(math.ceil(quantity.milli_value() / max(1, divisor.milli_value())))
    return str(math.ceil(quantity.int_value() / max(1, divisor.int_value())))

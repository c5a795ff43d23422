"""DefaultIngressClass (upstream's plugin/pkg/admission/network/defaultingressclass): a new
Ingress that names no class (no `spec.ingressClassName`, no legacy
`kubernetes.io/ingress.class` annotation) gets the default IngressClass, the one annotated
`ingressclass.kubernetes.io/is-default-class: "true"`; of several, the newest, as
upstream's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver.admission.chain import CREATE, AdmissionAttributes
from apiserver.registry.networking import is_default_class
from kubeling.dynamic import content_of, set_content
from protos.kubeling.v1 import custom_pb2

__all__ = ["DefaultIngressClass"]

_LEGACY_ANNOTATION = "kubernetes.io/ingress.class"


@dataclass
class DefaultIngressClass:
    classes: Callable[[], Awaitable[list[custom_pb2.CustomResource]]]  # every IngressClass, from the watch cache
    resources: frozenset[str] = frozenset({"ingresses"})

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        ingress = attrs.obj
        assert isinstance(ingress, custom_pb2.CustomResource)
        content = content_of(ingress)
        spec = content.setdefault("spec", {})
        if spec.get("ingressClassName") or _LEGACY_ANNOTATION in ingress.metadata.annotations:
            return
        defaults = [c for c in await self.classes() if is_default_class(c)]
        if not defaults:
            return
        newest = max(defaults, key=lambda c: (c.metadata.creationTimestamp.ToNanoseconds(), c.metadata.name))
        spec["ingressClassName"] = newest.metadata.name
        set_content(ingress, content)

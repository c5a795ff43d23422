"""node.k8s.io/v1 RuntimeClasses, validated as upstream's: the handler a DNS-1123 label and
immutable, the overhead quantities, the scheduling node selector's labels and tolerations."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.pods import validate_toleration
from kubeling import names, scheme
from protos.kubeling.v1 import node_pb2

__all__ = ["STRATEGIES", "RuntimeClassStrategy"]


class RuntimeClassStrategy(Strategy[node_pb2.RuntimeClass]):
    resource = scheme.RUNTIMECLASSES

    def validate(self, obj: node_pb2.RuntimeClass, check: Checker) -> None:
        if check.required("handler", obj.handler):
            check.name("handler", obj.handler, names.dns1123_label)
        for key, text in obj.overhead.podFixed.items():
            check.quantity(f"overhead.podFixed[{key}]", text)
        check.labels("scheduling.nodeSelector", obj.scheduling.nodeSelector)
        for i, toleration in enumerate(obj.scheduling.tolerations):
            validate_toleration(toleration, f"scheduling.tolerations[{i}]", check)

    def validate_update(self, new: node_pb2.RuntimeClass, old: node_pb2.RuntimeClass, check: Checker) -> None:
        if new.handler != old.handler:
            check.invalid("handler", new.handler, "field is immutable")


STRATEGIES = (RuntimeClassStrategy,)

"""Nodes (cluster-scoped)."""

from __future__ import annotations

from typing import ClassVar

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import names, scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["NodeStrategy"]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class NodeStrategy(Strategy[core_pb2.Node]):
    resource = scheme.NODES
    # Every kubelet watches its own Node (metadata.name=<node>): with thousands of them an
    # event goes to its node's watchers only, not past every one (upstream's NodeNameTriggerFunc).
    index_field: ClassVar[str | None] = "metadata.name"

    def fields(self, obj: core_pb2.Node) -> dict[str, str]:
        out = super().fields(obj)
        out["spec.unschedulable"] = "true" if obj.spec.unschedulable else "false"
        return out

    def validate(self, obj: core_pb2.Node, check: Checker) -> None:
        spec = obj.spec
        if spec.podCIDR:
            check.cidr("spec.podCIDR", spec.podCIDR)
        for i, cidr in enumerate(spec.podCIDRs):
            check.cidr(f"spec.podCIDRs[{i}]", cidr)
        if spec.podCIDR and spec.podCIDRs and spec.podCIDRs[0] != spec.podCIDR:
            check.invalid("spec.podCIDRs", list(spec.podCIDRs), "the first entry must match spec.podCIDR")
        seen = set()
        for i, t in enumerate(spec.taints):
            path = f"spec.taints[{i}]"
            if check.required(f"{path}.key", t.key):
                check.name(f"{path}.key", t.key, names.qualified_name)
            if t.value:
                check.name(f"{path}.value", t.value, names.label_value)
            if check.required(f"{path}.effect", t.effect):
                check.unsupported(f"{path}.effect", t.effect, _EFFECTS)
            if (t.key, t.effect) in seen:
                check.add(path, f"Duplicate value: taints must be unique by key and effect pair ({t.key}:{t.effect})")
            seen.add((t.key, t.effect))
        self.validate_status(obj, check)

    def validate_update(self, new: core_pb2.Node, old: core_pb2.Node, check: Checker) -> None:
        if old.spec.podCIDR and new.spec.podCIDR != old.spec.podCIDR:
            check.add("spec.podCIDR", "Forbidden: node updates may not change podCIDR except from \"\" to valid")

    def validate_status(self, new: core_pb2.Node, check: Checker) -> None:
        status = new.status
        canonical: dict[str, str] = {}
        check.resource_list("status.capacity", status.capacity, canonical)
        status.capacity.update(canonical)
        canonical = {}
        check.resource_list("status.allocatable", status.allocatable, canonical)
        status.allocatable.update(canonical)
        for i, cond in enumerate(status.conditions):
            check.required(f"status.conditions[{i}].type", cond.type)
            check.unsupported(f"status.conditions[{i}].status", cond.status, ("True", "False", "Unknown"))
        for i, addr in enumerate(status.addresses):
            check.required(f"status.addresses[{i}].type", addr.type)
            check.required(f"status.addresses[{i}].address", addr.address)

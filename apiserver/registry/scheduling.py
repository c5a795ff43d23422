"""scheduling.k8s.io/v1 PriorityClasses, validated as upstream's: user classes at most
one billion, the `system-` prefix reserved, value and preemptionPolicy immutable; the
two system classes are made by the apiserver at start (`bootstrap_priority_classes`)."""

from __future__ import annotations

import logging

from apiserver.registry.generic.store import Registry
from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from apiserver.validation.pods import SYSTEM_PRIORITY_CLASSES
from kubeling import errors, scheme
from protos.kubeling.v1 import meta_pb2, scheduling_pb2

__all__ = ["STRATEGIES", "PriorityClassStrategy", "bootstrap_priority_classes", "HIGHEST_USER_DEFINABLE_PRIORITY"]

log = logging.getLogger(__name__)

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
_DESCRIPTIONS = {"system-node-critical": "Used for system critical pods that must not be moved from their "
                                         "current node.",
                 "system-cluster-critical": "Used for system critical pods that must run in the cluster, but can "
                                            "be moved to another node if necessary."}


class PriorityClassStrategy(Strategy[scheduling_pb2.PriorityClass]):
    resource = scheme.PRIORITYCLASSES

    def default(self, obj: scheduling_pb2.PriorityClass) -> None:
        if not obj.HasField("preemptionPolicy"):
            obj.preemptionPolicy = "PreemptLowerPriority"

    def validate(self, obj: scheduling_pb2.PriorityClass, check: Checker) -> None:
        name = obj.metadata.name
        system = SYSTEM_PRIORITY_CLASSES.get(name)
        if system is not None:
            if obj.value != system:
                check.invalid("value", obj.value, f"value of {name} PriorityClass must be {system}")
        elif name.startswith("system-"):
            check.invalid("metadata.name", name, "priority class names with 'system-' prefix are reserved")
        elif obj.value > HIGHEST_USER_DEFINABLE_PRIORITY:
            check.invalid("value", obj.value, f"maximum allowed value of a user defined priority is "
                                              f"{HIGHEST_USER_DEFINABLE_PRIORITY}")
        check.unsupported("preemptionPolicy", obj.preemptionPolicy, ("PreemptLowerPriority", "Never"))

    def validate_update(self, new: scheduling_pb2.PriorityClass, old: scheduling_pb2.PriorityClass,
                        check: Checker) -> None:
        if new.value != old.value:
            check.add("value", "Forbidden: may not be changed in an update.")
        if new.preemptionPolicy != old.preemptionPolicy:
            check.invalid("preemptionPolicy", new.preemptionPolicy, "field is immutable")


async def bootstrap_priority_classes(registry: Registry[scheduling_pb2.PriorityClass]) -> None:
    """system-node-critical and system-cluster-critical, as upstream's apiserver makes them."""
    for name, value in SYSTEM_PRIORITY_CLASSES.items():
        try:
            await registry.create(scheduling_pb2.PriorityClass(
                metadata=meta_pb2.ObjectMeta(name=name), value=value, description=_DESCRIPTIONS[name]))
            log.info("created PriorityClass %s", name)
        except errors.AlreadyExists:
            pass


# This group's resources, for the registry's table.
STRATEGIES = (PriorityClassStrategy,)

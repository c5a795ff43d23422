"""The Priority admission plugin, as upstream's (plugin/pkg/admission/priority): a new
pod's `spec.priority` and `preemptionPolicy` come from its `priorityClassName`, or from
the one global-default PriorityClass, or are 0 and PreemptLowerPriority; a pod that sets
either itself to anything else is refused. PriorityClasses themselves: at most one
global default."""

from __future__ import annotations

from dataclasses import dataclass

from apiserver.admission.chain import CREATE, UPDATE, AdmissionAttributes, forbidden
from apiserver.registry.generic.store import Registry
from kubeling import errors
from protos.kubeling.v1 import core_pb2, meta_pb2, scheduling_pb2

__all__ = ["PriorityAdmission", "DEFAULT_PREEMPTION_POLICY"]

DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


@dataclass
class PriorityAdmission:
    classes: Registry[scheduling_pb2.PriorityClass]
    resources: frozenset[str] = frozenset({"pods", "priorityclasses"})

    async def _global_default(self) -> scheduling_pb2.PriorityClass | None:
        # From the watch cache (resourceVersion 0), as upstream's lister: never a quorum read per pod.
        items, _ = await self.classes.list(meta_pb2.ListRequest(resourceVersion="0"))
        defaults = [pc for pc in items if pc.globalDefault]
        # Upstream: of several (a race between two creates), the lowest value wins.
        return min(defaults, key=lambda pc: pc.value) if defaults else None

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.resource != "pods" or attrs.operation != CREATE or attrs.subresource:
            return
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        spec = pod.spec
        name, priority, policy = "", 0, DEFAULT_PREEMPTION_POLICY
        if not spec.priorityClassName:
            found = await self._global_default()
            if found is not None:
                name, priority = found.metadata.name, found.value
                policy = found.preemptionPolicy if found.HasField("preemptionPolicy") else policy
        else:
            try:
                pc = self.classes.watch_cache.get(self.classes.key("", spec.priorityClassName)) \
                    or await self.classes.get("", spec.priorityClassName)  # one made a moment ago
            except errors.NotFound:
                raise forbidden(attrs, "pods", f"no PriorityClass with name {spec.priorityClassName} "
                                               "was found") from None
            name, priority = pc.metadata.name, pc.value
            policy = pc.preemptionPolicy if pc.HasField("preemptionPolicy") else policy
        if spec.HasField("priority") and spec.priority != priority:
            raise forbidden(attrs, "pods", f"the integer value of priority ({spec.priority}) must not be provided in "
                                           f"pod spec; priority admission controller computed {priority} from the "
                                           "given PriorityClass name")
        if spec.HasField("preemptionPolicy") and spec.preemptionPolicy != policy:
            raise forbidden(attrs, "pods", f"the string value of PreemptionPolicy ({spec.preemptionPolicy}) must not "
                                           f"be provided in pod spec; priority admission controller computed {policy} "
                                           "from the given PriorityClass name")
        spec.priorityClassName = name
        spec.priority = priority
        spec.preemptionPolicy = policy

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.resource != "priorityclasses" or attrs.operation not in (CREATE, UPDATE):
            return
        pc = attrs.obj
        assert isinstance(pc, scheduling_pb2.PriorityClass)
        if not pc.globalDefault:
            return
        other = await self._global_default()
        if other is not None and other.metadata.name != pc.metadata.name:
            raise forbidden(attrs, "priorityclasses.scheduling.k8s.io",
                            f"PriorityClass {other.metadata.name} is already marked as default. Only one default "
                            "can exist")

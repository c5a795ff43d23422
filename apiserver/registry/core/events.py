"""Events (core/v1)."""

from __future__ import annotations

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["EventStrategy"]


class EventStrategy(Strategy[core_pb2.Event]):
    resource = scheme.EVENTS
    # As upstream: every component writes events, few clients watch them, and a cache
    # would hold each one in memory for its whole TTL and decode every write.
    watch_cache = False
    garbage_collected = False  # upstream's collector ignores events (controllers.manager.GC_IGNORED)

    def fields(self, obj: core_pb2.Event) -> dict[str, str]:
        out = super().fields(obj)
        ref = obj.involvedObject
        out.update({
            "involvedObject.kind": ref.kind, "involvedObject.namespace": ref.namespace,
            "involvedObject.name": ref.name, "involvedObject.uid": ref.uid,
            "involvedObject.apiVersion": ref.apiVersion, "involvedObject.resourceVersion": ref.resourceVersion,
            "involvedObject.fieldPath": ref.fieldPath, "reason": obj.reason,
            # an event without a source names its reporting controller (upstream's ToSelectableFields)
            "reportingComponent": obj.reportingComponent, "source": obj.source.component or obj.reportingComponent,
            "type": obj.type,
        })
        return out

    def default(self, obj: core_pb2.Event) -> None:
        obj.type = obj.type or "Normal"
        obj.count = obj.count or 1

    def validate(self, obj: core_pb2.Event, check: Checker) -> None:
        """upstream's legacyValidateEvent: an event with an eventTime (a new-style one)
        names who reported it and why; an old-style one only has to be in its object's
        namespace."""
        if obj.HasField("eventTime"):
            for field, value in (("reportingComponent", obj.reportingComponent),
                                 ("reportingInstance", obj.reportingInstance), ("action", obj.action),
                                 ("reason", obj.reason)):
                check.required(field, value)
        check.unsupported("type", obj.type, ("Normal", "Warning"))
        if obj.involvedObject.namespace and obj.involvedObject.namespace != obj.metadata.namespace:
            check.invalid("involvedObject.namespace", obj.involvedObject.namespace, "does not match event.namespace")
        if len(obj.message) > 4096:
            check.add("message", "Too long: may not be more than 4096 bytes")

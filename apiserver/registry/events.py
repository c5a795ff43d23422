"""events.k8s.io/v1 Events: the core group's Events (stored once, as core v1 Events, as
upstream stores both), served under the newer API's names — regarding, note,
reportingController, series, deprecated* — with its stricter validation of new events
(upstream's ValidateEventCreate for events.k8s.io: eventTime, reportingController,
reportingInstance, action and reason required) and its field selectors."""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import Message

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import names, scheme
from protos.kubeling.v1 import core_pb2, events_pb2

__all__ = ["STRATEGIES", "CONVERSIONS", "EventV1Strategy", "to_v1", "to_core"]

_REPORTING_INSTANCE_LIMIT = 128
_ACTION_LIMIT = 128
_REASON_LIMIT = 128
_NOTE_LIMIT = 1024


class EventV1Strategy(Strategy[events_pb2.EventV1]):
    resource = scheme.EVENTS_V1
    watch_cache = False
    garbage_collected = False
    # its field selectors, by the core Events' labels they are (upstream's field label conversions)
    field_label_conversions = {
        "regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
        "regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
        "regarding.apiVersion": "involvedObject.apiVersion",
        "regarding.resourceVersion": "involvedObject.resourceVersion",
        "regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
        "deprecatedSource": "source"}

    def fields(self, obj: events_pb2.EventV1) -> dict[str, str]:
        out = super().fields(obj)
        ref = obj.regarding
        out.update({"regarding.kind": ref.kind, "regarding.namespace": ref.namespace, "regarding.name": ref.name,
                    "regarding.uid": ref.uid, "regarding.apiVersion": ref.apiVersion,
                    "regarding.resourceVersion": ref.resourceVersion, "regarding.fieldPath": ref.fieldPath,
                    "reason": obj.reason, "reportingController": obj.reportingController, "type": obj.type,
                    "deprecatedSource": obj.deprecatedSource.component})
        return out

    def validate(self, obj: events_pb2.EventV1, check: Checker) -> None:
        namespace = obj.metadata.namespace
        if obj.regarding.namespace and obj.regarding.namespace != namespace:
            check.invalid("regarding.namespace", obj.regarding.namespace, "does not match event.namespace")
        if not obj.HasField("eventTime"):
            check.add("eventTime", "Required value")
        if obj.type:
            check.unsupported("type", obj.type, ("Normal", "Warning"))
        if not obj.reportingController:
            check.add("reportingController", "Required value")
        else:
            check.name("reportingController", obj.reportingController, names.qualified_name)
        for field, value, limit in (("reportingInstance", obj.reportingInstance, _REPORTING_INSTANCE_LIMIT),
                                    ("action", obj.action, _ACTION_LIMIT), ("reason", obj.reason, _REASON_LIMIT)):
            if not value:
                check.add(field, "Required value")
            elif len(value) > limit:
                check.invalid(field, "", f"can have at most {limit} characters")
        if len(obj.note) > _NOTE_LIMIT:
            check.invalid("note", "", f"can have at most {_NOTE_LIMIT} characters")
        if obj.HasField("series"):
            if obj.series.count < 2:
                check.invalid("series.count", obj.series.count, "should be at least 2")
            if not obj.series.HasField("lastObservedTime"):
                check.add("series.lastObservedTime", "Required value")


# (core v1 field, events.k8s.io/v1 field): every field of one is a field of the other
_TWINS = (("eventTime", "eventTime"), ("series", "series"), ("reportingComponent", "reportingController"),
          ("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason"),
          ("involvedObject", "regarding"), ("related", "related"), ("message", "note"), ("type", "type"),
          ("source", "deprecatedSource"), ("firstTimestamp", "deprecatedFirstTimestamp"),
          ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"))


def _copy(src: Message, dst: Message, pairs: Iterable[tuple[str, str]]) -> None:
    """Each source field into its twin: messages only when set, scalars as they are."""
    for mine, theirs in pairs:
        value = getattr(src, mine)
        if isinstance(value, Message):
            if src.HasField(mine):
                getattr(dst, theirs).CopyFrom(value)
        else:
            setattr(dst, theirs, value)


def to_v1(event: core_pb2.Event) -> events_pb2.EventV1:
    out = events_pb2.EventV1(metadata=event.metadata)
    _copy(event, out, _TWINS)
    return out


def to_core(event: events_pb2.EventV1, stored: core_pb2.Event | None) -> core_pb2.Event:
    """Every field has its core twin: nothing of the stored object is kept."""
    out = core_pb2.Event(metadata=event.metadata)
    _copy(event, out, ((theirs, mine) for mine, theirs in _TWINS))
    return out


STRATEGIES = (EventV1Strategy,)
CONVERSIONS = {scheme.EVENTS_V1: (to_v1, to_core)}

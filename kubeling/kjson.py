"""Kubernetes JSON for kubeling's protobuf objects (the field names are already Kubernetes').

Differs from protobuf's JSON mapping where Kubernetes does: int64 are numbers, times
are RFC 3339 at second precision (metav1.Time), IntOrString is an int or a string,
unset and empty fields are omitted.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["to_json"]

_TS = Timestamp.DESCRIPTOR.full_name


def to_json(msg: Message) -> dict[str, Any]:
    return _message(msg)


def _message(msg: Message) -> Any:
    full_name = msg.DESCRIPTOR.full_name
    if full_name == _TS:
        return msg.ToJsonString().split(".")[0].rstrip("Z") + "Z"  # type: ignore[attr-defined]
    if full_name == "kubeling.v1.IntOrString":
        return msg.strVal if msg.type == 1 else msg.intVal  # type: ignore[attr-defined]
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        out[field.name] = _value(field, value)
    return out


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        vf = field.message_type.fields_by_name["value"]
        return {k: (_message(v) if vf.message_type is not None else v) for k, v in value.items()}
    if field.is_repeated:
        return [_message(v) if field.message_type is not None else v for v in value]
    if field.message_type is not None:
        return _message(value)
    return value

"""Kubernetes JSON for kubeling's protobuf objects (the field names are already Kubernetes').

Differs from protobuf's JSON mapping where Kubernetes does: int64 are numbers (not
strings), times are RFC 3339 at second precision (metav1.Time) or with microseconds
(metav1.MicroTime fields), IntOrString is a bare int or string, unset and empty fields
are omitted (`omitempty`) while explicitly set optional fields stay (a grace period of 0),
and the fields Go's encoder always writes are written (kubeling.gofields).
The inverse, for request bodies, is `apiserver.endpoints.rest.codec.from_json`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from kubeling.gofields import ALWAYS_WRITTEN

__all__ = ["to_json", "format_time", "always_written", "FIELDS_V1"]

_TIMESTAMP = Timestamp.DESCRIPTOR.full_name
_INT_OR_STRING = "kubeling.v1.IntOrString"
# Fields Kubernetes types as metav1.MicroTime (RFC 3339 with microseconds).
_MICRO_TIME = {"eventTime", "acquireTime", "renewTime"}
FIELDS_V1 = "kubeling.v1.ManagedFieldsEntry.fieldsV1"
# Fields Go's encoder writes even when empty (kubeling.gofields): shown as upstream shows them.
_ALWAYS: dict[str, tuple[str, ...]] = {f"kubeling.v1.{name}": fields for name, fields in ALWAYS_WRITTEN.items()}


def always_written(message_name: str) -> tuple[str, ...]:
    """The fields of a message (full name) Go always writes: for the decoder, they have no
    presence either (an empty one is the same as none, as a Go non-pointer struct)."""
    return _ALWAYS.get(message_name, ())


def format_time(ts: Timestamp, micro: bool = False) -> str:
    when = dt.datetime.fromtimestamp(ts.seconds, dt.timezone.utc)
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{ts.nanos // 1000:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(msg: Message) -> dict[str, Any]:
    """The message as Kubernetes JSON (a dict ready for json.dumps)."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        out[fd.name] = _value_to_json(fd, value)
    always = _ALWAYS.get(msg.DESCRIPTOR.full_name)
    if always is not None:
        for name in always:
            if name not in out:
                value = getattr(msg, name)
                out[name] = to_json(value) if isinstance(value, Message) else value
    return out


def _value_to_json(fd: FieldDescriptor, value: Any) -> Any:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        value_fd = fd.message_type.fields_by_name["value"]
        return {k: _scalar_or_message(value_fd, v) for k, v in value.items()}
    if fd.is_repeated:
        return [_scalar_or_message(fd, v) for v in value]
    return _scalar_or_message(fd, value)


def _scalar_or_message(fd: FieldDescriptor, value: Any) -> Any:
    if fd.message_type is None:
        if fd.type == FieldDescriptor.TYPE_BYTES:
            return base64.b64encode(value).decode()
        if fd.full_name == FIELDS_V1:
            return json.loads(value) if value else {}  # stored as JSON text, shown as the object
        return value
    name = fd.message_type.full_name
    if name == _TIMESTAMP:
        return format_time(value, fd.name in _MICRO_TIME)
    if name == _INT_OR_STRING:
        return value.strVal if value.type == 1 else value.intVal
    return to_json(value)

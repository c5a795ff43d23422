"""Kubernetes JSON for kubeling's protobuf objects (the field names are already Kubernetes').

Differs from protobuf's JSON mapping where Kubernetes does: int64 are numbers (not
strings), times are RFC 3339 at second precision (metav1.Time) or with microseconds
(metav1.MicroTime fields), IntOrString is a bare int or string, unset and empty fields
are omitted (`omitempty`) while explicitly set optional fields stay (a grace period of 0),
and the fields Go's encoder always writes are written (kubeling.gofields). An object kept
as JSON (a CustomResource message) is its metadata and its own JSON content.
Decoding (`from_json`, for request bodies and objects stored as JSON) is the inverse:
int64 from numbers, times from RFC 3339, IntOrString from an int or a string, `null` as
unset. It reports unknown fields by their path (`spec.containers[0].foo`), so that the
REST layer can refuse them (fieldValidation=Strict) or drop them with a warning.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from kubeling import errors
from kubeling.gofields import ALWAYS_WRITTEN

__all__ = ["to_json", "custom_json", "format_time", "always_written", "FIELDS_V1", "CUSTOM_RESOURCE", "from_json",
           "Decoded", "parse_time", "canonical_json"]

_TIMESTAMP = Timestamp.DESCRIPTOR.full_name
_INT_OR_STRING = "kubeling.v1.IntOrString"
# runtime.RawExtension (a ControllerRevision's data): JSON bytes, shown as the value they are.
_RAW_EXTENSION = "kubeling.v1.RawExtension"
# Fields Kubernetes types as metav1.MicroTime (RFC 3339 with microseconds).
_MICRO_TIME = {"eventTime", "acquireTime", "renewTime", "lastObservedTime"}
FIELDS_V1 = "kubeling.v1.ManagedFieldsEntry.fieldsV1"
CUSTOM_RESOURCE = "kubeling.v1.CustomResource"
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
    if msg.DESCRIPTOR.full_name == CUSTOM_RESOURCE:
        return custom_json(msg)
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        out[fd.name] = _value_to_json(fd, value)
    always = _ALWAYS.get(msg.DESCRIPTOR.full_name)
    if always is not None:
        for name in always:
            if name not in out:
                value = getattr(msg, name)
                if isinstance(value, Timestamp):
                    out[name] = None  # Go's zero metav1.Time/MicroTime: null
                else:
                    out[name] = to_json(value) if isinstance(value, Message) else value
    return out


def custom_json(obj: Any) -> dict[str, Any]:
    """A CustomResource as the object it is: apiVersion, kind, metadata, then its content."""
    out: dict[str, Any] = {}
    if obj.apiVersion:
        out["apiVersion"] = obj.apiVersion
    if obj.kind:
        out["kind"] = obj.kind
    out["metadata"] = to_json(obj.metadata)
    if obj.content:
        out.update(json.loads(obj.content))
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
    if name == _RAW_EXTENSION:
        return json.loads(value.raw) if value.raw else None
    return to_json(value)


# ------------------------------------------------------------------ JSON -> proto

_INTS = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
         FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
         FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
         FieldDescriptor.TYPE_SFIXED64}
_FLOATS = {FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE}


def parse_time(text: str, path: str) -> Timestamp:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise errors.BadRequest(f'{path}: invalid time "{text}": expected RFC 3339 (2006-01-02T15:04:05Z)',
                                violations=[errors.FieldViolation(path, "invalid RFC 3339 time")]) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    ts = Timestamp()
    ts.FromNanoseconds(int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000)
    return ts


@dataclass
class Decoded:
    message: Message
    unknown: list[str] = field(default_factory=list)  # paths of fields the message has no room for


def from_json(data: Any, message_type: type[Message], *, ignore: frozenset[str] = frozenset({"kind", "apiVersion"}),
              ) -> Decoded:
    """Decode Kubernetes JSON into `message_type`. Type errors are BadRequest naming the
    field; fields the message does not have are listed in `unknown` (top-level names in
    `ignore` are skipped)."""
    if not isinstance(data, dict):
        raise errors.BadRequest(f"the body must be a JSON object, not {_kind_of(data)}")
    msg = message_type()
    result = Decoded(msg)
    if msg.DESCRIPTOR.full_name == CUSTOM_RESOURCE:
        _fill_custom(msg, data, ignore, result.unknown)
        return result
    _fill(msg, {k: v for k, v in data.items() if k not in ignore}, "", result.unknown)
    return result


def _fill_custom(msg: Any, data: dict[str, Any], ignore: frozenset[str], unknown: list[str]) -> None:
    """An object kept as JSON: metadata typed (its unknown fields reported), apiVersion and
    kind kept unless ignored, everything else its content (the schema judges it later)."""
    meta = data.get("metadata")
    if meta is not None:
        _fill_message(msg.metadata, meta, "metadata", unknown)
    for key in ("apiVersion", "kind"):
        value = data.get(key)
        if key not in ignore and value is not None:
            if not isinstance(value, str):
                raise _type_error(key, value, "a string")
            setattr(msg, key, value)
    content = {k: v for k, v in data.items() if k not in ("metadata", "apiVersion", "kind")}
    if content:
        msg.content = canonical_json(content)


def canonical_json(value: Any) -> str:
    """The one text of a JSON value (content compares and stores by it)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _type_error(path: str, value: Any, expected: str) -> errors.BadRequest:
    return errors.BadRequest(f"{path}: expected {expected}, got {_kind_of(value)}",
                             violations=[errors.FieldViolation(path, f"expected {expected}")])


def _fill(msg: Message, data: dict[str, Any], prefix: str, unknown: list[str]) -> None:
    desc = msg.DESCRIPTOR
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        fd = desc.fields_by_name.get(key)
        if fd is None:
            unknown.append(path)
            continue
        if value is None:
            continue  # null: the field is unset, as Go's decoder leaves it
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            if not isinstance(value, dict):
                raise _type_error(path, value, "an object")
            value_fd = fd.message_type.fields_by_name["value"]
            target = getattr(msg, key)
            for k, v in value.items():
                if value_fd.message_type is not None:
                    _fill_message(target[k], v, f"{path}.{k}", unknown)
                else:
                    target[k] = _scalar(value_fd, v, f"{path}.{k}")
        elif fd.is_repeated:
            if not isinstance(value, list):
                raise _type_error(path, value, "an array")
            target = getattr(msg, key)
            for i, item in enumerate(value):
                if fd.message_type is not None:
                    _fill_message(target.add(), item, f"{path}[{i}]", unknown)
                else:
                    target.append(_scalar(fd, item, f"{path}[{i}]"))
        elif fd.message_type is not None:
            _fill_message(getattr(msg, key), value, path, unknown)
        else:
            setattr(msg, key, _scalar(fd, value, path))
    # What Go always writes has no presence: written back empty ("state": {}, "port": 0),
    # it is the same as left out (else an update would differ from the stored object).
    for key in always_written(desc.full_name):
        if key in data and _empty(msg, desc.fields_by_name[key]):
            msg.ClearField(key)


def _empty(msg: Message, fd: FieldDescriptor) -> bool:
    value = getattr(msg, fd.name)
    if fd.message_type is not None:
        return not value.ListFields()
    return bool(value == fd.default_value)


def _fill_message(target: Any, value: Any, path: str, unknown: list[str]) -> None:
    name = target.DESCRIPTOR.full_name
    if name == _TIMESTAMP:
        if not isinstance(value, str):
            raise _type_error(path, value, "an RFC 3339 time string")
        target.CopyFrom(parse_time(value, path))
    elif name == _INT_OR_STRING:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise _type_error(path, value, "an integer or a string")
        if isinstance(value, int):
            target.type, target.intVal = 0, value
        else:
            target.type, target.strVal = 1, value
    elif name == _RAW_EXTENSION:
        target.raw = canonical_json(value).encode()
    else:
        if not isinstance(value, dict):
            raise _type_error(path, value, "an object")
        target.SetInParent()  # `{}` is still a value (an empty emptyDir, a set affinity)
        _fill(target, value, path, unknown)


def _scalar(fd: Any, value: Any, path: str) -> Any:
    t = fd.type
    if fd.full_name == FIELDS_V1:
        if not isinstance(value, dict):
            raise _type_error(path, value, "an object")
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if t == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise _type_error(path, value, "a string")
        return value
    if t == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _type_error(path, value, "a boolean")
        return value
    if t in _INTS:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(path, value, "an integer")
        int32 = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32)
        bits = 32 if t in int32 else 64
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise errors.BadRequest(f"{path}: {value} does not fit in int{bits}",
                                    violations=[errors.FieldViolation(path, f"out of range for int{bits}")])
        return value
    if t in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(path, value, "a number")
        return float(value)
    if t == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _type_error(path, value, "a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise _type_error(path, value, "a base64 string") from None
    raise errors.BadRequest(f"{path}: unsupported field type")

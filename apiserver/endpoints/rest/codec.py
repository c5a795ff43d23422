"""Kubernetes JSON for the project's protobuf messages, both ways.

Encoding is `kubeling.kjson` (shared with the scheduler's HTTP extenders). Decoding is
its inverse: int64 from numbers, times from RFC 3339, IntOrString from an int or a
string, `null` as unset. It reports unknown fields by their path (`spec.containers[0].foo`), so that the
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
from kubeling.kjson import FIELDS_V1, always_written, format_time, to_json

__all__ = ["to_json", "from_json", "Decoded", "format_time", "parse_time"]  # to_json, format_time: kubeling.kjson

_TIMESTAMP = Timestamp.DESCRIPTOR.full_name
_INT_OR_STRING = "kubeling.v1.IntOrString"
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


# ------------------------------------------------------------------ JSON -> proto


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
    _fill(msg, {k: v for k, v in data.items() if k not in ignore}, "", result.unknown)
    return result


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

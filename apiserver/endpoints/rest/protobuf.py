"""Kubernetes' protobuf encoding, both directions, for every built-in kind.

Clients that speak it (client-go with ContentType protobuf, as every upstream component;
kubectl's create commands) number fields as upstream's generated.proto files do. This
project's messages number many fields otherwise, so objects are transcoded through
Kubernetes JSON, which both sides share: upstream's wire layout (field numbers, types,
JSON names, embedded structs), extracted once from upstream's sources by
`python -m cluster.upstreamwire` into `protos/upstream/wire.json`, becomes real message classes
here; JSON fills them and they give JSON back, with apimachinery's types mapped as upstream
marshals them (Quantity and IntOrString as scalars, Time as RFC 3339, RawExtension and
FieldsV1 as embedded JSON, Go-embedded structs flattened, `type X []string` as lists).

On the wire an object is the bytes `k8s\\0` then a runtime.Unknown {typeMeta {apiVersion,
kind}, raw = the object's message}; a watch is frames of a 4-byte big-endian length then a
WatchEvent {type, object = RawExtension {raw = such an envelope}}.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from dataclasses import dataclass
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

import protos
from apiserver.endpoints.rest.status import NotAcceptable, UnsupportedMediaType
from kubeling import errors
from kubeling.kjson import format_time, parse_time

__all__ = ["PROTOBUF", "WATCH_STREAM", "Wire", "decode_envelope", "prune_zero_fields", "wire"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
WATCH_STREAM = f"{PROTOBUF};stream=watch"
_MAGIC = b"k8s\x00"
_UNKNOWN = "runtime/Unknown"

_APIMACHINERY = "k8s.io.apimachinery.pkg."
_QUANTITY = _APIMACHINERY + "api.resource.Quantity"
_INT_OR_STRING = _APIMACHINERY + "util.intstr.IntOrString"
_TIME = _APIMACHINERY + "apis.meta.v1.Time"
_MICRO_TIME = _APIMACHINERY + "apis.meta.v1.MicroTime"
_RAW_EXTENSION = _APIMACHINERY + "runtime.RawExtension"
_FIELDS_V1 = _APIMACHINERY + "apis.meta.v1.FieldsV1"
_APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
_EMBEDDED_JSON = {_RAW_EXTENSION, _FIELDS_V1, _APIEXTENSIONS + "JSON"}
_OR_ARRAY = _APIEXTENSIONS + "JSONSchemaPropsOrArray"
_OR_BOOL = _APIEXTENSIONS + "JSONSchemaPropsOrBool"
_OR_STRING_ARRAY = _APIEXTENSIONS + "JSONSchemaPropsOrStringArray"

_TYPE_DOUBLE, _TYPE_BYTES, _TYPE_MESSAGE = 1, 12, 11


@dataclass(frozen=True)
class _Field:
    name: str  # the proto name (an attribute of the message class)
    json: str  # the key in Kubernetes JSON
    number: int
    type: int  # FieldDescriptorProto.Type
    repeated: bool
    message: str | None
    inline: bool  # a Go-embedded struct: its fields sit in the parent's JSON object
    keeps_zero: bool  # a Go pointer (on the wire only when set) or a field without omitempty


@dataclass(frozen=True)
class _Message:
    name: str
    fields: tuple[_Field, ...]
    is_map: bool
    is_slice: bool

    @functools.cached_property
    def by_number(self) -> dict[int, _Field]:
        return {f.number: f for f in self.fields}


def _mangled(name: str) -> str:
    return name.replace("_", "__").replace(".", "_")


class Wire:
    """Upstream's messages, by full name and by (apiVersion, kind)."""

    def __init__(self, layout: dict[str, Any]) -> None:
        self.kinds: dict[str, str] = layout["kinds"]
        self.messages: dict[str, _Message] = {}
        for name, record in layout["messages"].items():
            fields = tuple(_Field(f[0], f[4].get("json", f[0]), f[1], f[2], f[3], f[4].get("message"),
                                  bool(f[4].get("inline")), bool(f[4].get("zero"))) for f in record["fields"])
            self.messages[name] = _Message(name, fields, bool(record.get("map")), bool(record.get("slice")))
        self._classes = self._build()

    def _build(self) -> dict[str, type[Message]]:
        """One proto2 file holding every message, names mangled into one package (the wire
        knows numbers, not names); map entries nested in their message as protoc does."""
        file = descriptor_pb2.FileDescriptorProto(name="kubeling/upstream_wire.proto", package="upstream",
                                                  syntax="proto2")
        protos: dict[str, descriptor_pb2.DescriptorProto] = {}
        for name in sorted(self.messages, key=lambda n: n.count(".")):
            spec = self.messages[name]
            parent = name.rpartition(".")[0]
            if spec.is_map and parent in protos:
                proto = protos[parent].nested_type.add(name=name.rpartition(".")[2])
                proto.options.map_entry = True
            else:
                proto = file.message_type.add(name=_mangled(name))
            protos[name] = proto
            for f in spec.fields:
                field = proto.field.add(name=f.name, number=f.number, type=f.type,
                                        label=3 if f.repeated else 1)
                if f.message is not None:
                    field.type_name = self._type_name(f.message)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(self._type_name(name)[1:]))
                for name in self.messages}

    def _type_name(self, name: str) -> str:
        parent, _, last = name.rpartition(".")
        if self.messages[name].is_map and parent in self.messages:
            return f"{self._type_name(parent)}.{last}"
        return f".upstream.{_mangled(name)}"

    def kind_message(self, api_version: str, kind: str) -> str | None:
        return self.kinds.get(f"{api_version}/{kind}")

    def message_class(self, name: str) -> type[Message]:
        """Upstream's message of that full name (k8s.io.api.core.v1.Pod), as a class."""
        return self._classes[name]

    def read(self, msg: Message, name: str) -> dict[str, Any]:
        """One of upstream's messages as Kubernetes JSON."""
        return self._json(msg, self.messages[name])

    # -------------------------------------------------------------- JSON -> wire

    def encode(self, obj: dict[str, Any]) -> bytes:
        """An object (with kind and apiVersion) as the protobuf envelope."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        name = self.kind_message(api_version, kind)
        if name is None:
            raise NotAcceptable(f"{api_version} {kind} has no protobuf encoding")
        msg = self._classes[name]()
        self._fill(msg, self.messages[name], obj, kind)
        return self._envelope(api_version, kind, msg.SerializeToString())

    def list_item(self, name: str, obj: dict[str, Any]) -> bytes:
        """One item of a list, framed as the list message's field 2 (items): lists are
        encoded item by item, with the event loop given back in between."""
        msg = self._classes[name]()
        self._fill(msg, self.messages[name], obj, "items")
        return _length_delimited(2, msg.SerializeToString())

    def encode_list(self, head: dict[str, Any], items: bytes) -> bytes:
        """A list's envelope: its metadata (field 1) and the framed items."""
        name = self.kind_message(head["apiVersion"], head["kind"])
        assert name is not None
        msg = self._classes[name]()
        self._fill(msg, self.messages[name], {"metadata": head.get("metadata", {})}, head["kind"])
        return self._envelope(head["apiVersion"], head["kind"], msg.SerializeToString() + items)

    def _envelope(self, api_version: str, kind: str, raw: bytes) -> bytes:
        unknown: Any = self._classes[self.kinds[_UNKNOWN]]()
        unknown.typeMeta.apiVersion, unknown.typeMeta.kind = api_version, kind
        return _MAGIC + unknown.SerializeToString() + _length_delimited(2, raw)

    def watch_frame(self, event_type: str, obj: dict[str, Any]) -> bytes:
        event: Any = self._classes[self.kinds["v1/WatchEvent"]]()
        event.type = event_type
        event.object.raw = self.encode(obj)
        data = event.SerializeToString()
        return struct.pack(">I", len(data)) + data

    def _fill(self, msg: Message, spec: _Message, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise errors.BadRequest(f"{where}: expected an object, got {type(data).__name__}")
        for f in spec.fields:
            if f.inline:
                assert f.message is not None
                self._fill(getattr(msg, f.name), self.messages[f.message], data, where)
                continue
            value = data.get(f.json)
            if value is None:
                continue
            path = f"{where}.{f.json}"
            if f.message is not None and self.messages[f.message].is_map:
                entry = self.messages[f.message]
                if not isinstance(value, dict):
                    raise errors.BadRequest(f"{path}: expected an object, got {type(value).__name__}")
                target = getattr(msg, f.name)
                value_field = entry.by_number[2]
                for key, item in value.items():
                    if value_field.message is not None:
                        self._set_message(target[key], value_field.message, item, f"{path}[{key}]")
                    else:
                        target[key] = self._scalar(value_field, item, f"{path}[{key}]")
            elif f.repeated:
                if not isinstance(value, list):
                    raise errors.BadRequest(f"{path}: expected a list, got {type(value).__name__}")
                target = getattr(msg, f.name)
                for i, item in enumerate(value):
                    if f.message is not None:
                        self._set_message(target.add(), f.message, item, f"{path}[{i}]")
                    else:
                        target.append(self._scalar(f, item, f"{path}[{i}]"))
            elif f.message is not None:
                self._set_message(getattr(msg, f.name), f.message, value, path)
            else:
                try:
                    setattr(msg, f.name, self._scalar(f, value, path))
                except (TypeError, ValueError) as err:
                    # the object's JSON and upstream's field disagree: name the field
                    raise errors.InternalError(f"{path}: {value!r} has no protobuf encoding: {err}") from None

    def _set_message(self, msg: Message, name: str, value: Any, path: str) -> None:
        """One value of a message-typed field, apimachinery's types as upstream marshals them."""
        spec = self.messages[name]
        m: Any = msg
        if name == _QUANTITY:
            m.string = value if isinstance(value, str) else json.dumps(value)
        elif name == _INT_OR_STRING:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise errors.BadRequest(f"{path}: expected an integer or a string")
            if isinstance(value, int):
                m.type, m.intVal = 0, value
            else:
                m.type, m.strVal = 1, value
        elif name in (_TIME, _MICRO_TIME):
            m.seconds, m.nanos = _parse_time(value, path)
        elif name in _EMBEDDED_JSON:  # one bytes field: raw (Raw in FieldsV1)
            setattr(m, spec.by_number[1].name, json.dumps(value, separators=(",", ":")).encode())
        elif name == _OR_ARRAY:
            if isinstance(value, list):
                for i, item in enumerate(value):
                    self._set_message(m.jSONSchemas.add(), _APIEXTENSIONS + "JSONSchemaProps", item, f"{path}[{i}]")
            else:
                self._set_message(m.schema, _APIEXTENSIONS + "JSONSchemaProps", value, path)
        elif name == _OR_BOOL:
            if isinstance(value, bool):
                m.allows = value
            else:
                m.allows = True
                self._set_message(m.schema, _APIEXTENSIONS + "JSONSchemaProps", value, path)
        elif name == _OR_STRING_ARRAY:
            if isinstance(value, list):
                m.property.extend(str(v) for v in value)
            else:
                self._set_message(m.schema, _APIEXTENSIONS + "JSONSchemaProps", value, path)
        elif spec.is_slice:
            if not isinstance(value, list):
                raise errors.BadRequest(f"{path}: expected a list, got {type(value).__name__}")
            m.items.extend(str(v) for v in value)
        else:
            m.SetInParent()
            self._fill(m, spec, value, path)

    @staticmethod
    def _scalar(f: _Field, value: Any, path: str) -> Any:
        if f.type == _TYPE_BYTES:
            try:
                return base64.b64decode(value, validate=True)
            except (ValueError, TypeError):
                raise errors.BadRequest(f"{path}: not base64") from None
        return value

    # -------------------------------------------------------------- wire -> JSON

    def decode(self, body: bytes) -> dict[str, Any]:
        """A protobuf envelope as Kubernetes JSON (kind and apiVersion first)."""
        if not body.startswith(_MAGIC):
            raise errors.BadRequest("the protobuf body does not start with the Kubernetes magic number")
        try:
            unknown: Any = self._classes[self.kinds[_UNKNOWN]].FromString(body[len(_MAGIC):])
        except DecodeError:
            raise errors.BadRequest("the protobuf body is not a runtime.Unknown envelope") from None
        api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
        if unknown.contentEncoding:
            raise UnsupportedMediaType(f"protobuf content encoding {unknown.contentEncoding!r} is not supported")
        name = self.kind_message(api_version, kind)
        if name is None:
            raise UnsupportedMediaType(f"{PROTOBUF} is not served for {api_version} {kind or '(no kind)'}: "
                                       f"send application/json")
        try:
            msg = self._classes[name].FromString(unknown.raw)
        except DecodeError as err:
            raise errors.BadRequest(f"the protobuf body is not a {api_version} {kind}: {err}") from None
        return {"kind": kind, "apiVersion": api_version, **self._json(msg, self.messages[name])}

    def _json(self, msg: Message, spec: _Message) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fd, value in msg.ListFields():
            f = spec.by_number[fd.number]
            if f.inline:
                assert f.message is not None
                out.update(self._json(value, self.messages[f.message]))
            elif f.message is not None and self.messages[f.message].is_map:
                entry = self.messages[f.message].by_number[2]
                out[f.json] = {k: self._value(entry, v) for k, v in value.items()}
            elif f.repeated:
                out[f.json] = [self._value(f, v) for v in value]
            elif f.message is None and not f.keeps_zero and not value:
                continue  # Go writes its non-pointer fields, zero or not; its JSON leaves zeros out
            else:
                converted = self._value(f, value)
                if converted is not _ABSENT:
                    out[f.json] = converted
        return out

    def _value(self, f: _Field, value: Any) -> Any:
        if f.message is None:
            if f.type == _TYPE_BYTES:
                return base64.b64encode(value).decode()
            return value
        name = f.message
        if name == _QUANTITY:
            return value.string
        if name == _INT_OR_STRING:
            return value.strVal if value.type == 1 else value.intVal
        if name in (_TIME, _MICRO_TIME):
            # Go's zero time travels as an empty message: JSON null, unset
            if value.seconds == 0 and value.nanos == 0:
                return _ABSENT
            return _format_time(value.seconds, value.nanos if name == _MICRO_TIME else None, f.json)
        if name in _EMBEDDED_JSON:
            raw = bytes(getattr(value, self.messages[name].by_number[1].name))
            if not raw:
                return _ABSENT
            if raw.startswith(_MAGIC):
                return self.decode(raw)
            try:
                return json.loads(raw)
            except ValueError:
                raise errors.BadRequest(f"{f.json}: embedded raw data is not JSON") from None
        if name == _OR_ARRAY:
            return [self._json(s, self.messages[_APIEXTENSIONS + "JSONSchemaProps"]) for s in value.jSONSchemas] \
                if not value.HasField("schema") else self._json(value.schema,
                                                                self.messages[_APIEXTENSIONS + "JSONSchemaProps"])
        if name == _OR_BOOL:
            return self._json(value.schema, self.messages[_APIEXTENSIONS + "JSONSchemaProps"]) \
                if value.HasField("schema") else value.allows
        if name == _OR_STRING_ARRAY:
            return self._json(value.schema, self.messages[_APIEXTENSIONS + "JSONSchemaProps"]) \
                if value.HasField("schema") else list(value.property)
        spec = self.messages[name]
        if spec.is_slice:
            return list(value.items)
        return self._json(value, spec)


_ABSENT = object()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _parse_time(value: Any, path: str) -> tuple[int, int]:
    if not isinstance(value, str):
        raise errors.BadRequest(f"{path}: expected an RFC 3339 time")
    ts = parse_time(value, path)
    return ts.seconds, ts.nanos


def _format_time(seconds: int, nanos: int | None, where: str) -> str:
    if not 0 <= (nanos or 0) < 1_000_000_000:
        raise errors.BadRequest(f"{where}: {nanos} nanoseconds is out of range")
    try:
        return format_time(Timestamp(seconds=seconds, nanos=nanos or 0), micro=nanos is not None)
    except (OverflowError, ValueError, OSError):  # before year 1 or after 9999: no RFC 3339 time
        raise errors.BadRequest(f"{where}: time {seconds} s from the epoch is out of range") from None


@functools.cache
def wire() -> Wire:
    """The layout, read once: it is fixed for the process (generated, committed)."""
    return Wire(json.loads((resources.files(protos) / "upstream" / "wire.json").read_text()))


def decode_envelope(body: bytes) -> dict[str, Any]:
    """The object of a protobuf request body, as Kubernetes JSON."""
    return wire().decode(body)


def prune_zero_fields(data: Any, descriptor: Any) -> Any:
    """Go writes every non-pointer field to the wire, zero or not (`selfLink: ""`,
    `hostNetwork: false`); reading drops those (by the layout's pointer marks), and this
    drops what is left that this project has no room for. Drop a zero value
    where this project's message (its descriptor) has no field of that JSON name or a field
    without presence, so a protobuf body reads as the same body in JSON would: no unknown
    field warnings, no extra managed fields."""
    if not isinstance(data, dict) or descriptor is None:
        return data
    fields = {fd.json_name: fd for fd in descriptor.fields}
    for key in list(data):
        value = data[key]
        fd = fields.get(key)
        if fd is None:
            if _is_zero(value) or value == {}:
                del data[key]
            continue
        if (fd.is_repeated and value in ([], {})) or (
                fd.message_type is None and not fd.has_presence and _is_zero(value)):
            del data[key]
            continue
        if fd is None or fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            if value_fd.message_type is not None and isinstance(value, dict):
                for item in value.values():
                    prune_zero_fields(item, value_fd.message_type)
        elif isinstance(value, list):
            for item in value:
                prune_zero_fields(item, fd.message_type)
        else:
            prune_zero_fields(value, fd.message_type)
    return data


def _is_zero(value: Any) -> bool:
    return value is None or (not isinstance(value, dict) and value in ("", 0, False, []))  # 0 == False

"""Request bodies in Kubernetes' protobuf encoding, for the kinds whose wire layout is the
same in this project's messages (field numbers as upstream's generated.proto).

Some kubectl commands (`kubectl create namespace`) send protobuf: the bytes `k8s\\0` then
a runtime.Unknown {typeMeta {apiVersion=1, kind=2} = 1, raw = 2, contentEncoding = 3,
contentType = 4} whose raw is the object. A resource whose scheme entry says its message
numbers its fields as upstream's (`upstream_protobuf`: Namespace, the RBAC kinds,
ServiceAccount, ConfigMap, Secret, Deployment, Job, ResourceQuota, ...) is read this way, so are the
subresources' Eviction and TokenRequest (`kubectl drain`, `kubectl create token`),
DeleteOptions, and the access reviews `kubectl auth can-i` sends (their few string fields,
by upstream's numbers); anything else is refused with 415 so that the client can be told
to send JSON.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from apiserver.endpoints.rest.codec import to_json
from apiserver.endpoints.rest.status import UnsupportedMediaType
from kubeling import errors
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import authentication_pb2, meta_pb2, policy_pb2

__all__ = ["PROTOBUF", "decode_envelope"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
# Kinds that are no resource of the scheme but are sent in protobuf, by upstream's numbers.
_OTHER_KINDS: dict[tuple[str, str], type[Message]] = {
    ("policy/v1", "Eviction"): policy_pb2.Eviction, ("policy/v1beta1", "Eviction"): policy_pb2.Eviction,
    ("authentication.k8s.io/v1", "TokenRequest"): authentication_pb2.TokenRequest,
    ("v1", "DeleteOptions"): meta_pb2.DeleteOptions, ("meta.k8s.io/v1", "DeleteOptions"): meta_pb2.DeleteOptions}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise errors.BadRequest("the protobuf body is truncated")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a message (the last of each number wins)."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise errors.BadRequest("the protobuf body is truncated")
            out[number] = data[pos:pos + length]
            pos += length
        elif wire == 0:
            _, pos = _varint(data, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise errors.BadRequest(f"the protobuf body has an unsupported wire type {wire}")
    return out


def _strings(fields: dict[int, bytes], names: dict[int, str]) -> dict[str, str]:
    try:
        return {name: fields[number].decode() for number, name in names.items() if fields.get(number)}
    except UnicodeDecodeError:
        raise errors.BadRequest("the protobuf body holds a string that is not UTF-8") from None


def _access_review_spec(spec: dict[int, bytes]) -> dict[str, Any]:
    """SelfSubjectAccessReviewSpec {resourceAttributes = 1, nonResourceAttributes = 2}."""
    out: dict[str, Any] = {}
    if 1 in spec:
        out["resourceAttributes"] = _strings(_fields(spec[1]), {1: "namespace", 2: "verb", 3: "group", 4: "version",
                                                                5: "resource", 6: "subresource", 7: "name"})
    if 2 in spec:
        out["nonResourceAttributes"] = _strings(_fields(spec[2]), {1: "path", 2: "verb"})
    return out


def _rules_review_spec(spec: dict[int, bytes]) -> dict[str, Any]:
    """SelfSubjectRulesReviewSpec {namespace = 1}."""
    return _strings(spec, {1: "namespace"})


_REVIEWS = {("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _access_review_spec,
            ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): _rules_review_spec}


def _clear_zero_times(msg: Message) -> None:
    """Go's zero metav1.Time goes on the wire as an empty message: it means unset (a pod
    template's creationTimestamp), not the epoch."""
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.full_name == Timestamp.DESCRIPTOR.full_name:
            if not fd.is_repeated and value.seconds == 0 and value.nanos == 0:
                msg.ClearField(fd.name)
        elif fd.message_type.GetOptions().map_entry:
            continue
        elif fd.is_repeated:
            for item in value:
                _clear_zero_times(item)
        else:
            _clear_zero_times(value)


# The maps whose values are resource.Quantity upstream: a message {string = 1}, where these
# messages have the string itself. The wire layouts differ only in that nesting.
_QUANTITY_MAPS = frozenset({"hard", "used", "max", "min", "default", "defaultRequest", "maxLimitRequestRatio",
                            "requests", "limits", "capacity", "allocatable", "overhead"})


def _unwrap_quantities(msg: Message) -> None:
    """A Quantity map value read as a string holds the Quantity message's bytes (field 1,
    length, the amount): keep the amount."""
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            if fd.name in _QUANTITY_MAPS and fd.message_type.fields_by_name["value"].type == fd.TYPE_STRING:
                for key, text in list(value.items()):
                    raw = text.encode()
                    if raw[:1] == b"\n":
                        length, pos = _varint(raw, 1)
                        if pos + length == len(raw):
                            value[key] = raw[pos:].decode()
            continue
        for item in (value if fd.is_repeated else [value]):
            _unwrap_quantities(item)


def decode_envelope(body: bytes, resource: ResourceType[Any] | None = None) -> dict[str, Any]:
    """The object of a protobuf request body sent to `resource`'s URL, as Kubernetes JSON."""
    if not body.startswith(_MAGIC):
        raise errors.BadRequest("the protobuf body does not start with the Kubernetes magic number")
    unknown = _fields(body[len(_MAGIC):])
    type_meta = _fields(unknown.get(1, b""))
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    message = resource.message if resource is not None and resource.upstream_protobuf and \
        (api_version, kind) == (resource.api_version, resource.kind) else None
    message = message or _OTHER_KINDS.get((api_version, kind)) or \
        (meta_pb2.DeleteOptions if kind == "DeleteOptions" else None)
    review = _REVIEWS.get((api_version, kind))
    if message is None and review is None:
        raise UnsupportedMediaType(f"{PROTOBUF} is accepted for the kinds kubectl's create commands send and "
                                   f"access reviews only, not {api_version} {kind}: send application/json")
    if unknown.get(3):
        raise UnsupportedMediaType(f"protobuf content encoding {unknown[3].decode()!r} is not supported")
    if review is not None:
        spec = _fields(_fields(unknown.get(2, b"")).get(2, b""))
        return {"kind": kind, "apiVersion": api_version, "spec": review(spec)}
    assert message is not None
    obj: Any = message.FromString(unknown.get(2, b""))
    obj.DiscardUnknownFields()  # upstream fields this server does not have (selfLink, managedFields)
    _clear_zero_times(obj)
    _unwrap_quantities(obj)
    return {"kind": kind, "apiVersion": api_version, **to_json(obj)}

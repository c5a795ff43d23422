"""Property-based fuzzing of the apiserver from outside (a separate process, plain HTTP and
gRPC clients): random REST bodies, query parameters and headers, random bytes and random
valid protobuf messages on every unary gRPC method. Never a 5xx, never UNKNOWN or
INTERNAL, never a hang (every request has a deadline), and the server serves after."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.etcd import EtcdServer
from kubeling.netutil import free_port
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)
BAD_GRPC = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED}


def _server_error(status: int, reply: bytes) -> bool:
    """A 5xx other than upstream's own 504 for a resourceVersion the store has not reached."""
    return status >= 500 and not (status == 504 and b"Too large resource version" in reply)


class Server:
    def __init__(self, grpc_address: str, rest_port: int) -> None:
        self.channel = grpc.insecure_channel(grpc_address)
        self.rest_port = rest_port

    def rest(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.rest_port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    def unary(self, service: str, method: str, body: bytes) -> grpc.StatusCode:
        call = self.channel.unary_unary(f"/kubeling.v1.{service}/{method}", request_serializer=None,
                                        response_deserializer=None)
        try:
            call(body, timeout=10)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()

    def alive(self) -> bool:
        return self.rest("GET", "/readyz")[0] == 200


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-fuzz-"))
    etcd = EtcdServer(data_dir=work / "etcd").start()
    grpc_port, rest_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "apiserver", "--etcd", etcd.endpoint,
                             "--listen", f"127.0.0.1:{grpc_port}", "--rest-listen", f"127.0.0.1:{rest_port}",
                             "--log-level", "CRITICAL"], stdin=subprocess.DEVNULL)
    try:
        made = Server(f"127.0.0.1:{grpc_port}", rest_port)
        deadline = time.monotonic() + 30
        while True:
            try:
                if made.alive():
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the apiserver did not start"
            time.sleep(0.1)
        yield made
        assert made.alive() and proc.poll() is None  # it survived everything
    finally:
        proc.terminate()
        proc.wait(30)
        etcd.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30)

# Bodies shaped like objects (so they reach validation and conversion), with random parts.
pod_like = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["v1", "apps/v1", "", 7]),
     "kind": st.sampled_from(["Pod", "Node", "", None]),
     "metadata": st.fixed_dictionaries({}, optional={"name": st.text(max_size=70), "namespace": json_values,
                                                     "labels": json_values, "resourceVersion": json_values,
                                                     "generateName": st.text(max_size=70)}),
     "spec": json_values, "status": json_values})


@FUZZ
@given(body=st.one_of(pod_like, json_values), method=st.sampled_from(["POST", "PUT", "PATCH"]),
       ctype=st.sampled_from(["application/json", "application/merge-patch+json", "application/json-patch+json",
                              "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                              "application/yaml", "text/plain", "application/vnd.kubernetes.protobuf"]))
def test_rest_bodies(server: Server, body: Any, method: str, ctype: str) -> None:
    path = "/api/v1/namespaces/default/pods" + ("" if method == "POST" else "/fuzzed")
    if ctype == "application/apply-patch+yaml":
        path += "?fieldManager=fuzz"
    status, reply = server.rest(method, path, json.dumps(body).encode(), {"Content-Type": ctype})
    assert not _server_error(status, reply), (status, reply[:500])


def test_rest_deep_and_huge_inputs(server: Server) -> None:
    deep = b"[" * 1000 + b"]" * 1000
    for body in (deep, b'{"metadata": ' * 1000 + b"1" + b"}" * 1000):
        status, reply = server.rest("POST", "/api/v1/namespaces/default/pods", body,
                                    {"Content-Type": "application/json"})
        assert status == 400 and b"nests deeper than" in reply, (status, reply[:300])
    status, reply = server.rest("DELETE", "/api/v1/namespaces/default/pods/x", deep,
                                {"Content-Type": "application/json"})
    assert status == 400, reply[:300]
    for query in ("limit=99999999999999999999", "limit=-99999999999999999999",
                  "limit=0x10", "resourceVersion=99999999999999999999999"):
        status, reply = server.rest("GET", f"/api/v1/pods?{query}")
        assert status == 400, (query, status, reply[:300])
    status, reply = server.rest("DELETE", "/api/v1/namespaces/default/pods/x?gracePeriodSeconds=99999999999999999")
    assert status in (400, 404), reply[:300]
    # Lone UTF-16 surrogates (no text at all) become U+FFFD, as Go's decoder reads them.
    for ctype in ("application/json", "application/apply-patch+yaml"):
        status, reply = server.rest("POST", "/api/v1/namespaces/default/pods?fieldManager=t", rb'{"\ud800": 1}',
                                    {"Content-Type": ctype})
        assert status == 400 or status == 422, (ctype, status, reply[:300])
    assert server.unary("Namespaces", "Get", b"") == grpc.StatusCode.INVALID_ARGUMENT  # empty name


@FUZZ
@given(params=st.dictionaries(
    st.sampled_from(["limit", "continue", "resourceVersion", "resourceVersionMatch", "labelSelector",
                     "fieldSelector", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents",
                     "gracePeriodSeconds", "propagationPolicy", "dryRun", "fieldManager", "pretty"]),
    st.text(alphabet=st.characters(codec="ascii"), max_size=40) | st.integers().map(str), max_size=5),
    path=st.sampled_from(["/api/v1/pods", "/api/v1/namespaces/default/pods", "/api/v1/nodes",
                          "/api/v1/namespaces/default/events", "/api/v1/namespaces",
                          "/api/v1/namespaces/default/pods/x",
                          "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"]),
    method=st.sampled_from(["GET", "DELETE"]),
    accept=st.sampled_from(["application/json", "application/json;as=Table;v=v1;g=meta.k8s.io", "*/*",
                            "application/vnd.kubernetes.protobuf", "text/html", "garbage;;=", ""]))
def test_rest_queries_and_headers(server: Server, params: dict[str, str], path: str, method: str,
                                  accept: str) -> None:
    from urllib.parse import urlencode
    params.pop("watch", None)  # a watch stays open by design; its options are fuzzed on lists
    status, reply = server.rest(method, f"{path}?{urlencode(params)}", headers={"Accept": accept} if accept else {})
    assert not _server_error(status, reply), (status, params, reply[:500])


@FUZZ
@given(header=st.sampled_from(["Authorization", "Content-Type", "Accept", "User-Agent", "Impersonate-User"]),
       value=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300))
def test_rest_headers(server: Server, header: str, value: str) -> None:
    status, reply = server.rest("GET", "/api/v1/namespaces/default/pods", headers={header: value})
    assert not _server_error(status, reply), (status, header, value, reply[:300])


UNARY = ["Create", "Get", "List", "Update", "UpdateStatus", "Delete"]
SERVICES: dict[str, type[Message]] = {"Pods": core_pb2.Pod, "Nodes": core_pb2.Node, "Events": core_pb2.Event,
                                      "Namespaces": core_pb2.Namespace, "Leases": coordination_pb2.Lease}
REQUEST: dict[str, type[Message]] = {"Get": meta_pb2.GetRequest, "List": meta_pb2.ListRequest,
                                     "Delete": meta_pb2.DeleteRequest, "Bind": core_pb2.Binding}


@FUZZ
@given(service=st.sampled_from(sorted(SERVICES)), method=st.sampled_from([*UNARY, "Bind"]),
       body=st.binary(max_size=300))
def test_grpc_random_bytes(server: Server, service: str, method: str, body: bytes) -> None:
    if method == "Bind" and service != "Pods":
        return
    assert server.unary(service, method, body) not in BAD_GRPC


def _message(draw: st.DrawFn, message_type: type[Message], depth: int = 0) -> Message:
    """A valid message of the type with random values in random fields (nested ones too)."""
    msg = message_type()
    for field in message_type.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= 4 or field.message_type.full_name.startswith("google.protobuf.Struct"):
                continue
            if field.message_type.GetOptions().map_entry:
                entries = draw(st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=3))
                value_field = field.message_type.fields_by_name["value"]
                if value_field.type == FieldDescriptor.TYPE_STRING:
                    getattr(msg, field.name).update(entries)
                continue
            sub_type = type(getattr(message_type(), field.name)) if not _repeated(field) else None
            if sub_type is None:
                child = getattr(msg, field.name).add()
                child.CopyFrom(_message(draw, type(child), depth + 1))
            else:
                getattr(msg, field.name).CopyFrom(_message(draw, sub_type, depth + 1))
            continue
        value = draw(_scalar(field))
        if _repeated(field):
            getattr(msg, field.name).append(value)
        else:
            setattr(msg, field.name, value)
    return msg


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=40) | st.sampled_from(["default", "kube-system", "x", "-1", "0", "Always", "True"])
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=20)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(allow_nan=False, width=32)
    if t == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values])
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return st.integers(min_value=-(2**31), max_value=2**31 - 1)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.integers(min_value=0, max_value=2**32 - 1)
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.integers(min_value=0, max_value=2**64 - 1)
    return st.integers(min_value=-(2**63), max_value=2**63 - 1)


@FUZZ
@given(data=st.data(), service=st.sampled_from(sorted(SERVICES)), method=st.sampled_from([*UNARY, "Bind"]))
def test_grpc_random_messages(server: Server, data: st.DataObject, service: str, method: str) -> None:
    if method == "Bind" and service != "Pods":
        return
    message_type = REQUEST.get(method, SERVICES[service])
    msg = data.draw(st.composite(lambda draw: _message(draw, message_type))())
    code = server.unary(service, method, msg.SerializeToString())
    assert code not in BAD_GRPC, (service, method, msg)


_PROTOBUF_KINDS = [("v1", "Pod", "/api/v1/namespaces/default/pods"),
                   ("apps/v1", "Deployment", "/apis/apps/v1/namespaces/default/deployments"),
                   ("v1", "Secret", "/api/v1/namespaces/default/secrets"),
                   ("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
                   ("events.k8s.io/v1", "Event", "/apis/events.k8s.io/v1/namespaces/default/events")]


@FUZZ
@given(data=st.data(), target=st.sampled_from(_PROTOBUF_KINDS), method=st.sampled_from(["POST", "PUT"]))
def test_rest_protobuf_bodies(server: Server, data: st.DataObject, target: tuple[str, str, str], method: str
                              ) -> None:
    """Kubernetes protobuf bodies: upstream's message of the kind with random values in random
    fields (times, quantities, int-or-strings, embedded JSON), or random bytes as the object."""
    from apiserver.endpoints.rest.protobuf import wire

    api_version, kind, path = target
    message_type = wire().message_class(wire().kind_message(api_version, kind) or "")
    if data.draw(st.booleans()):
        raw = data.draw(st.composite(lambda draw: _message(draw, message_type))()).SerializeToString()
    else:
        raw = data.draw(st.binary(max_size=300))
    unknown = wire().message_class(wire().kinds["runtime/Unknown"])()
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind, unknown.raw = api_version, kind, raw
    body = b"k8s\x00" + unknown.SerializeToString()
    status, reply = server.rest(method, path + ("" if method == "POST" else "/fuzzed"), body,
                                {"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert not _server_error(status, reply), (status, reply[:500])

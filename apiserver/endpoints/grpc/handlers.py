"""The gRPC front end: each resource's service, as its scheme entry describes it, mapped
onto its Registry through the request pipeline.

Handlers are built by hand (there are no generated servicers: the services are the
scheme's) so that watch events, already encoded once by the watch cache, are written as
bytes without re-encoding, and so that a malformed request is a clear INVALID_ARGUMENT.
This module only decodes requests, describes them to the pipeline, calls the registry
(or a subresource's handler) and hands back the answer.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from apiserver.endpoints.impersonation import impersonation_of
from apiserver.endpoints.pipeline import Pipeline, Served, certificate_user_pem
from apiserver.endpoints.request import Credentials, RequestInfo, SubresourceHandler, dry_run_requested
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.deadline import until
from kubeling.kjson import to_json
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import meta_pb2

__all__ = ["service_handler", "watch_stream", "WATCH_BATCH_BYTES", "describe_call"]

# A batch of watch events is at most this big (gRPC's default message limit is 4 MiB).
WATCH_BATCH_BYTES = 1 << 20
_BATCH_TAG = bytes([(3 << 3) | 2])  # field 3 (`batch`) of every <Kind>WatchEvent, length-delimited


def _serialize(msg: Any) -> bytes:
    data: bytes = msg.SerializeToString()
    return data


def _decode(message_type: Any, body: bytes) -> Any:
    """Requests are decoded here, not by gRPC, so that a malformed body is a clear
    INVALID_ARGUMENT instead of gRPC's INTERNAL "Exception deserializing request!"."""
    try:
        return message_type.FromString(body)
    except DecodeError as err:
        raise errors.BadRequest(f"the request is not a valid {message_type.DESCRIPTOR.full_name}: {err}") from None


_NONE = Credentials()


def _credentials(context: grpc.aio.ServicerContext, pipeline: Pipeline) -> Credentials:
    """What the call presented (nothing read when nothing authenticates: a plain-text port)."""
    if pipeline.authenticator is None:
        return _NONE
    pem = context.auth_context().get("x509_pem_cert")
    metadata = [(str(k), str(v)) for k, v in context.invocation_metadata() or ()]
    authorization = next((v for k, v in metadata if k == "authorization"), None)
    return Credentials(certificate_user_pem(pem[0]) if pem else None, authorization, impersonation_of(metadata))


def describe_call(served: Served, context: grpc.aio.ServicerContext, method: str) -> None:
    """What the audit log says of a call besides its request: the method, the peer's
    address and the client's user agent."""
    if served.pipeline.auditor is None:
        return
    served.uri = method
    peer = context.peer() or ""  # ipv4:127.0.0.1:5555, ipv6:[::1]:5555, unix:...
    kind, _, address = peer.partition(":")
    served.source_ip = address.rsplit(":", 1)[0].strip("[]") if kind in ("ipv4", "ipv6") else ""
    served.user_agent = next((str(v) for k, v in context.invocation_metadata() or () if k == "user-agent"), "")


def _audit_request(served: Served, request: Any) -> None:
    if served.audit is not None and served.audit.wants_request and isinstance(request, Message):
        served.audit.request_object = to_json(request)


def _audit_response(served: Served, response: Any) -> None:
    audit = served.audit
    if audit is None or not isinstance(response, Message):
        return
    if audit.wants_response:
        audit.response_object = to_json(response)
    metadata = getattr(response, "metadata", None)
    if audit.unnamed_create and metadata is not None:
        audit.named(metadata.name)


def _dry_run(context: grpc.aio.ServicerContext) -> bool:
    values = [str(v) for k, v in context.invocation_metadata() or () if k == "dry-run"]
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def _scope(request: Any) -> tuple[str, str]:
    """(namespace, name) a request names: an object's metadata, or the request's fields."""
    meta = getattr(request, "metadata", None)
    if meta is not None:
        return meta.namespace, meta.name
    return getattr(request, "namespace", ""), getattr(request, "name", "")


async def _abort(context: grpc.aio.ServicerContext, err: errors.ApiError) -> None:
    await context.abort(err.code, err.message, err.trailing_metadata())


class _Resource:
    """One resource's handlers."""

    def __init__(self, rt: ResourceType[Any], registry: Registry[Any], pipeline: Pipeline,
                 subresources: Mapping[str, SubresourceHandler]) -> None:
        self.rt = rt
        self.registry = registry
        self.pipeline = pipeline
        self.subresources = subresources

    def info(self, verb: str, request: Any, subresource: str = "") -> RequestInfo:
        """What the request does; a list or watch without a namespace asks across all."""
        namespace, name = _scope(request)
        if self.rt.namespaced and verb not in ("list", "watch"):
            namespace = namespace or "default"
        return RequestInfo.of(verb, self.rt, namespace, name, subresource)

    def unary(self, verb: str, rbac_verb: str, request_type: Any, call: Callable[[Any], Awaitable[Any]],
              subresource: str = "") -> grpc.RpcMethodHandler:
        async def handler(body: bytes, context: grpc.aio.ServicerContext) -> Any:
            try:
                with self.pipeline.serve(verb, self.rt.plural) as served:
                    served.authenticate(_credentials(context, self.pipeline))
                    describe_call(served, context, f"/{self.rt.service_name}/{verb}")
                    dry_run_requested.set(_dry_run(context))
                    request = _decode(request_type, body)
                    served.authorize(self.info(rbac_verb, request, subresource))
                    await served.admit()
                    _audit_request(served, request)
                    response = await call(request)
                    _audit_response(served, response)
                    return response
            except errors.ApiError as err:
                await _abort(context, err)

        return grpc.unary_unary_rpc_method_handler(handler, response_serializer=_serialize)

    def stream(self, verb: str, rbac_verb: str, request_type: Any,
               call: Callable[[Any], AsyncIterator[Any]], subresource: str = "",
               serializer: Callable[[Any], bytes] | None = _serialize) -> grpc.RpcMethodHandler:
        async def handler(body: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                with self.pipeline.serve(verb, self.rt.plural) as served:
                    served.authenticate(_credentials(context, self.pipeline))
                    describe_call(served, context, f"/{self.rt.service_name}/{verb}")
                    request = _decode(request_type, body)
                    served.authorize(self.info(rbac_verb, request, subresource))
                    await served.admit(long_running=True)  # watches and logs
                    async for item in call(request):
                        yield item
            except errors.ApiError as err:
                await _abort(context, err)

        return grpc.unary_stream_rpc_method_handler(handler, response_serializer=serializer)

    # ------------------------------------------------------------ verbs

    async def create(self, obj: Any) -> Any:
        return await self.registry.create(obj, dry_run=dry_run_requested.get())

    async def get(self, req: meta_pb2.GetRequest) -> Any:
        return await self.registry.get(req.namespace, req.name, req.resourceVersion)

    async def list(self, req: meta_pb2.ListRequest) -> Any:
        items, meta = await self.registry.list(req)
        out: Any = self.rt.list_message(metadata=meta)
        out.items.extend(items)
        return out

    async def update(self, obj: Any) -> Any:
        return await self.registry.update(obj, dry_run=dry_run_requested.get())

    async def update_status(self, obj: Any) -> Any:
        return await self.registry.update(obj, status=True, dry_run=dry_run_requested.get())

    async def delete(self, req: meta_pb2.DeleteRequest) -> Any:
        grace = req.gracePeriodSeconds if req.HasField("gracePeriodSeconds") else None
        pre = req.preconditions if req.HasField("preconditions") else None
        policy = req.propagationPolicy if req.HasField("propagationPolicy") else None
        return await self.registry.delete(req.namespace, req.name, grace_seconds=grace, preconditions=pre,
                                          propagation=policy, dry_run=dry_run_requested.get())

    async def watch(self, req: meta_pb2.WatchRequest) -> AsyncIterator[bytes]:
        gauge = self.pipeline.metrics.watchers.labels(self.rt.plural)
        gauge.inc()
        try:
            async for data in watch_stream(await self.registry.watch(req), req):
                yield data
        finally:
            gauge.dec()


async def watch_stream(watcher: Any, req: meta_pb2.WatchRequest) -> AsyncIterator[bytes]:
    """A registry's watcher as the gRPC Watch answers: its events (batched when asked),
    until the request's timeoutSeconds; its error, when it ends with one, raised."""
    deadline = time.monotonic() + req.timeoutSeconds if req.timeoutSeconds > 0 else None
    stream = _batched(watcher.stream_batches(WATCH_BATCH_BYTES)) if req.batchEvents else watcher.stream()
    async for data in (stream if deadline is None else until(stream, deadline)):
        yield data
    if deadline is not None:
        watcher.terminate()
    if watcher.error is not None:
        raise watcher.error


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


async def _batched(batches: AsyncIterator[list[bytes]]) -> AsyncIterator[bytes]:
    """Each batch of encoded events as one message: alone as it is, several as the
    `batch` field's entries (the encoded events, framed, are that field's encoding)."""
    async for batch in batches:
        if len(batch) == 1:
            yield batch[0]
        else:
            yield b"".join(_BATCH_TAG + _varint(len(data)) + data for data in batch)


def service_handler(rt: ResourceType[Any], registry: Registry[Any], pipeline: Pipeline,
                    subresources: Mapping[str, SubresourceHandler] | None = None) -> grpc.GenericRpcHandler:
    """The resource's service: its verbs, and each subresource method that has a handler
    in `subresources` (by the method's name, or by the subresource's for its one method)."""
    r = _Resource(rt, registry, pipeline, subresources or {})
    own = rt.message
    methods: dict[str, grpc.RpcMethodHandler] = {
        "Create": r.unary("CREATE", "create", own, r.create),
        "Get": r.unary("GET", "get", meta_pb2.GetRequest, r.get),
        "List": r.unary("LIST", "list", meta_pb2.ListRequest, r.list),
        "Update": r.unary("UPDATE", "update", own, r.update),
        "Delete": r.unary("DELETE", "delete", meta_pb2.DeleteRequest, r.delete),
        "Watch": r.stream("WATCH", "watch", meta_pb2.WatchRequest, r.watch, serializer=None),
    }
    if rt.has_status:
        methods["UpdateStatus"] = r.unary("UPDATE_STATUS", "update", own, r.update_status, "status")
    for sub in rt.subresources:
        for method in sub.methods:
            # a handler by the method's name, or (its one method) by the subresource's
            handle = r.subresources.get(method.name) or (r.subresources.get(sub.name) if method is sub.method
                                                          else None)
            if handle is None:
                continue
            # the metrics' verb, as the method is named (CreateToken: CREATE_TOKEN); RBAC's, the method's or
            # the subresource's first
            verb = re.sub(r"(?<!^)(?=[A-Z])", "_", method.name).upper()
            rbac_verb = method.rbac_verb or sub.verbs[0]
            if method.streaming:
                def items(req: Any, handle: SubresourceHandler = handle) -> AsyncIterator[Any]:
                    result: AsyncIterator[Any] = handle(req, False)
                    return result
                methods[method.name] = r.stream(verb, rbac_verb, method.request, items, sub.name)
            else:
                async def call(req: Any, handle: SubresourceHandler = handle) -> Any:
                    return await handle(req, dry_run_requested.get())
                methods[method.name] = r.unary(verb, rbac_verb, method.request, call, sub.name)
    return grpc.method_handlers_generic_handler(rt.service_name, methods)

"""The gRPC service of every resource kept as JSON (kubeling.v1.CustomResources):
CustomResourceDefinitions and the custom resources they define, named in each request by
group, version and plural, through the same pipeline and registries as the REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc

from apiserver.endpoints.grpc.handlers import (
    _abort,
    _credentials,
    _decode,
    _dry_run,
    _serialize,
    describe_call,
    watch_stream,
)
from apiserver.endpoints.pipeline import Pipeline
from apiserver.endpoints.request import RequestInfo, dry_run_requested
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.scheme import CUSTOM_SERVICE, ResourceType, Scheme
from protos.kubeling.v1 import custom_pb2

__all__ = ["custom_service_handler"]

Registries = Mapping[ResourceType[Any], Registry[Any]]


def _resolve(scheme: Scheme, registries: Registries, gvr: custom_pb2.GroupVersionResource,
             ) -> tuple[ResourceType[Any], Registry[Any]]:
    rt = scheme.lookup(gvr.group, gvr.version, gvr.resource)
    registry = registries.get(rt) if rt is not None else None
    if rt is None or not rt.custom or registry is None:
        raise errors.NotFound(f"the server could not find the requested resource "
                              f"({gvr.resource}.{gvr.group}/{gvr.version})")
    return rt, registry


def custom_service_handler(scheme: Scheme, registries: Registries, pipeline: Pipeline) -> grpc.GenericRpcHandler:
    def info(verb: str, rt: ResourceType[Any], namespace: str, name: str, sub: str = "") -> RequestInfo:
        if rt.namespaced and verb not in ("list", "watch"):
            namespace = namespace or "default"
        return RequestInfo.of(verb, rt, namespace if rt.namespaced else "", name, sub)

    def unary(verb: str, rbac_verb: str, request_type: Any,
              call: Callable[[Any, ResourceType[Any], Registry[Any]], Awaitable[Any]],
              sub: str = "") -> grpc.RpcMethodHandler:
        async def handler(body: bytes, context: grpc.aio.ServicerContext) -> Any:
            try:
                with pipeline.serve(verb, "customresources") as served:
                    served.authenticate(_credentials(context, pipeline))
                    describe_call(served, context, f"/kubeling.v1.CustomResources/{verb}")
                    dry_run_requested.set(_dry_run(context))
                    request = _decode(request_type, body)
                    rt, registry = _resolve(scheme, registries, request.resource)
                    served.resource = rt.plural
                    namespace, name = _scope(request)
                    served.authorize(info(rbac_verb, rt, namespace, name, sub))
                    await served.admit()
                    return await call(request, rt, registry)
            except errors.ApiError as err:
                await _abort(context, err)

        return grpc.unary_unary_rpc_method_handler(handler, response_serializer=_serialize)

    async def create(req: custom_pb2.CustomObjectRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        return await reg.create(_object(req, rt), dry_run=dry_run_requested.get())

    async def get(req: custom_pb2.CustomGetRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        return await reg.get(req.request.namespace, req.request.name)

    async def list_(req: custom_pb2.CustomListRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        items, meta = await reg.list(req.request)
        return custom_pb2.CustomResourceList(metadata=meta, items=items)

    async def update(req: custom_pb2.CustomObjectRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        return await reg.update(_object(req, rt), dry_run=dry_run_requested.get())

    async def update_status(req: custom_pb2.CustomObjectRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        if not rt.has_status:
            raise errors.NotFound(f"{rt.group_resource} has no status subresource")
        return await reg.update(_object(req, rt), status=True, dry_run=dry_run_requested.get())

    async def update_approval(req: custom_pb2.CustomObjectRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        if not any(sub.name == "approval" for sub in rt.subresources):
            raise errors.NotFound(f"{rt.group_resource} has no approval subresource")
        return await reg.update(_object(req, rt), approval=True, dry_run=dry_run_requested.get())

    async def delete(req: custom_pb2.CustomDeleteRequest, rt: ResourceType[Any], reg: Registry[Any]) -> Any:
        r = req.request
        return await reg.delete(r.namespace, r.name,
                                grace_seconds=r.gracePeriodSeconds if r.HasField("gracePeriodSeconds") else None,
                                preconditions=r.preconditions if r.HasField("preconditions") else None,
                                propagation=r.propagationPolicy if r.HasField("propagationPolicy") else None,
                                dry_run=dry_run_requested.get())

    async def watch(body: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            with pipeline.serve("WATCH", "customresources") as served:
                served.authenticate(_credentials(context, pipeline))
                request = _decode(custom_pb2.CustomWatchRequest, body)
                rt, registry = _resolve(scheme, registries, request.resource)
                served.resource = rt.plural
                req = request.request
                served.authorize(info("watch", rt, req.namespace, ""))
                await served.admit(long_running=True)
                async for data in watch_stream(await registry.watch(req), req):
                    yield data
        except errors.ApiError as err:
            await _abort(context, err)

    methods = {
        "Create": unary("CREATE", "create", custom_pb2.CustomObjectRequest, create),
        "Get": unary("GET", "get", custom_pb2.CustomGetRequest, get),
        "List": unary("LIST", "list", custom_pb2.CustomListRequest, list_),
        "Update": unary("UPDATE", "update", custom_pb2.CustomObjectRequest, update),
        "UpdateStatus": unary("UPDATE_STATUS", "update", custom_pb2.CustomObjectRequest, update_status, "status"),
        "UpdateApproval": unary("UPDATE_APPROVAL", "update", custom_pb2.CustomObjectRequest, update_approval,
                                "approval"),
        "Delete": unary("DELETE", "delete", custom_pb2.CustomDeleteRequest, delete),
        "Watch": grpc.unary_stream_rpc_method_handler(watch, response_serializer=None),
    }
    return grpc.method_handlers_generic_handler(CUSTOM_SERVICE, methods)


def _scope(request: Any) -> tuple[str, str]:
    if isinstance(request, custom_pb2.CustomObjectRequest):
        return request.object.metadata.namespace, request.object.metadata.name
    inner = request.request
    return getattr(inner, "namespace", ""), getattr(inner, "name", "")


def _object(req: custom_pb2.CustomObjectRequest, rt: ResourceType[Any]) -> custom_pb2.CustomResource:
    obj = req.object
    if obj.apiVersion and obj.apiVersion != rt.api_version or obj.kind and obj.kind != rt.kind:
        raise errors.BadRequest(f"the object is a {obj.apiVersion}/{obj.kind}, this resource takes "
                                f"{rt.api_version}/{rt.kind}")
    return obj

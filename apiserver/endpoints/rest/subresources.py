"""The REST subresources that are more than an update (status is one: `handlers`):
scale, pods' ephemeralcontainers, binding, eviction, log and the upgraded streams (exec,
attach, portforward), serviceaccounts' token. Binding, eviction, log and token decode the
body here and are served by the same handlers as their gRPC methods."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from apiserver.endpoints.request import SubresourceHandler
from apiserver.endpoints.rest.codec import from_json, to_json
from apiserver.endpoints.rest.handlers import (
    PATCH_TYPES,
    body_of,
    check_scope,
    decode,
    object_json,
    object_response,
    patched,
)
from apiserver.endpoints.rest.request import Target, dry_run, flag, int_query, respond
from apiserver.endpoints.rest.scale import Scales, patched_scale, replicas_from
from apiserver.endpoints.rest.status import MethodNotAllowed, UnsupportedMediaType
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.core.pod_streams import PodStreams, connect_options
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.upgradeproxy import ProxyError, is_upgrade, proxy_upgrade
from protos.kubeling.v1 import api_pb2, authentication_pb2, core_pb2, policy_pb2

__all__ = ["STREAMS", "Subresources"]

log = logging.getLogger(__name__)

STREAMS = ("exec", "attach", "portforward")  # pod subresources that upgrade the connection
_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class Subresources:
    def __init__(self, handlers: Mapping[tuple[Any, str], SubresourceHandler], pod_streams: PodStreams | None) -> None:
        self.handlers = handlers
        self.pod_streams = pod_streams

    def _handler(self, t: Target) -> SubresourceHandler:
        handler = self.handlers.get((t.resource, t.sub))
        if handler is None:
            raise MethodNotAllowed(f"{t.resource.plural}/{t.sub} is not served")
        return handler

    async def serve(self, request: web.Request, t: Target, registry: Registry[Any]) -> web.StreamResponse | None:
        """The subresource's answer; None when the method is not one it takes."""
        method, sub = request.method, t.sub
        if sub == "log" and method == "GET":
            return await self.log(request, t)
        if sub == "binding" and method == "POST":
            return await self.binding(request, t)
        if sub == "token" and method == "POST":
            return await self.token(request, t)
        if sub == "eviction" and method == "POST":
            return await self.eviction(request, t)
        if sub == "ephemeralcontainers" and method == "GET":
            return object_response(request, t, await registry.get(t.namespace, t.name))
        if sub == "resize" and method == "GET":
            return object_response(request, t, await registry.get(t.namespace, t.name), 200)
        if sub == "resize" and method in ("PUT", "PATCH"):
            return await ephemeral_containers(request, t, registry, resize=True)
        if sub == "finalize" and method == "PUT":
            return await finalize(request, t, registry)
        if sub == "ephemeralcontainers" and method in ("PUT", "PATCH"):
            return await ephemeral_containers(request, t, registry)
        if sub in STREAMS and method in ("GET", "POST"):
            return await self.stream(request, t, registry)
        if sub == "scale" and method in ("GET", "PUT", "PATCH"):
            return await scale(request, t, registry)
        return None

    async def binding(self, request: web.Request, t: Target) -> web.Response:
        data = await body_of(request, t)
        if isinstance(data, dict) and data.get("kind") not in (None, "Binding"):
            raise errors.BadRequest(f"pods/binding takes a Binding, not a {data.get('kind')}")
        binding: Any = from_json(data, core_pb2.Binding).message
        binding.metadata.namespace = binding.metadata.namespace or t.namespace
        binding.metadata.name = binding.metadata.name or t.name
        if binding.metadata.name != t.name or binding.metadata.namespace != t.namespace:
            raise errors.BadRequest("the binding's name and namespace must be the pod's")
        await self._handler(t)(binding, False)
        return respond(request, _CREATED, 201)

    async def eviction(self, request: web.Request, t: Target) -> web.Response:
        data = await body_of(request, t)
        if not isinstance(data, dict) or data.get("kind") not in (None, "Eviction"):
            what = data.get("kind") if isinstance(data, dict) else type(data).__name__
            raise errors.BadRequest(f"pods/eviction takes an Eviction, not a {what}")
        if data.get("apiVersion") not in (None, "policy/v1", "policy/v1beta1"):
            raise errors.BadRequest(f"pods/eviction takes a policy/v1 Eviction, not {data.get('apiVersion')}")
        eviction: Any = from_json(data, policy_pb2.Eviction).message
        meta = eviction.metadata
        meta.namespace = meta.namespace or t.namespace
        if meta.name != t.name:
            raise errors.BadRequest("name in URL does not match name in Eviction object")
        if meta.namespace != t.namespace:
            raise errors.BadRequest("the namespace of the Eviction does not match the namespace on the URL")
        await self._handler(t)(eviction, dry_run(request))
        return respond(request, _CREATED, 201)

    async def token(self, request: web.Request, t: Target) -> web.Response:
        handler = self.handlers.get((t.resource, t.sub))
        if handler is None:
            raise errors.NotFound("the server could not find the requested resource")
        data = await body_of(request, t)
        if isinstance(data, dict) and data.get("kind") not in (None, "TokenRequest"):
            raise errors.BadRequest(f"serviceaccounts/token takes a TokenRequest, not a {data.get('kind')}")
        req: Any = from_json(data, authentication_pb2.TokenRequest).message
        if req.metadata.name not in ("", t.name) or req.metadata.namespace not in ("", t.namespace):
            raise errors.BadRequest("the TokenRequest's name and namespace must be the ServiceAccount's")
        req.metadata.name, req.metadata.namespace = t.name, t.namespace
        answer = await handler(req, False)
        return respond(request, {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                                 **to_json(answer)}, 201)

    async def log(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        req = api_pb2.PodLogRequest(namespace=t.namespace, name=t.name, container=q.get("container", ""),
                                    follow=flag(q.get("follow")), previous=flag(q.get("previous")),
                                    timestamps=flag(q.get("timestamps")))
        for number in ("tailLines", "limitBytes", "sinceSeconds"):
            if number in q:
                setattr(req, number, int_query(q, number))
        req.sinceTime = q.get("sinceTime", "")
        chunks = self._handler(t)(req, False).__aiter__()
        try:
            first = await chunks.__anext__()  # errors (no such container, no node) are a Status
        except StopAsyncIteration:
            first = None
        if is_websocket(request):
            return await _log_websocket(request, first, chunks, t)
        if first is None:
            return web.Response(body=b"", content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(first.data)
        try:
            async for chunk in chunks:
                await response.write(chunk.data)
        except errors.ApiError as err:
            log.info("log stream of %s/%s ended: %s", t.namespace, t.name, err.message)
        await response.write_eof()
        return response

    async def stream(self, request: web.Request, t: Target, registry: Registry[Any]) -> web.StreamResponse:
        """exec, attach, portforward: admitted (CONNECT), then relayed to the pod's kubelet
        once located."""
        streams = self.pod_streams
        if streams is None:
            raise MethodNotAllowed(f"pods/{t.sub} is not served")
        if registry.admission is not None:
            kind, options = connect_options(t.sub, request.query)
            await registry.admission.connect(t.resource.plural, t.sub, t.namespace, t.name, kind, options)
        locate = {"exec": streams.exec_url, "attach": streams.attach_url,
                  "portforward": streams.port_forward_url}[t.sub]
        url = await locate(t.namespace, t.name, request.query)
        if not is_upgrade(request):
            raise errors.BadRequest("Upgrade request required")
        try:
            return await proxy_upgrade(request, url, ssl_context=streams.locator.ssl)
        except ProxyError as exc:
            raise errors.ServiceUnavailable(f"cannot reach the kubelet of pod {t.namespace}/{t.name}: {exc}") \
                from None


_LOG_PROTOCOLS = ("binary.k8s.io", "base64.binary.k8s.io")


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def _log_websocket(request: web.Request, first: api_pb2.PodLogChunk | None,
                         chunks: AsyncIterator[api_pb2.PodLogChunk], t: Target) -> web.WebSocketResponse:
    """The log over a WebSocket, as upstream's wsstream reader: each chunk one message,
    binary (binary.k8s.io, or no protocol) or base64 text (base64.binary.k8s.io)."""
    ws = web.WebSocketResponse(protocols=_LOG_PROTOCOLS)
    await ws.prepare(request)
    encoded = ws.ws_protocol == "base64.binary.k8s.io"

    async def send(data: bytes) -> None:
        if encoded:
            await ws.send_str(base64.b64encode(data).decode())
        else:
            await ws.send_bytes(data)
    try:
        if first is not None:
            await send(first.data)
        async for chunk in chunks:
            await send(chunk.data)
    except errors.ApiError as err:
        log.info("log stream of %s/%s ended: %s", t.namespace, t.name, err.message)
    except ConnectionResetError:
        return ws  # the reader left
    await ws.close()
    return ws


async def ephemeral_containers(request: web.Request, t: Target, registry: Registry[Any],
                               resize: bool = False) -> web.Response:
    """pods/ephemeralcontainers (kubectl debug): a PUT or PATCH of the pod of which only
    spec.ephemeralContainers counts, and only additions to it; with `resize`, pods/resize:
    only the containers' resources count."""
    body = await body_of(request, t)
    kind = PATCH_TYPES.get(request.content_type) if request.method == "PATCH" else None
    if request.method == "PATCH" and kind in (None, "apply"):
        raise UnsupportedMediaType(f"pods/{t.sub} takes JSON, merge or strategic merge patches")
    for _ in range(10):
        current = await registry.get(t.namespace, t.name)
        wanted = body if kind is None else patched(kind, object_json(t.resource, current), body)
        obj, warnings = decode(request, t, wanted)
        check_scope(t, obj)
        if kind is not None:
            obj.metadata.resourceVersion = current.metadata.resourceVersion
        try:
            updated = await registry.update(obj, ephemeral=not resize, resize=resize, dry_run=dry_run(request))
        except errors.Conflict:
            if kind is None:
                raise
            continue
        return object_response(request, t, updated, 200, warnings)
    raise errors.Conflict(f'Operation cannot be fulfilled on pods "{t.name}": the pod kept changing')


async def finalize(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    """namespaces/finalize: a PUT of the namespace of which only spec.finalizers counts."""
    obj, warnings = decode(request, t, await body_of(request, t))
    check_scope(t, obj)
    if obj.metadata.name != t.name:
        raise errors.BadRequest("the name of the object does not match the name on the URL")
    updated = await registry.update(obj, finalize=True, dry_run=dry_run(request))
    return object_response(request, t, updated, 200, warnings)


async def scale(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    sent = None if request.method == "GET" else await body_of(request, t)
    strategy = registry.strategy
    scales = Scales(strategy.version.scale if isinstance(strategy, CustomResourceStrategy) else None)
    for _ in range(10):
        current = await registry.get(t.namespace, t.name)
        if request.method == "GET":
            return respond(request, scales.of(current))
        body = sent
        if request.method == "PATCH":
            kind = PATCH_TYPES.get(request.content_type)
            if kind is None:
                raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media "
                                           f"types include: {', '.join(PATCH_TYPES)}")
            body = patched_scale(kind, scales.of(current), body)
        replicas, version = replicas_from(body, current)
        if version and version != current.metadata.resourceVersion:
            raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.group_resource} '
                                  f'"{t.name}": the object has been modified; please apply your changes to the '
                                  "latest version and try again")
        scales.set_replicas(current, replicas)
        try:
            updated = await registry.update(current, dry_run=dry_run(request))
        except errors.Conflict:
            if version:
                raise
            continue  # written in between: scale the newer object
        return respond(request, scales.of(updated))
    raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.plural} "{t.name}": '
                          "the object kept changing while it was scaled")

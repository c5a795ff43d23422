"""gRPC handlers: each service's methods mapped onto a Registry.

Handlers are built by hand (not the generated add_*_to_server) so that watch events,
already encoded once by the watch cache, are written as bytes without re-encoding.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from cryptography import x509
from google.protobuf.message import DecodeError
from opentelemetry import trace

from apiserver.auth.authentication import ANONYMOUS, Authenticator, UserInfo, current_user, user_from_certificate
from apiserver.auth.authorization import Authorizer, require
from apiserver.auth.rbac import Attributes
from apiserver.endpoints.metrics import Metrics
from apiserver.endpoints.rest.resources import RESOURCES
from apiserver.registry.core.pod_binding import bind
from apiserver.registry.core.pod_eviction import Evictions
from apiserver.registry.core.pod_log import PodLogProxy
from apiserver.registry.core.serviceaccount_token import TokenRequests
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.deadline import until
from protos.kubeling.v1 import api_pb2, authentication_pb2, core_pb2, meta_pb2, policy_pb2

__all__ = ["service_handler", "SERVICE_NAMES"]

log = logging.getLogger(__name__)

SERVICE_NAMES = {"pods": "Pods", "nodes": "Nodes", "namespaces": "Namespaces", "events": "Events",
                 "leases": "Leases", "roles": "Roles", "clusterroles": "ClusterRoles",
                 "rolebindings": "RoleBindings", "clusterrolebindings": "ClusterRoleBindings",
                 "serviceaccounts": "ServiceAccounts", "configmaps": "ConfigMaps", "secrets": "Secrets",
                 "replicasets": "ReplicaSets", "deployments": "Deployments", "jobs": "Jobs",
                 "priorityclasses": "PriorityClasses", "poddisruptionbudgets": "PodDisruptionBudgets",
                 "services": "Services", "endpoints": "EndpointsService", "endpointslices": "EndpointSlices"}


def _serialize(msg: Any) -> bytes:
    return msg.SerializeToString()


def _decode(message_type: Any, body: bytes) -> Any:
    """Requests are decoded here, not by gRPC, so that a malformed body is a clear
    INVALID_ARGUMENT instead of gRPC's INTERNAL "Exception deserializing request!"."""
    try:
        return message_type.FromString(body)
    except DecodeError as err:
        raise errors.BadRequest(f"the request is not a valid {message_type.DESCRIPTOR.full_name}: {err}") from None


# This call's dryRun (the client's `dry-run: All` metadata), for the write it makes.
dry_run_requested: contextvars.ContextVar[bool] = contextvars.ContextVar("dry_run_requested", default=False)


def _dry_run(context: grpc.aio.ServicerContext) -> bool:
    values = [str(v) for k, v in context.invocation_metadata() or () if k == "dry-run"]
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def _unary(metrics: Metrics, verb: str, resource: str, fn: Callable[[Any], Awaitable[Any]],
           request_type: Any, authenticator: Authenticator | None) -> grpc.RpcMethodHandler:
    async def handler(body: bytes, context: grpc.aio.ServicerContext) -> Any:
        start, code, request = time.perf_counter(), "OK", None
        try:
            current_user.set(_authenticate(authenticator, context))
            dry_run_requested.set(_dry_run(context))
            request = _decode(request_type, body)
            return await fn(request)
        except errors.ApiError as err:
            code = err.code.name
            await context.abort(err.code, err.message, err.trailing_metadata())
        except Exception as err:
            code = "INTERNAL"
            log.exception("%s %s failed", verb, resource)
            internal = errors.InternalError(f"{verb} {resource}: internal error: {type(err).__name__}: {err}")
            await context.abort(internal.code, internal.message, internal.trailing_metadata())
        finally:
            elapsed = time.perf_counter() - start
            metrics.observe(verb, resource, code, elapsed)
            if log.isEnabledFor(logging.DEBUG):
                user = current_user.get()
                log.debug("%s %s %s code=%s %.1fms peer=%s user=%s", verb, resource, _target(request), code,
                          elapsed * 1000, context.peer(), user.name if user else "-")

    return grpc.unary_unary_rpc_method_handler(handler, response_serializer=_serialize)


def _target(request: Any) -> str:
    """namespace/name (or the list's scope) of a request, for logs."""
    if request is None:
        return "-"
    meta = getattr(request, "metadata", None)
    if meta is not None:
        namespace, name = meta.namespace, meta.name
    else:
        namespace, name = getattr(request, "namespace", ""), getattr(request, "name", "")
    target = f"{namespace}/{name}" if namespace else (name or "*")
    selectors = [s for s in (getattr(request, "labelSelector", ""), getattr(request, "fieldSelector", "")) if s]
    return target + (f" [{' '.join(selectors)}]" if selectors else "")


# A batch of watch events is at most this big (gRPC's default message limit is 4 MiB).
WATCH_BATCH_BYTES = 1 << 20
_BATCH_TAG = bytes([(3 << 3) | 2])  # field 3 (`batch`) of every <Kind>WatchEvent, length-delimited


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


def _authenticate(authenticator: Authenticator | None, context: grpc.aio.ServicerContext) -> UserInfo:
    """The caller: its verified client certificate, else a bearer token in `authorization`
    (no authenticator: nothing to tell callers apart by, everyone is anonymous)."""
    if authenticator is None:
        return ANONYMOUS
    pem = context.auth_context().get("x509_pem_cert")
    authorization = next((str(v) for k, v in context.invocation_metadata() or () if k == "authorization"), None)
    user = authenticator.authenticate(_certificate_user(pem[0]) if pem else None, authorization)
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("user", user.name)
    return user


@functools.lru_cache(maxsize=1024)
def _certificate_user(pem: bytes) -> UserInfo:
    return user_from_certificate(x509.load_pem_x509_certificate(pem))


def _watch(metrics: Metrics, registry: Registry[Any], authenticator: Authenticator | None,
           allow: Callable[[meta_pb2.WatchRequest], None]) -> grpc.RpcMethodHandler:
    resource = registry.strategy.plural
    gauge = metrics.watchers.labels(resource)

    async def handler(body: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        start, code = time.perf_counter(), "OK"
        gauge.inc()
        request = None
        try:
            current_user.set(_authenticate(authenticator, context))
            request = _decode(meta_pb2.WatchRequest, body)
            allow(request)
            watcher = await registry.watch(request)
            deadline = time.monotonic() + request.timeoutSeconds if request.timeoutSeconds > 0 else None
            stream = _batched(watcher.stream_batches(WATCH_BATCH_BYTES)) if request.batchEvents else watcher.stream()
            if deadline is None:
                async for data in stream:
                    yield data
            else:
                async for data in until(stream, deadline):
                    yield data
                watcher.terminate()
            if watcher.error is not None:
                raise watcher.error
        except errors.ApiError as err:
            code = err.code.name
            await context.abort(err.code, err.message, err.trailing_metadata())
        except Exception as err:
            code = "INTERNAL"
            log.exception("watch %s failed", resource)
            await context.abort(grpc.StatusCode.INTERNAL, f"watch {resource}: internal error: {err}")
        finally:
            gauge.dec()
            elapsed = time.perf_counter() - start
            metrics.observe("WATCH", resource, code, elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("WATCH %s %s ended code=%s after %.1fs peer=%s", resource, _target(request), code,
                          elapsed, context.peer())

    return grpc.unary_stream_rpc_method_handler(handler, response_serializer=None)


def _pod_log(metrics: Metrics, proxy: PodLogProxy, authenticator: Authenticator | None,
             allow: Callable[[api_pb2.PodLogRequest], None]) -> grpc.RpcMethodHandler:
    async def handler(body: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        start, code = time.perf_counter(), "OK"
        try:
            current_user.set(_authenticate(authenticator, context))
            request = _decode(api_pb2.PodLogRequest, body)
            allow(request)
            async for chunk in proxy.stream(request):
                yield chunk
        except errors.ApiError as err:
            code = err.code.name
            await context.abort(err.code, err.message, err.trailing_metadata())
        finally:
            metrics.observe("GET_LOG", "pods", code, time.perf_counter() - start)

    return grpc.unary_stream_rpc_method_handler(handler, response_serializer=_serialize)


def service_handler(registry: Registry[Any], metrics: Metrics, pod_logs: PodLogProxy | None = None,
                    authenticator: Authenticator | None = None, authorizer: Authorizer | None = None,
                    tokens: TokenRequests | None = None, evictions: Evictions | None = None,
                    ) -> grpc.GenericRpcHandler:
    authn = authenticator
    strategy = registry.strategy
    resource = strategy.plural
    msg = strategy.message
    group = next((r.group for r in RESOURCES if r.plural == resource), "")

    def allow(verb: str, namespace: str, name: str = "", sub: str = "") -> None:
        """The caller may do this, or Forbidden (as the REST API decides it)."""
        if authorizer is not None:
            user = current_user.get() or ANONYMOUS
            namespace = (namespace or "default") if strategy.namespaced else ""
            require(authorizer, Attributes(user, verb, True, namespace, group, resource, sub, name))

    async def create(obj: Any) -> Any:
        allow("create", obj.metadata.namespace, obj.metadata.name)
        return await registry.create(obj, dry_run=dry_run_requested.get())

    async def get(req: meta_pb2.GetRequest) -> Any:
        allow("get", req.namespace, req.name)
        return await registry.get(req.namespace, req.name)

    async def list_(req: meta_pb2.ListRequest) -> Any:
        if req.namespace or not strategy.namespaced:
            allow("list", req.namespace)
        else:
            allow_all("list")
        items, meta = await registry.list(req)
        out: Any = strategy.list_message(metadata=meta)
        out.items.extend(items)
        return out

    def allow_all(verb: str) -> None:
        """Across every namespace (a list or watch without one): asked at the cluster scope."""
        if authorizer is not None:
            user = current_user.get() or ANONYMOUS
            require(authorizer, Attributes(user, verb, True, "", group, resource))

    def allow_watch(req: meta_pb2.WatchRequest) -> None:
        if req.namespace or not strategy.namespaced:
            allow("watch", req.namespace)
        else:
            allow_all("watch")

    def allow_log(req: api_pb2.PodLogRequest) -> None:
        allow("get", req.namespace, req.name, "log")

    async def update(obj: Any) -> Any:
        allow("update", obj.metadata.namespace, obj.metadata.name)
        return await registry.update(obj, dry_run=dry_run_requested.get())

    async def update_status(obj: Any) -> Any:
        allow("update", obj.metadata.namespace, obj.metadata.name, "status")
        return await registry.update(obj, status=True, dry_run=dry_run_requested.get())

    async def delete(req: meta_pb2.DeleteRequest) -> Any:
        allow("delete", req.namespace, req.name)
        grace = req.gracePeriodSeconds if req.HasField("gracePeriodSeconds") else None
        pre = req.preconditions if req.HasField("preconditions") else None
        policy = req.propagationPolicy if req.HasField("propagationPolicy") else None
        return await registry.delete(req.namespace, req.name, grace_seconds=grace, preconditions=pre,
                                     propagation=policy, dry_run=dry_run_requested.get())

    methods: dict[str, grpc.RpcMethodHandler] = {
        "Create": _unary(metrics, "CREATE", resource, create, msg, authn),
        "Get": _unary(metrics, "GET", resource, get, meta_pb2.GetRequest, authn),
        "List": _unary(metrics, "LIST", resource, list_, meta_pb2.ListRequest, authn),
        "Update": _unary(metrics, "UPDATE", resource, update, msg, authn),
        "Delete": _unary(metrics, "DELETE", resource, delete, meta_pb2.DeleteRequest, authn),
        "Watch": _watch(metrics, registry, authn, allow_watch),
    }
    if strategy.has_status:
        methods["UpdateStatus"] = _unary(metrics, "UPDATE_STATUS", resource, update_status, msg, authn)
    if resource == "pods":
        async def bind_(b: core_pb2.Binding) -> Any:
            allow("create", b.metadata.namespace, b.metadata.name, "binding")
            return await bind(registry, b)
        methods["Bind"] = _unary(metrics, "BIND", resource, bind_, core_pb2.Binding, authn)
        if pod_logs is not None:
            methods["Log"] = _pod_log(metrics, pod_logs, authn, allow_log)
        if evictions is not None:
            async def evict(e: policy_pb2.Eviction) -> Any:
                allow("create", e.metadata.namespace, e.metadata.name, "eviction")
                return await evictions.evict(e, dry_run=dry_run_requested.get())
            methods["Evict"] = _unary(metrics, "EVICT", resource, evict, policy_pb2.Eviction, authn)
    if resource == "serviceaccounts" and tokens is not None:
        async def create_token(req: authentication_pb2.TokenRequest) -> Any:
            allow("create", req.metadata.namespace, req.metadata.name, "token")
            return await tokens.create(req)
        methods["CreateToken"] = _unary(metrics, "CREATE_TOKEN", resource, create_token,
                                        authentication_pb2.TokenRequest, authn)
    return grpc.method_handlers_generic_handler(f"kubeling.v1.{SERVICE_NAMES[resource]}", methods)

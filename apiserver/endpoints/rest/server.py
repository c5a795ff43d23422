"""The Kubernetes REST API over the apiserver's registries: what kubectl and the official
clients use. Every verb goes to the same Registry (storage, validation, watch cache) as
the gRPC API; this module only translates URLs, JSON, patches, tables and errors.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography import x509
from opentelemetry import propagate, trace
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apiserver.auth.authentication import ANONYMOUS, Authenticator, UserInfo, current_user, user_from_certificate
from apiserver.auth.authorization import EVERYTHING, Authorizer, require
from apiserver.auth.rbac import Attributes
from apiserver.endpoints.metrics import Metrics
from apiserver.endpoints.rest import patch as patches
from apiserver.endpoints.rest import resources as res
from apiserver.endpoints.rest.apply import apply, record_update
from apiserver.endpoints.rest.codec import from_json, to_json
from apiserver.endpoints.rest.protobuf import PROTOBUF, decode_envelope
from apiserver.endpoints.rest.request import (
    MAX_BODY,
    Target,
    dry_run,
    field_manager,
    flag,
    int_query,
    json_response,
    negotiate_output,
    now_text,
    parse_document,
    read_body,
    warning_header,
)
from apiserver.endpoints.rest.scale import patched_scale, replicas_from, scale_of
from apiserver.endpoints.rest.status import MethodNotAllowed, UnsupportedMediaType, http_code, status_json
from apiserver.endpoints.rest.tables import table
from apiserver.endpoints.rest.watch import serve_watch
from apiserver.registry.core.pod_binding import bind
from apiserver.registry.core.pod_eviction import Evictions
from apiserver.registry.core.pod_log import PodLogProxy
from apiserver.registry.core.pod_streams import PodStreams
from apiserver.registry.core.serviceaccount_token import TokenRequests
from apiserver.registry.generic.store import Registry
from apiserver.registry.metrics import GROUP as METRICS_GROUP
from apiserver.registry.metrics import PREFIX as METRICS_PREFIX
from apiserver.registry.metrics import MetricsAPI
from kubeling import errors
from kubeling.http import start_site
from kubeling.telemetry import tracer
from kubeling.upgradeproxy import ProxyError, is_upgrade, proxy_upgrade
from protos.kubeling.v1 import api_pb2, authentication_pb2, core_pb2, meta_pb2, policy_pb2

__all__ = ["RestServer"]

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)

SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"  # `kubectl auth whoami`
# `kubectl auth can-i VERB RESOURCE` and `kubectl auth can-i --list`
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
_REVIEWS = {SELF_SUBJECT_REVIEWS: ("authentication.k8s.io", "selfsubjectreviews"),
            ACCESS_REVIEWS: ("authorization.k8s.io", "selfsubjectaccessreviews"),
            RULES_REVIEWS: ("authorization.k8s.io", "selfsubjectrulesreviews")}
_RESOURCE = web.RequestKey("resource", str)  # the request's resource, for metrics and errors
_STREAMS = ("exec", "attach", "portforward")  # pod subresources that upgrade the connection
_PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
                "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply"}


@dataclass
class RestServer:
    registries: dict[str, Registry[Any]]  # by plural: every resource's
    pod_logs: PodLogProxy
    pod_streams: PodStreams
    metrics: Metrics
    ready: Callable[[], tuple[bool, str]] = field(default=lambda: (True, "ok"))
    authenticator: Authenticator = field(default_factory=Authenticator)
    authorizer: Authorizer | None = None  # None: every request is allowed
    ssl_context: ssl.SSLContext | None = None  # HTTPS (and client certificates) when set
    tokens: TokenRequests | None = None  # serviceaccounts/token
    evictions: Evictions | None = None  # pods/eviction
    metrics_api: MetricsAPI | None = None  # metrics.k8s.io (kubectl top)
    port: int = 0
    _runner: web.AppRunner | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self, listen: str) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # Cancel a handler when its client goes away: a watch must not outlive its reader.
        # At stop, open streams (log follows) get 2 s, not aiohttp's 60, before they are cut.
        self._runner, self.port = await start_site(app, listen, ssl_context=self.ssl_context,
                                                   handler_cancellation=True, shutdown_timeout=2.0)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.shutdown()
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ routing

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        start, verb, code = time.perf_counter(), request.method, 200
        user: UserInfo | None = None
        try:
            user = self.authenticator.authenticate(_peer_user(request), request.headers.get("Authorization"))
            current_user.set(user)
            response = await self._route(request)
            code = response.status
            return response
        except errors.ApiError as err:
            code = http_code(err)
            return json_response(status_json(err, request.get(_RESOURCE, "")), code)
        except asyncio.CancelledError:
            code = 499  # the client went away
            raise
        except Exception as err:
            log.exception("%s %s failed", request.method, request.path)
            internal = errors.InternalError(f"{request.method} {request.path}: internal error: "
                                            f"{type(err).__name__}: {err}")
            code = 500
            return json_response(status_json(internal), 500)
        finally:
            elapsed = time.perf_counter() - start
            resource = request.get(_RESOURCE, "-")
            self.metrics.observe(f"REST_{verb}", resource, str(code), elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s %d %.1fms user=%s", request.method, request.path_qs, code, elapsed * 1000,
                          user.name if user else "-")

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        metrics = _metrics_target(path) if self.metrics_api is not None else None
        if metrics is not None:
            if self.authorizer is not None:
                resource, namespace, name = metrics
                require(self.authorizer, Attributes(current_user.get() or ANONYMOUS, "get" if name else "list", True,
                                                    namespace, METRICS_GROUP, resource, "", name))
            return await self._metrics(request, *metrics)
        target = self._target(path)
        if self.authorizer is not None:
            require(self.authorizer, _attributes(request, path, target))
        if request.method == "POST" and path in (ACCESS_REVIEWS, RULES_REVIEWS):
            return await self._access_review(request, path)
        simple = self._simple(request, path)
        if simple is not None:
            return simple
        if target is None:
            raise errors.NotFound("the server could not find the requested resource")
        request[_RESOURCE] = target.resource.plural
        if request.method == "GET" or target.sub in _STREAMS:  # a session (exec's POST) is no write
            return await self._resource(request, target)
        # Writes are traced as the gRPC ones are (a pod created here starts its trace).
        user = current_user.get()
        with _TRACER.start_as_current_span(f"{request.method} {target.template}", kind=trace.SpanKind.SERVER,
                                           context=propagate.extract(request.headers),
                                           attributes={"http.request.method": request.method,
                                                       "url.path": request.path,
                                                       "user": user.name if user else ""}):
            return await self._resource(request, target)

    async def _access_review(self, request: web.Request, path: str) -> web.Response:
        """SelfSubjectAccessReview (may I do this?) and SelfSubjectRulesReview (what may I do
        here?), answered by the authorizer that decides the requests themselves."""
        body = await self._body(request)
        spec = body.get("spec") if isinstance(body, dict) else None
        if not isinstance(spec, dict):
            raise errors.BadRequest("spec: Required value: the review needs a spec object")
        user = current_user.get() or ANONYMOUS
        kind = "SelfSubjectAccessReview" if path == ACCESS_REVIEWS else "SelfSubjectRulesReview"
        if path == RULES_REVIEWS:
            namespace = spec.get("namespace", "")
            if not isinstance(namespace, str):
                raise errors.BadRequest("spec.namespace: Invalid value: must be a string")
            rules = self.authorizer.rules_for(user, namespace) if self.authorizer is not None else EVERYTHING
            status: dict[str, Any] = {
                "resourceRules": [{"verbs": list(r.verbs), "apiGroups": list(r.api_groups),
                                   "resources": list(r.resources),
                                   **({"resourceNames": list(r.resource_names)} if r.resource_names else {})}
                                  for r in rules if not r.non_resource_urls],
                "nonResourceRules": [{"verbs": list(r.verbs), "nonResourceURLs": list(r.non_resource_urls)}
                                     for r in rules if r.non_resource_urls],
                "incomplete": False}
        else:
            attrs = _review_attributes(user, spec)
            allowed, reason = self.authorizer.authorize(attrs) if self.authorizer is not None else (True, "")
            status = {"allowed": allowed, **({"reason": reason} if reason else {})}
        return json_response({"kind": kind, "apiVersion": "authorization.k8s.io/v1",
                              "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}, 201)

    def _simple(self, request: web.Request, path: str) -> web.Response | None:
        if path == SELF_SUBJECT_REVIEWS and request.method == "POST":
            return _self_subject_review()
        if path in ("/healthz", "/livez"):
            return web.Response(text="ok")
        if path == "/readyz":
            ok, why = self.ready()
            return web.Response(text=why, status=200 if ok else 503)
        if path == "/version":
            return json_response(res.VERSION)
        if path == "/metrics" and request.method == "GET":  # authorized as a non-resource URL, as upstream
            return web.Response(body=generate_latest(self.metrics.registry),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})
        if path == "/api":
            return json_response(res.api_versions(f"{request.host}"))
        if path == "/apis":
            return json_response(res.api_group_list())
        if path.startswith("/apis/") and path.count("/") == 2 and path[6:] in res.GROUPS:
            return json_response(res.api_group(path[6:]))
        if path == "/openapi/v3":
            return json_response(res.openapi_index())
        if path.startswith("/openapi/v3/"):
            doc = res.openapi_document(path[len("/openapi/v3/"):])
            if doc is None:
                raise errors.NotFound("the server could not find the requested resource")
            return json_response(doc)
        parts = path.split("/")[1:]
        if parts[0] == "api" and len(parts) == 2 or parts[0] == "apis" and len(parts) == 3:
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            listing = res.resource_list(group, version)
            if listing is None:
                raise errors.NotFound("the server could not find the requested resource")
            return json_response(listing)
        return None

    @staticmethod
    def _target(path: str) -> Target | None:
        parts = path.split("/")[1:]
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = res.by_path(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        resource = res.by_path(group, version, rest[0])
        if resource is None or len(rest) > 3:
            return None
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in resource.subresources:
            return None
        if resource.namespaced and name and not namespace:
            return None
        return Target(resource, namespace, name, sub)

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        if dry_run(request) and t.sub in ("binding", "token", "log", *_STREAMS):
            raise errors.BadRequest(f"dryRun is not supported for {t.resource.plural}/{t.sub}")
        if t.sub not in ("log", *_STREAMS):
            negotiate_output(request)  # an answer the client cannot read is refused before anything is written
        method = request.method
        if not t.name:
            if method == "GET":
                watch = request.query.get("watch", "").lower() in ("1", "true")
                return await (serve_watch(request, t, self._registry(t)) if watch else self._list(request, t))
            if method == "POST":
                return await self._create(request, t)
            if method == "DELETE" and t.resource.namespaced:
                return await self._delete_collection(request, t)
        elif t.sub == "log":
            if method == "GET":
                return await self._log(request, t)
        elif t.sub == "binding":
            if method == "POST":
                return await self._bind(request, t)
        elif t.sub == "token":
            if method == "POST":
                return await self._token(request, t)
        elif t.sub == "eviction":
            if method == "POST":
                return await self._evict(request, t)
        elif t.sub == "ephemeralcontainers":
            if method == "GET":
                return self._object_response(request, t, await self._registry(t).get(t.namespace, t.name))
            if method in ("PUT", "PATCH"):
                return await self._ephemeral(request, t)
        elif t.sub in _STREAMS:
            if method in ("GET", "POST"):
                return await self._stream(request, t)
        elif t.sub == "scale":
            if method in ("GET", "PUT", "PATCH"):
                return await self._scale(request, t)
        else:
            if method == "GET":
                return self._object_response(request, t, await self._registry(t).get(t.namespace, t.name))
            if method == "PUT":
                return await self._update(request, t)
            if method == "PATCH":
                return await self._patch(request, t)
            if method == "DELETE":
                return await self._delete(request, t)
        raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({method})")

    def _registry(self, t: Target) -> Registry[Any]:
        return self.registries[t.resource.plural]

    # ------------------------------------------------------------------ encoding

    @staticmethod
    def _object_json(r: res.Resource, obj: Any) -> dict[str, Any]:
        return {"kind": r.kind, "apiVersion": r.api_version, **to_json(obj)}

    def _object_response(self, request: web.Request, t: Target, obj: Any, status: int = 200,
                         warnings: list[str] | None = None) -> web.Response:
        out = negotiate_output(request)
        body = self._object_json(t.resource, obj)
        if out.as_table:
            body = table(t.resource.plural, [body], include_object=out.include_object)
        headers = {"Warning": ", ".join(warning_header(w) for w in warnings)} if warnings else None
        return json_response(body, status, headers)

    async def _body(self, request: web.Request) -> Any:
        raw = await read_body(request)
        ctype = request.content_type
        if ctype == PROTOBUF:
            return decode_envelope(raw)
        return parse_document(raw, "the request body",
                              yaml_body=ctype in ("application/yaml", "application/apply-patch+yaml"))

    def _decode(self, request: web.Request, t: Target, data: Any) -> tuple[Any, list[str]]:
        """The body as the resource's message; unknown fields refused (Strict) or returned
        as warnings (Warn, the default) or dropped (Ignore)."""
        r = t.resource
        message = self._registry(t).strategy.message
        if isinstance(data, dict):
            kind, api_version = data.get("kind"), data.get("apiVersion")
            if kind and kind != r.kind or api_version and api_version != r.api_version:
                raise errors.BadRequest(f"the body is a {api_version}/{kind}, this endpoint takes "
                                        f"{r.api_version}/{r.kind}")
        decoded = from_json(data, message)
        mode = request.query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            raise errors.BadRequest(f'fieldValidation: invalid value "{mode}": must be Ignore, Warn or Strict')
        if decoded.unknown and mode == "Strict":
            listed = ", ".join(f'unknown field "{p}"' for p in decoded.unknown)
            raise errors.BadRequest(f'{r.kind} in version "{r.version}" cannot be handled as a {r.kind}: '
                                    f"strict decoding error: {listed}")
        warnings = [f'unknown field "{p}"' for p in decoded.unknown] if mode == "Warn" else []
        return decoded.message, warnings

    def _check_scope(self, t: Target, obj: Any) -> None:
        meta = obj.metadata
        if t.resource.namespaced:
            if not meta.namespace:
                meta.namespace = t.namespace
            elif t.namespace and meta.namespace != t.namespace:
                raise errors.BadRequest("the namespace of the provided object does not match the namespace "
                                        "sent on the request")
        if t.name and meta.name and meta.name != t.name:
            raise errors.BadRequest("the name of the object "
                                    f"({meta.name}) does not match the name on the URL ({t.name})")
        if t.name and not meta.name:
            meta.name = t.name

    # ------------------------------------------------------------------ verbs

    async def _list(self, request: web.Request, t: Target) -> web.Response:
        out = negotiate_output(request)
        q = request.query
        req = meta_pb2.ListRequest(namespace=t.namespace, labelSelector=q.get("labelSelector", ""),
                                   fieldSelector=q.get("fieldSelector", ""), limit=int_query(q, "limit"),
                                   resourceVersion=q.get("resourceVersion", ""), **{"continue": q.get("continue", "")})
        items, meta = await self._registry(t).list(req)
        list_meta = to_json(meta)
        objects = [to_json(o) for o in items]
        if out.as_table:
            typed = [{"kind": t.resource.kind, "apiVersion": t.resource.api_version, **o} for o in objects]
            return json_response(table(t.resource.plural, typed, include_object=out.include_object,
                                        list_meta=list_meta))
        return json_response({"kind": f"{t.resource.kind}List", "apiVersion": t.resource.api_version,
                               "metadata": list_meta, "items": objects})

    async def _create(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        if isinstance(body, dict):
            record_update(None, body, field_manager(request), now_text())
        obj, warnings = self._decode(request, t, body)
        self._check_scope(t, obj)
        created = await self._registry(t).create(obj, dry_run=dry_run(request))
        return self._object_response(request, t, created, 201, warnings)

    async def _update(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        if t.sub != "status" and isinstance(body, dict):
            current = await self._registry(t).get(t.namespace, t.name)
            record_update(self._object_json(t.resource, current), body, field_manager(request), now_text())
        obj, warnings = self._decode(request, t, body)
        self._check_scope(t, obj)
        updated = await self._registry(t).update(obj, status=t.sub == "status", dry_run=dry_run(request))
        return self._object_response(request, t, updated, 200, warnings)

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        kind = _PATCH_TYPES.get(request.content_type)
        if kind is None:
            raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media types "
                                       f"include: {', '.join(_PATCH_TYPES)}")
        body = await self._body(request)
        registry = self._registry(t)
        if kind == "apply" and not request.query.get("fieldManager"):
            raise errors.BadRequest("PATCH, fieldManager: Required value: is required for apply patch")
        force = flag(request.query.get("force"))
        for _ in range(10):
            try:
                current = await registry.get(t.namespace, t.name)
            except errors.NotFound:
                if kind != "apply":
                    raise
                # Server-side apply creates what does not exist yet.
                applied = apply(None, body, field_manager(request), force=force, now=now_text())
                obj, warnings = self._decode(request, t, applied)
                self._check_scope(t, obj)
                return self._object_response(request, t, await registry.create(obj, dry_run=dry_run(request)),
                                             201, warnings)
            live = self._object_json(t.resource, current)
            if kind == "apply":
                patched = apply(live, body, field_manager(request), force=force, now=now_text())
            else:
                if kind == "json":
                    patched = patches.json_patch(live, body)
                elif kind == "merge":
                    patched = patches.merge_patch(live, body)
                else:
                    patched = patches.strategic_merge_patch(live, body)
                if t.sub != "status":
                    record_update(live, patched, field_manager(request), now_text())
            obj, warnings = self._decode(request, t, patched)
            self._check_scope(t, obj)
            pinned = _patch_sets_version(kind, body)
            if not pinned:
                obj.metadata.resourceVersion = current.metadata.resourceVersion
            try:
                updated = await registry.update(obj, status=t.sub == "status", dry_run=dry_run(request))
            except errors.Conflict:
                if pinned:
                    raise
                continue  # someone wrote in between: patch the newer object
            return self._object_response(request, t, updated, 200, warnings)
        raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.plural} "{t.name}": '
                              "the object kept changing while it was patched")

    async def _delete_options(self, request: web.Request) -> meta_pb2.DeleteOptions:
        """The DeleteOptions of a DELETE: its JSON or protobuf body (kubectl's typed clients,
        drain's, send protobuf) and the query's parameters, which win."""
        options = meta_pb2.DeleteOptions()
        if request.can_read_body:
            raw = await read_body(request)
            if raw.strip():
                data = decode_envelope(raw) if request.content_type == PROTOBUF else \
                    parse_document(raw, "the DeleteOptions")
                if not isinstance(data, dict):
                    raise errors.BadRequest("the DeleteOptions must be a JSON object")
                if data.get("kind") not in (None, "DeleteOptions"):
                    raise errors.BadRequest(f"the request body is a {data.get('kind')}, not DeleteOptions")
                options.CopyFrom(from_json(data, meta_pb2.DeleteOptions).message)
        q = request.query
        if "gracePeriodSeconds" in q:
            try:
                options.gracePeriodSeconds = int(q["gracePeriodSeconds"])
            except ValueError:
                raise errors.BadRequest(f'gracePeriodSeconds: invalid value "{q["gracePeriodSeconds"]}"') from None
        if "propagationPolicy" in q:
            options.propagationPolicy = q["propagationPolicy"]
        if "orphanDependents" in q:
            options.orphanDependents = flag(q["orphanDependents"])
        if dry_run(request):
            options.dryRun[:] = ["All"]
        for value in options.dryRun:
            if value != "All":
                raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return options

    @staticmethod
    def _delete_args(options: meta_pb2.DeleteOptions) -> dict[str, Any]:
        policy = options.propagationPolicy if options.HasField("propagationPolicy") else None
        if policy is None and options.HasField("orphanDependents"):  # the deprecated form
            policy = "Orphan" if options.orphanDependents else "Background"
        return {"grace_seconds": options.gracePeriodSeconds if options.HasField("gracePeriodSeconds") else None,
                "preconditions": options.preconditions if options.HasField("preconditions") else None,
                "propagation": policy, "dry_run": bool(options.dryRun)}

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
        options = await self._delete_options(request)
        deleted = await self._registry(t).delete(t.namespace, t.name, **self._delete_args(options))
        return self._object_response(request, t, deleted)

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        """DELETE on a collection (upstream's deletecollection): every object the label and
        field selectors match, each deleted as one DELETE would; the answer lists them."""
        options = await self._delete_options(request)
        q = request.query
        registry = self._registry(t)
        items, _ = await registry.list(meta_pb2.ListRequest(
            namespace=t.namespace, labelSelector=q.get("labelSelector", ""), fieldSelector=q.get("fieldSelector", "")))
        args = self._delete_args(options)
        args["preconditions"] = None  # per object: a collection has no single uid or version
        deleted = []
        for obj in items:
            try:
                deleted.append(await registry.delete(obj.metadata.namespace, obj.metadata.name, **args))
            except errors.NotFound:
                continue  # gone meanwhile
        r = t.resource
        return json_response({"kind": f"{r.kind}List", "apiVersion": r.api_version, "metadata": {},
                              "items": [to_json(o) for o in deleted]})

    async def _metrics(self, request: web.Request, resource: str, namespace: str, name: str) -> web.Response:
        """metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics (apiserver.registry.metrics)."""
        if request.method != "GET":
            raise MethodNotAllowed(f"the server does not allow this method on the requested resource "
                                   f"({request.method})")
        assert self.metrics_api is not None
        selector = request.query.get("labelSelector", "")
        if resource == "nodes":
            items = await self.metrics_api.node_metrics(name, selector)
            kind = "NodeMetrics"
        else:
            items = await self.metrics_api.pod_metrics(namespace, name, selector)
            kind = "PodMetrics"
        version = f"{METRICS_GROUP}/v1beta1"
        if name:
            return json_response({"kind": kind, "apiVersion": version, **items[0]})
        return json_response({"kind": f"{kind}List", "apiVersion": version, "metadata": {}, "items": items})

    async def _ephemeral(self, request: web.Request, t: Target) -> web.Response:
        """pods/ephemeralcontainers (kubectl debug): a PUT or PATCH of the pod of which only
        spec.ephemeralContainers counts, and only additions to it."""
        registry = self._registry(t)
        body = await self._body(request)
        kind = _PATCH_TYPES.get(request.content_type) if request.method == "PATCH" else None
        if request.method == "PATCH" and kind in (None, "apply"):
            raise UnsupportedMediaType("pods/ephemeralcontainers takes JSON, merge or strategic merge patches")
        for _ in range(10):
            current = await registry.get(t.namespace, t.name)
            if kind is None:
                wanted = body
            else:
                live = self._object_json(t.resource, current)
                wanted = patches.json_patch(live, body) if kind == "json" else patches.merge_patch(live, body) \
                    if kind == "merge" else patches.strategic_merge_patch(live, body)
            obj, warnings = self._decode(request, t, wanted)
            self._check_scope(t, obj)
            if kind is not None:
                obj.metadata.resourceVersion = current.metadata.resourceVersion
            try:
                updated = await registry.update(obj, ephemeral=True, dry_run=dry_run(request))
            except errors.Conflict:
                if kind is None:
                    raise
                continue
            return self._object_response(request, t, updated, 200, warnings)
        raise errors.Conflict(f'Operation cannot be fulfilled on pods "{t.name}": the pod kept changing')

    async def _evict(self, request: web.Request, t: Target) -> web.Response:
        if self.evictions is None:
            raise MethodNotAllowed("pods/eviction is not served")
        data = await self._body(request)
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
        await self.evictions.evict(eviction, dry_run=dry_run(request))
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, 201)

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        registry = self._registry(t)
        sent = None if request.method == "GET" else await self._body(request)
        for _ in range(10):
            current = await registry.get(t.namespace, t.name)
            if request.method == "GET":
                return json_response(scale_of(current))
            body = sent
            if request.method == "PATCH":
                kind = _PATCH_TYPES.get(request.content_type)
                if kind is None:
                    raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media "
                                               f"types include: {', '.join(_PATCH_TYPES)}")
                body = patched_scale(kind, current, body)
            replicas, version = replicas_from(body, current)
            if version and version != current.metadata.resourceVersion:
                raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.plural}.{t.resource.group} '
                                      f'"{t.name}": the object has been modified; please apply your changes to the '
                                      "latest version and try again")
            current.spec.replicas = replicas
            try:
                updated = await registry.update(current, dry_run=dry_run(request))
            except errors.Conflict:
                if version:
                    raise
                continue  # written in between: scale the newer object
            return json_response(scale_of(updated))
        raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.plural} "{t.name}": '
                              "the object kept changing while it was scaled")

    async def _bind(self, request: web.Request, t: Target) -> web.Response:
        data = await self._body(request)
        if isinstance(data, dict) and data.get("kind") not in (None, "Binding"):
            raise errors.BadRequest(f"pods/binding takes a Binding, not a {data.get('kind')}")
        decoded = from_json(data, core_pb2.Binding)
        binding: Any = decoded.message
        binding.metadata.namespace = binding.metadata.namespace or t.namespace
        binding.metadata.name = binding.metadata.name or t.name
        if binding.metadata.name != t.name or binding.metadata.namespace != t.namespace:
            raise errors.BadRequest("the binding's name and namespace must be the pod's")
        await bind(self.registries["pods"], binding)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                               "code": 201}, 201)

    async def _token(self, request: web.Request, t: Target) -> web.Response:
        if self.tokens is None:
            raise errors.NotFound("the server could not find the requested resource")
        data = await self._body(request)
        if isinstance(data, dict) and data.get("kind") not in (None, "TokenRequest"):
            raise errors.BadRequest(f"serviceaccounts/token takes a TokenRequest, not a {data.get('kind')}")
        req: Any = from_json(data, authentication_pb2.TokenRequest).message
        if req.metadata.name not in ("", t.name) or req.metadata.namespace not in ("", t.namespace):
            raise errors.BadRequest("the TokenRequest's name and namespace must be the ServiceAccount's")
        req.metadata.name, req.metadata.namespace = t.name, t.namespace
        answer = await self.tokens.create(req)
        return json_response({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", **to_json(answer)},
                             201)

    async def _log(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        req = api_pb2.PodLogRequest(namespace=t.namespace, name=t.name, container=q.get("container", ""),
                                    follow=flag(q.get("follow")), previous=flag(q.get("previous")),
                                    timestamps=flag(q.get("timestamps")))
        for number in ("tailLines", "limitBytes"):
            if number in q:
                setattr(req, number, int_query(q, number))
        chunks = self.pod_logs.stream(req).__aiter__()
        try:
            first = await chunks.__anext__()  # errors (no such container, no node) are a Status
        except StopAsyncIteration:
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

    async def _stream(self, request: web.Request, t: Target) -> web.StreamResponse:
        """exec, attach, portforward: relayed to the pod's kubelet once located."""
        locate = {"exec": self.pod_streams.exec_url, "attach": self.pod_streams.attach_url,
                  "portforward": self.pod_streams.port_forward_url}[t.sub]
        url = await locate(t.namespace, t.name, request.query)
        if not is_upgrade(request):
            raise errors.BadRequest("Upgrade request required")
        try:
            return await proxy_upgrade(request, url, ssl_context=self.pod_streams.locator.ssl)
        except ProxyError as exc:
            raise errors.ServiceUnavailable(f"cannot reach the kubelet of pod {t.namespace}/{t.name}: {exc}") \
                from None

def _patch_sets_version(kind: str, body: Any) -> bool:
    """Whether the patch pins metadata.resourceVersion (then a conflict is the client's)."""
    if kind == "json":
        return any(isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in body or [])
    return isinstance(body, dict) and bool((body.get("metadata") or {}).get("resourceVersion"))


def _peer_user(request: web.Request) -> UserInfo | None:
    """The user of the connection's client certificate (verified in the handshake), if any."""
    tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    der = tls.getpeercert(binary_form=True) if tls is not None else None
    return _certificate_user(der) if der else None


@functools.lru_cache(maxsize=1024)
def _certificate_user(der: bytes) -> UserInfo:
    return user_from_certificate(x509.load_der_x509_certificate(der))


def _self_subject_review() -> web.Response:
    """authentication.k8s.io/v1 SelfSubjectReview: who the server takes the caller for."""
    user = current_user.get()
    info: dict[str, Any] = {"username": user.name if user else ""}
    if user is not None and user.uid:
        info["uid"] = user.uid
    if user is not None and user.groups:
        info["groups"] = list(user.groups)
    return json_response({"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                          "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}}, 201)


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _metrics_target(path: str) -> tuple[str, str, str] | None:
    """(resource, namespace, name) of a metrics.k8s.io path, or None."""
    if not path.startswith(METRICS_PREFIX + "/"):
        return None
    parts = path[len(METRICS_PREFIX) + 1:].split("/")
    namespace = ""
    if len(parts) >= 3 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    if not parts or parts[0] not in ("nodes", "pods") or len(parts) > 2 or (parts[0] == "nodes" and namespace):
        return None
    return parts[0], namespace, parts[1] if len(parts) == 2 else ""


def _attributes(request: web.Request, path: str, target: Target | None) -> Attributes:
    """What the request does, in RBAC's terms (upstream's RequestInfo)."""
    user = current_user.get() or ANONYMOUS
    if path in _REVIEWS:
        group, resource = _REVIEWS[path]
        return Attributes(user, request.method.lower() if request.method != "POST" else "create", True, "", group,
                          resource)
    if target is None:
        return Attributes(user, request.method.lower(), False, path=path)
    r, method = target.resource, request.method
    if method == "GET":
        verb = "get" if target.name else "watch" if flag(request.query.get("watch")) else "list"
    elif method == "DELETE":
        verb = "delete" if target.name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Attributes(user, verb, True, target.namespace, r.group, r.plural, target.sub, target.name)


def _review_attributes(user: UserInfo, spec: dict[str, Any]) -> Attributes:
    """A SelfSubjectAccessReview's question as the authorizer's attributes."""
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(other, dict):
        raise errors.BadRequest("spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes "
                                "must be specified")

    def text(source: dict[str, Any], key: str) -> str:
        value = source.get(key, "")
        if not isinstance(value, str):
            raise errors.BadRequest(f"spec: {key}: Invalid value: must be a string")
        return value

    if isinstance(resource, dict):
        return Attributes(user, text(resource, "verb"), True, text(resource, "namespace"), text(resource, "group"),
                          text(resource, "resource"), text(resource, "subresource"), text(resource, "name"))
    assert isinstance(other, dict)
    return Attributes(user, text(other, "verb"), False, path=text(other, "path"))

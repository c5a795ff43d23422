"""The REST front end: the Kubernetes REST API that kubectl and the official clients use,
over the same registries as the gRPC API and through the same request pipeline. Here
only routing: the URL says what the request is (`routes`), the pipeline admits it, and a
verb (`handlers`), a subresource (`subresources`), a review or a document answers it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apiserver.admission.chain import request_warnings
from apiserver.aggregator import AggregatorProxy, Backend, aggregated_request_info, group_version_of
from apiserver.auth.authentication import ANONYMOUS, current_user
from apiserver.endpoints import pipeline as pipelines
from apiserver.endpoints.discovery import VERSION, Discovery, aggregated_version
from apiserver.endpoints.impersonation import impersonation_of
from apiserver.endpoints.pipeline import Pipeline
from apiserver.endpoints.request import Credentials, SubresourceHandler
from apiserver.endpoints.rest import handlers
from apiserver.endpoints.rest.openapi import OpenAPI
from apiserver.endpoints.rest.openapi_v2 import PROTOBUF_V2
from apiserver.endpoints.rest.proxy import serve_proxy
from apiserver.endpoints.rest.request import (
    JSON,
    MAX_BODY,
    Target,
    dry_run,
    dumps,
    flag,
    json_response,
    negotiate_output,
    warning_header,
)
from apiserver.endpoints.rest.reviews import access_review, self_subject_review, subject_access_review, token_review
from apiserver.endpoints.rest.routes import (
    ACCESS_REVIEWS,
    RULES_REVIEWS,
    SELF_SUBJECT_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Route,
    local_review_namespace,
    route,
)
from apiserver.endpoints.rest.status import MethodNotAllowed, NotAcceptable, http_code, status_json
from apiserver.endpoints.rest.subresources import STREAMS, Subresources
from apiserver.endpoints.rest.watch import EventLines, serve_watch
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.core.pod_streams import PodStreams
from apiserver.registry.core.proxy_location import ProxyLocator
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.http import start_site
from kubeling.scheme import ResourceType, Scheme, deletes_collections

__all__ = ["RestServer"]

log = logging.getLogger(__name__)

_REVIEW_PATHS = (ACCESS_REVIEWS, RULES_REVIEWS, SELF_SUBJECT_REVIEWS, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS)


def _http_code(err: errors.ApiError) -> str:
    return str(http_code(err))


@dataclass
class RestServer:
    scheme: Scheme
    registries: Mapping[ResourceType[Any], Registry[Any]]
    pipeline: Pipeline
    subresources: Mapping[tuple[ResourceType[Any], str], SubresourceHandler] = field(default_factory=dict)
    pod_streams: PodStreams | None = None  # pods/exec, attach, portforward
    ready: Callable[[], tuple[bool, str]] = field(default=lambda: (True, "ok"))
    ssl_context: ssl.SSLContext | None = None  # HTTPS (and client certificates) when set
    aggregator: AggregatorProxy | None = None  # the group-versions extension apiservers serve
    proxy: ProxyLocator | None = None  # pods/proxy, services/proxy, nodes/proxy
    port: int = 0
    _runner: web.AppRunner | None = None
    _proxy_session: aiohttp.ClientSession | None = None

    def __post_init__(self) -> None:
        self.discovery = Discovery(self.scheme, self._extra_groups)
        self.openapi = OpenAPI(self.scheme, self._custom_schema,
                               self.aggregator.remote.openapi_documents if self.aggregator is not None else None)
        self._subresources = Subresources(self.subresources, self.pod_streams)
        # each registry's recent watch events as JSON lines, shared by its watchers (a
        # custom resource's registry goes with its definition: weakly held)
        self._event_lines: weakref.WeakKeyDictionary[Registry[Any], EventLines] = weakref.WeakKeyDictionary()

    def _extra_groups(self) -> dict[str, dict[str, Any]]:
        """The groups served beside the scheme: the extension apiservers' (the metrics API's too)."""
        return self.aggregator.remote.groups() if self.aggregator is not None else {}

    def _custom_schema(self, r: ResourceType[Any]) -> dict[str, Any] | None:
        registry = self.registries.get(r)
        strategy = registry.strategy if registry is not None else None
        return strategy.schema if isinstance(strategy, CustomResourceStrategy) else None

    # ------------------------------------------------------------------ lifecycle

    async def start(self, listen: str) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_response_prepare.append(_flow_headers)
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
        if self._proxy_session is not None:
            await self._proxy_session.close()
            self._proxy_session = None

    # ------------------------------------------------------------------ dispatch

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        resource = ""
        warnings: list[str] = []
        request_warnings.set(warnings)  # what admission has to tell the client (Warning headers)
        try:
            with self.pipeline.serve(f"REST_{request.method}", "-", code_of=_http_code) as served:
                try:
                    served.uri, served.source_ip = request.path_qs, request.remote or ""
                    served.user_agent = request.headers.get("User-Agent", "")
                    served.authenticate(Credentials(_peer_user(request), request.headers.get("Authorization"),
                                                    impersonation_of(request.headers.items())))
                    found = route(self.scheme, request)
                    backend = self._aggregated(found)
                    if backend is not None:  # an extension apiserver's: authorized here, answered there
                        served.resource = backend.name
                        served.authorize(aggregated_request_info(found.path, request.method,
                                                                 flag(request.query.get("watch"))))
                        await served.admit(long_running=flag(request.query.get("watch")))
                        request[_PF_HEADERS] = served.flow_headers
                        assert self.aggregator is not None
                        response = await self.aggregator.serve(request, backend, current_user.get() or ANONYMOUS)
                        served.code = str(response.status)
                        return response
                    served.resource = resource = found.label
                    served.authorize(found.info)
                    try:
                        await served.admit(long_running=_long_running(found))
                    finally:
                        request[_PF_HEADERS] = served.flow_headers  # a 429 carries them too
                    await _audit_request(served, request)
                    response = await self._serve(request, found)
                    _audit_response(served, response)
                except asyncio.CancelledError:
                    served.code = "499"  # the client went away
                    raise
                served.code = str(response.status)
                return _with_warnings(response, warnings)
        except errors.ApiError as err:
            response = json_response(status_json(err, resource if resource != "-" else ""), http_code(err))
            if (response.status == 429 or response.status >= 500) and err.metadata.get("retryAfterSeconds"):
                # as upstream's responsewriters: a 429 or 5xx that says when tells it in the header too
                response.headers["Retry-After"] = err.metadata["retryAfterSeconds"]
            return _with_warnings(response, warnings)

    def _aggregated(self, found: Route) -> Backend | None:
        """The extension apiserver a request is for, if any (what the scheme serves is never)."""
        if self.aggregator is None or found.target is not None:
            return None
        group_version = group_version_of(found.path)
        return self.aggregator.remote.backend_for(*group_version) if group_version is not None else None

    async def _serve(self, request: web.Request, found: Route) -> web.StreamResponse:
        path = found.path
        if path in _REVIEW_PATHS or local_review_namespace(path):
            # reviews are answered, not stored: nothing to show as a Table (upstream's 406
            # for a backend without a table convertor)
            if negotiate_output(request).as_table:
                raise NotAcceptable("only the following media types are accepted: application/json, "
                                    "application/yaml, application/vnd.kubernetes.protobuf")
        if request.method == "POST" and path in (ACCESS_REVIEWS, RULES_REVIEWS):
            return await access_review(request, path, self.pipeline.authorizer)
        if request.method == "POST" and path == TOKEN_REVIEWS:
            return await token_review(request, self.pipeline.authenticator)
        if request.method == "POST" and (path == SUBJECT_ACCESS_REVIEWS or local_review_namespace(path)):
            return await subject_access_review(request, local_review_namespace(path), self.pipeline.authorizer)
        t = found.target
        if t is None:
            document = self._document(request, path)
            if document is None:
                raise errors.NotFound("the server could not find the requested resource")
            return document
        if request.method == "GET" or t.sub in STREAMS:  # a session (exec's POST) is no write
            return await self._resource(request, t)
        # Writes are traced as the gRPC ones are (a pod created here starts its trace).
        user = current_user.get()
        with self.pipeline.span(f"{request.method} {t.template}", request.headers,
                                **{"http.request.method": request.method, "url.path": request.path,
                                   "user": user.name if user else ""}):
            return await self._resource(request, t)

    def _document(self, request: web.Request, path: str) -> web.Response | None:
        """What is no resource: health, version, metrics, discovery, OpenAPI."""
        if path == SELF_SUBJECT_REVIEWS and request.method == "POST":
            return self_subject_review(request)
        if path in ("/healthz", "/livez"):
            return web.Response(text="ok")
        if path == "/readyz":
            ok, why = self.ready()
            return web.Response(text=why, status=200 if ok else 503)
        if path == "/version":
            return json_response(VERSION)
        if path == "/metrics" and request.method == "GET":  # authorized as a non-resource URL, as upstream
            return web.Response(body=generate_latest(self.pipeline.metrics.registry),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})
        if path in ("/api", "/apis"):
            version = aggregated_version(request.headers.get("Accept", ""))
            if version is not None:
                media = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
                return web.Response(body=dumps(self.discovery.aggregated(path == "/api", version)),
                                    headers={"Content-Type": media})
            if path == "/api":
                return json_response(self.discovery.api_versions(f"{request.host}"))
            return json_response(self.discovery.api_group_list())
        if path == "/openapi/v2":
            if "com.github.proto-openapi.spec.v2" in request.headers.get("Accept", ""):
                return web.Response(body=self.openapi.v2(protobuf=True), headers={"Content-Type": PROTOBUF_V2})
            return json_response(self.openapi.v2(protobuf=False))
        if path == "/openapi/v3":
            return json_response(self.openapi.index())
        if path.startswith("/openapi/v3/"):
            document = self.openapi.document(path[len("/openapi/v3/"):])
            return json_response(document) if document is not None else None
        parts = path.split("/")[1:]
        if parts[0] == "apis" and len(parts) == 2:
            api_group = self.discovery.api_group(parts[1])
            return json_response(api_group) if api_group is not None else None
        if parts[0] == "api" and len(parts) == 2 or parts[0] == "apis" and len(parts) == 3:
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            listing = self.discovery.resource_list(group, version)
            return json_response(listing) if listing is not None else None
        return None

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        if t.sub == "proxy":
            if self.proxy is None:
                raise MethodNotAllowed(f"{t.resource.plural}/proxy is not served")
            if self._proxy_session is None:
                self._proxy_session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                                                            auto_decompress=False)
            return await serve_proxy(request, t, self.proxy, self._proxy_session)
        if dry_run(request) and t.sub in ("binding", "token", "log", *STREAMS):
            raise errors.BadRequest(f"dryRun is not supported for {t.resource.plural}/{t.sub}")
        if t.sub not in ("log", *STREAMS):
            negotiate_output(request)  # an answer the client cannot read is refused before anything is written
        method, registry = request.method, self.registries[t.resource]
        if not t.name:
            if method == "GET":
                watch = request.query.get("watch", "").lower() in ("1", "true")
                if watch:
                    lines = self._event_lines.get(registry)
                    if lines is None:
                        lines = self._event_lines[registry] = EventLines()
                    return await serve_watch(request, t, registry, lines)
                return await handlers.list_(request, t, registry)
            if method == "POST":
                return await handlers.create(request, t, registry)
            if method == "DELETE" and deletes_collections(t.resource):
                return await handlers.delete_collection(request, t, registry)
        elif t.sub in ("", "status", "approval"):
            verb = {"GET": handlers.get, "PUT": handlers.update, "PATCH": handlers.patch}.get(method)
            if t.sub == "" and method == "DELETE":
                verb = handlers.delete
            if verb is not None:
                return await verb(request, t, registry)
        else:
            answer = await self._subresources.serve(request, t, registry)
            if answer is not None:
                return answer
        raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({method})")



_PF_HEADERS = web.RequestKey("pf_headers", dict)
_LONG_RUNNING_SUBRESOURCES = frozenset({*STREAMS, "log", "proxy"})


def _long_running(found: Route) -> bool:
    """Watches and streams hold no seat of Priority and Fairness (upstream's long-running
    requests: only their start is limited upstream)."""
    sub = found.target.sub if found.target is not None else ""
    return found.info.verb == "watch" or sub in _LONG_RUNNING_SUBRESOURCES


async def _audit_request(served: pipelines.Served, request: web.Request) -> None:
    """The request's object, for a level that records it (a JSON body; aiohttp keeps the
    bytes read for the handler)."""
    if served.audit is None or not served.audit.wants_request or request.method not in ("POST", "PUT", "PATCH"):
        return
    if request.content_type.endswith("json"):
        try:
            served.audit.request_object = json.loads(await request.read())
        except ValueError:
            pass  # the handler refuses it


def _audit_response(served: pipelines.Served, response: web.StreamResponse) -> None:
    """The response's object, for a level that records it; the name of what a create made."""
    audit = served.audit
    if audit is None or not (audit.wants_response or audit.unnamed_create) or not isinstance(response, web.Response):
        return
    if response.content_type == JSON and isinstance(response.body, bytes):
        try:
            answer = json.loads(response.body)
        except ValueError:
            return
        if audit.wants_response:
            audit.response_object = answer
        if audit.unnamed_create and isinstance(answer, dict):
            audit.named(str((answer.get("metadata") or {}).get("name", "")))


async def _flow_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Priority and Fairness's headers on every answer, streamed ones included."""
    for name, value in request.get(_PF_HEADERS, {}).items():
        response.headers[name] = value


def _with_warnings(response: web.StreamResponse, warnings: list[str]) -> web.StreamResponse:
    if warnings and not response.prepared:
        added = ", ".join(warning_header(w) for w in warnings)
        before = response.headers.get("Warning")
        response.headers["Warning"] = f"{before}, {added}" if before else added
    return response


def _peer_user(request: web.Request) -> Any:
    """The user of the connection's client certificate (verified in the handshake), if any."""
    tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    der = tls.getpeercert(binary_form=True) if tls is not None else None
    return pipelines.certificate_user_der(der) if der else None

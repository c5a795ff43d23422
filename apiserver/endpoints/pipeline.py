"""The request pipeline both front ends (gRPC and REST) put every request through, as
upstream's DefaultBuildHandlerChain does with its filters: authentication (who is asking),
request info (what the front end says the request does), authorization (may they), and
around the handler the request's metrics, trace span and log line, with any unexpected
failure turned into one InternalError. A front end only decodes its transport, describes
the request, calls the registry and encodes the answer.

    with pipeline.serve("CREATE", "pods") as req:
        req.authenticate(credentials)
        obj = decode(body)
        req.authorize(RequestInfo.of("create", scheme.PODS, obj.metadata.namespace, obj.metadata.name))
        return await registry.create(obj)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field

from cryptography import x509
from opentelemetry import propagate, trace

from apiserver.admission.chain import audit_annotations
from apiserver.audit import Auditor, AuditRecord
from apiserver.auth.authentication import ANONYMOUS, Authenticator, UserInfo, current_user, user_from_certificate
from apiserver.auth.authorization import Authorizer, require
from apiserver.endpoints.impersonation import impersonate
from apiserver.endpoints.metrics import Metrics
from apiserver.endpoints.request import Credentials, RequestInfo, http_code, yield_turn
from apiserver.flowcontrol import Admitted, FlowControl
from kubeling import errors
from kubeling.telemetry import tracer

__all__ = ["Pipeline", "Served", "certificate_user_der", "certificate_user_pem"]

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)


def _grpc_code(err: errors.ApiError) -> str:
    return err.code.name


@dataclass
class Served:
    """One request on its way through the pipeline: the front end sets `code` to what it
    answered (a gRPC code name or an HTTP status); the pipeline records it at the end."""

    pipeline: Pipeline
    verb: str  # the metrics' verb (CREATE, WATCH, REST_GET, ...)
    resource: str
    code: str = "OK"
    user: UserInfo | None = None
    info: RequestInfo | None = None
    admitted: Admitted | None = None  # what Priority and Fairness made of it
    # what the front end knows of the request, for the audit log
    uri: str = ""
    source_ip: str = ""
    user_agent: str = ""
    audit: AuditRecord | None = None  # its audit events (None: not audited)
    error: errors.ApiError | None = None  # how it was refused, if it was
    _start: float = field(default_factory=time.perf_counter)

    def authenticate(self, credentials: Credentials) -> UserInfo:
        self.user = self.pipeline.authenticate(credentials)
        return self.user

    def authorize(self, info: RequestInfo) -> None:
        """Authorization (Forbidden), audited: the request is known now — who asks what."""
        self.info = info
        auditor = self.pipeline.auditor
        if auditor is not None:
            self.audit = auditor.begin(self.user or ANONYMOUS, info, uri=self.uri, source_ip=self.source_ip,
                                       user_agent=self.user_agent)
            if self.audit is not None:
                audit_annotations.set(self.audit.annotations)  # admission's go to this request's events
        try:
            self.pipeline.authorize(info)
        except errors.ApiError:
            if self.audit is not None:
                self.audit.annotations["authorization.k8s.io/decision"] = "forbid"
            raise
        if self.audit is not None:
            self.audit.annotations["authorization.k8s.io/decision"] = "allow"

    async def admit(self, *, long_running: bool = False) -> None:
        """Priority and Fairness, after authorization: wait for this request's seats (given
        back when the request ends), or TooManyRequests. A long-running request starts
        answering now (its ResponseStarted audit event)."""
        control = self.pipeline.flow_control
        if control is not None and self.info is not None:
            self.admitted = Admitted()
            await control.admit(self.user or ANONYMOUS, self.info, self.admitted, long_running=long_running)
            if self.admitted.seat is not None and self.admitted.seat.width > 1:
                yield_turn.set(control.courtesy)
        if long_running and self.audit is not None:
            self.audit.started()

    def audit_code(self) -> int:
        """The HTTP status the request was answered with (a gRPC answer's, as REST's would be)."""
        if self.error is not None:
            return http_code(self.error)
        if self.code.isdigit():
            return int(self.code)
        return 201 if self.info is not None and self.info.verb == "create" else 200

    @property
    def flow_headers(self) -> dict[str, str]:
        """upstream's X-Kubernetes-PF-* response headers"""
        if self.admitted is None or not self.admitted.schema_uid:
            return {}
        return {"X-Kubernetes-PF-FlowSchema-UID": self.admitted.schema_uid,
                "X-Kubernetes-PF-PriorityLevel-UID": self.admitted.level_uid}

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start


@dataclass
class Pipeline:
    """authenticator None: nothing tells callers apart, everyone is anonymous (a plain-text
    gRPC port without tokens); authorizer None: every request is allowed."""

    metrics: Metrics
    authenticator: Authenticator | None = None
    authorizer: Authorizer | None = None
    flow_control: FlowControl | None = None
    auditor: Auditor | None = None

    def authenticate(self, credentials: Credentials) -> UserInfo:
        """The caller: its verified client certificate, else a bearer token; it is this
        request's user for admission and the registries (`current_user`)."""
        user = ANONYMOUS if self.authenticator is None else \
            self.authenticator.authenticate(credentials.certificate_user, credentials.authorization)
        if credentials.impersonation is not None:
            user = impersonate(user, credentials.impersonation, self.authorizer)
        current_user.set(user)
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute("user", user.name)
        return user

    def authorize(self, info: RequestInfo) -> None:
        """Forbidden, worded as upstream's, unless the authorizer allows the request."""
        if self.authorizer is not None:
            require(self.authorizer, info.attributes(current_user.get() or ANONYMOUS))

    @contextlib.contextmanager
    def serve(self, verb: str, resource: str, *,
              code_of: Callable[[errors.ApiError], str] = _grpc_code) -> Iterator[Served]:
        """Around one request: its metrics and debug log at the end, the code of a refusal
        as the front end reports it (`code_of`: gRPC's code name, REST's HTTP status). An
        exception that is no ApiError is logged and raised as an InternalError."""
        served = Served(self, verb, resource)
        try:
            yield served
        except errors.ApiError as err:
            served.code = code_of(err)
            served.error = err
            raise
        except Exception as err:  # not a cancel, nor a closed stream: those are BaseExceptions
            internal = errors.InternalError(f"{verb} {served.resource}: internal error: {type(err).__name__}: {err}")
            served.code = code_of(internal)
            served.error = internal
            log.exception("%s %s failed", verb, served.resource)
            raise internal from err
        finally:
            if served.admitted is not None:
                served.admitted.release()
            if served.audit is not None:
                failure = {"status": "Failure", "message": served.error.message, "reason": served.error.reason} \
                    if served.error is not None else None
                served.audit.completed(served.audit_code(), failure)
            elapsed = served.elapsed
            self.metrics.observe(verb, served.resource, served.code, elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s %s code=%s %.1fms user=%s", verb, served.resource,
                          served.info.target if served.info else "-", served.code, elapsed * 1000,
                          served.user.name if served.user else "-")

    @staticmethod
    def span(name: str, headers: Mapping[str, str], **attributes: str) -> ContextManager[trace.Span]:
        """A SERVER span for a front end without instrumentation of its own (REST; gRPC's
        spans come from the OpenTelemetry interceptor), continuing the trace in `headers`."""
        return _TRACER.start_as_current_span(name, kind=trace.SpanKind.SERVER, context=propagate.extract(headers),
                                             attributes=attributes)


@functools.lru_cache(maxsize=1024)
def certificate_user_pem(pem: bytes) -> UserInfo:
    """The user a verified client certificate (PEM, as gRPC gives it) names."""
    return user_from_certificate(x509.load_pem_x509_certificate(pem))


@functools.lru_cache(maxsize=1024)
def certificate_user_der(der: bytes) -> UserInfo:
    """The user a verified client certificate (DER, as ssl gives it) names."""
    return user_from_certificate(x509.load_der_x509_certificate(der))

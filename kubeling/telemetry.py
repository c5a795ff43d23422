"""OpenTelemetry for every component: the SDK with `service.name`, the OTLP gRPC exporter
when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the standard OTEL_* variables are read by
the SDK and the exporter), W3C trace context over every grpc.aio call.

Long-lived streams (watches, log follows, health watches) are left out of the gRPC
instrumentation: a span per watch would stay open for hours.

A pod's trace: the apiserver stores the creating request's context on the pod
(`POD_TRACE_ANNOTATION`, a W3C traceparent), and the scheduler and the kubelet start
their spans for that pod under it, so one trace shows create -> schedule -> bind ->
sandbox -> CNI -> containers started.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context, propagate, trace

__all__ = ["setup", "POD_TRACE_ANNOTATION", "pod_context", "pod_attributes", "inject_current", "tracer",
           "mark_pod_trace", "tracing_enabled", "span_if_tracing"]

log = logging.getLogger(__name__)

POD_TRACE_ANNOTATION = "kubeling.io/traceparent"
_STREAMING = {"Watch", "Log", "LeaseKeepAlive"}  # methods whose calls outlive any useful span
# Writes start a trace of their own (a pod's trace starts at its Create); reads and
# polls (lists, status calls, the PLEG's relists) are traced only inside a trace.
_WRITES = {"Create", "Update", "UpdateStatus", "Delete", "Bind"}


def _method(details: Any) -> str:
    name = getattr(details, "method", "") or getattr(details, "full_method", "")
    return name.decode() if isinstance(name, bytes) else str(name)


def _client_filter(details: Any) -> bool:
    name = _method(details).rsplit("/", 1)[-1]
    return name not in _STREAMING and trace.get_current_span().get_span_context().is_valid


def _server_filter(details: Any) -> bool:
    full = _method(details)
    name = full.rsplit("/", 1)[-1]
    if name in _STREAMING or full.startswith("/grpc."):
        return False
    metadata = getattr(details, "invocation_metadata", None) or ()
    return name in _WRITES or any(key == "traceparent" for key, _ in metadata)


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def tracing_enabled() -> bool:
    """Whether a tracer provider was configured (`setup` with an endpoint, or a test's): hot
    paths skip building spans, contexts and attributes when it was not."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def span_if_tracing(tracer_: trace.Tracer, name: str, *,
                    attributes: Callable[[], Mapping[str, Any]] | None = None,
                    parent: Callable[[], context.Context | None] | None = None,
                    child_only: bool = False,
                    ) -> contextlib.AbstractContextManager[trace.Span | None]:
    """`tracer_.start_as_current_span(name)` when tracing is on, else a context manager that
    does nothing (yielding None); attributes and parent are computed only when needed.
    child_only: only inside a trace, as the gRPC client instrumentation (a poll outside
    any trace would otherwise be a trace of its own, every second)."""
    if not tracing_enabled() or (child_only and not trace.get_current_span().get_span_context().is_valid):
        return contextlib.nullcontext()
    return tracer_.start_as_current_span(name, context=parent() if parent else None,
                                         attributes=attributes() if attributes else None)


def setup(service_name: str) -> Callable[[], None]:
    """Configure tracing for this process; returns the shutdown (flush) function. Without
    an OTLP endpoint nothing is exported and nothing is instrumented."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return lambda: None
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    server, client = GrpcAioInstrumentorServer(filter_=_server_filter), GrpcAioInstrumentorClient(
        filter_=_client_filter)
    server.instrument()
    client.instrument()
    log.info("tracing: %s exports spans to %s", name, endpoint)

    def shutdown() -> None:
        server.uninstrument()
        client.uninstrument()
        provider.shutdown()  # flushes what is still batched

    return shutdown


def inject_current() -> str:
    """The current span's W3C traceparent ('' when there is none)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


def mark_pod_trace(pod: Any) -> None:
    """On a pod being created inside a trace: record that trace on it, so that its
    scheduling and start continue it (a pod that names a trace already keeps it)."""
    if POD_TRACE_ANNOTATION not in pod.metadata.annotations:
        traceparent = inject_current()
        if traceparent:
            pod.metadata.annotations[POD_TRACE_ANNOTATION] = traceparent


def pod_context(annotations: Mapping[str, str]) -> context.Context | None:
    """The trace a pod belongs to, from its annotation (None when it has none)."""
    parent = annotations.get(POD_TRACE_ANNOTATION, "")
    if not parent:
        return None
    return propagate.extract({"traceparent": parent})


def pod_attributes(pod: Any, node: str = "") -> dict[str, str]:
    """Attributes as upstream's semantic conventions name them."""
    attrs = {"k8s.pod.name": pod.metadata.name, "k8s.namespace.name": pod.metadata.namespace,
             "k8s.pod.uid": pod.metadata.uid}
    if node or pod.spec.nodeName:
        attrs["k8s.node.name"] = node or pod.spec.nodeName
    return attrs

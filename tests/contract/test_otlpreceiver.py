"""The OTLP receiver (cluster/otlpreceiver.py): spans sent by the real OpenTelemetry SDK's
OTLP exporter come back from its Jaeger-style query API, linked as they were sent."""

from __future__ import annotations

import asyncio

import aiohttp
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from cluster.otlpreceiver import SpanStore, serve
from kubeling.netutil import free_port
from tests.wait import until


def _export(endpoint: str, service: str, parent: str | None = None) -> str:
    """One span (under `parent`'s trace and span when given, hex ids); returns 'trace:span'."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    ctx = None
    if parent:
        trace_id, span_id = parent.split(":")
        ctx = trace.set_span_in_context(NonRecordingSpan(SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    with provider.get_tracer("t").start_as_current_span(f"{service}-work", context=ctx,
                                                        attributes={"pod": "p1", "n": 3}) as span:
        sc = span.get_span_context()
    provider.shutdown()
    return f"{sc.trace_id:032x}:{sc.span_id:016x}"


async def test_spans_come_back_as_jaeger_traces() -> None:
    otlp, http = free_port(), free_port()
    store = SpanStore(max_spans=100)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(f"127.0.0.1:{otlp}", f"127.0.0.1:{http}", store, stop))
    try:
        base = f"http://127.0.0.1:{http}"
        async with aiohttp.ClientSession() as session:
            async def answers() -> bool:
                async with session.get(f"{base}/api/services") as r:
                    return r.status == 200

            await until(answers, "the query API answering", 10, retry_on=(aiohttp.ClientConnectionError,))
            root = await asyncio.to_thread(_export, f"127.0.0.1:{otlp}", "apiserver")
            child = await asyncio.to_thread(_export, f"127.0.0.1:{otlp}", "scheduler", root)
            await asyncio.to_thread(_export, f"127.0.0.1:{otlp}", "other")
            async with session.get(f"{base}/api/services") as r:
                assert (await r.json())["data"] == ["apiserver", "other", "scheduler"]
            async with session.get(f"{base}/api/traces", params={"service": "scheduler"}) as r:
                traces = (await r.json())["data"]
            assert len(traces) == 1
            trace = traces[0]
            by_service = {trace["processes"][s["processID"]]["serviceName"]: s for s in trace["spans"]}
            assert set(by_service) == {"apiserver", "scheduler"} and trace["traceID"] == root.split(":")[0]
            assert by_service["scheduler"]["references"] == [
                {"refType": "CHILD_OF", "traceID": root.split(":")[0], "spanID": root.split(":")[1]}]
            assert by_service["scheduler"]["spanID"] == child.split(":")[1]
            assert {"key": "n", "type": "int64", "value": 3} in by_service["apiserver"]["tags"]
            async with session.get(f"{base}/api/traces/{trace['traceID']}") as r:
                assert r.status == 200 and (await r.json())["data"][0]["traceID"] == trace["traceID"]
            async with session.get(f"{base}/api/traces/00ff") as r:
                assert r.status == 404
            async with session.get(f"{base}/api/traces", params={"limit": "x"}) as r:
                assert r.status == 400
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def test_store_drops_oldest_traces_beyond_its_bound() -> None:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    store = SpanStore(max_spans=3)
    for i in range(5):
        req = trace_service_pb2.ExportTraceServiceRequest()
        span = req.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = bytes([i]) * 16, bytes([i]) * 8, f"s{i}"
        store.add(req)
    assert store.count == 3 and [t[0].span.name for t in store.traces.values()] == ["s2", "s3", "s4"]

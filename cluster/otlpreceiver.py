"""A small OTLP trace receiver with Jaeger's query API, for where Jaeger's image cannot be
had (no registry reachable): `python -m cluster.otlpreceiver`.

It takes spans on OTLP/gRPC (`TraceService.Export`, port 4317 as Jaeger's collector) and
answers the read side of Jaeger's HTTP API that tools and tests use (port 16686):
`/api/services`, `/api/traces?service=S[&limit=N]` (the newest traces holding a span of
S) and `/api/traces/<traceID>`, in Jaeger's JSON shape. Spans live in memory, the
oldest dropped beyond `--max-spans`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["SpanStore", "main"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredSpan:
    service: str
    span: trace_pb2.Span


@dataclass
class SpanStore:
    """Spans by trace, oldest trace first; bounded by span count."""

    max_spans: int = 200_000
    traces: OrderedDict[bytes, list[StoredSpan]] = field(default_factory=OrderedDict)
    count: int = 0

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            service = _attribute(resource_spans.resource.attributes, "service.name") or "unknown_service"
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.traces.setdefault(span.trace_id, []).append(StoredSpan(service, span))
                    self.count += 1
        while self.count > self.max_spans and self.traces:
            _, dropped = self.traces.popitem(last=False)
            self.count -= len(dropped)

    def services(self) -> list[str]:
        return sorted({s.service for spans in self.traces.values() for s in spans})

    def find(self, service: str, limit: int) -> list[list[StoredSpan]]:
        """The newest `limit` traces with a span of `service` (every trace when empty)."""
        found = [spans for spans in reversed(self.traces.values())
                 if not service or any(s.service == service for s in spans)]
        return found[:limit]


def _attribute(attributes: Any, key: str) -> str:
    return next((a.value.string_value for a in attributes if a.key == key), "")


def _value(v: common_pb2.AnyValue) -> tuple[str, Any]:
    kind = v.WhichOneof("value")
    if kind == "bool_value":
        return "bool", v.bool_value
    if kind == "int_value":
        return "int64", v.int_value
    if kind == "double_value":
        return "float64", v.double_value
    return "string", v.string_value if kind == "string_value" else str(getattr(v, kind or "string_value"))


def jaeger_trace(spans: list[StoredSpan]) -> dict[str, Any]:
    """One trace in the JSON shape of Jaeger's query API."""
    processes: dict[str, str] = {}
    out = []
    for stored in spans:
        span = stored.span
        pid = processes.setdefault(stored.service, f"p{len(processes) + 1}")
        refs = [{"refType": "CHILD_OF", "traceID": span.trace_id.hex(), "spanID": span.parent_span_id.hex()}] \
            if span.parent_span_id else []
        tags = [{"key": a.key, "type": t, "value": v} for a in span.attributes for t, v in [_value(a.value)]]
        out.append({"traceID": span.trace_id.hex(), "spanID": span.span_id.hex(), "operationName": span.name,
                    "references": refs, "startTime": span.start_time_unix_nano // 1000,
                    "duration": max(0, span.end_time_unix_nano - span.start_time_unix_nano) // 1000,
                    "tags": tags, "processID": pid})
    return {"traceID": spans[0].span.trace_id.hex(), "spans": out,
            "processes": {pid: {"serviceName": service, "tags": []} for service, pid in processes.items()}}


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, store: SpanStore) -> None:
        self.store = store

    async def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,  # noqa: N802 (the RPC's name)
                     context: grpc.aio.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        self.store.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def query_app(store: SpanStore) -> web.Application:
    async def services(_: web.Request) -> web.Response:
        return web.json_response({"data": store.services()})

    async def traces(request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return web.json_response({"errors": [{"code": 400, "msg": "limit: not an integer"}]}, status=400)
        found = store.find(request.query.get("service", ""), max(limit, 0))
        return web.json_response({"data": [jaeger_trace(t) for t in found]})

    async def trace(request: web.Request) -> web.Response:
        try:
            spans = store.traces.get(bytes.fromhex(request.match_info["id"]))
        except ValueError:
            spans = None
        if not spans:
            return web.json_response({"data": None, "errors": [{"code": 404, "msg": "trace not found"}]},
                                     status=404)
        return web.json_response({"data": [jaeger_trace(spans)]})

    app = web.Application()
    app.router.add_get("/api/services", services)
    app.router.add_get("/api/traces", traces)
    app.router.add_get("/api/traces/{id}", trace)
    return app


async def serve(otlp_listen: str, http_listen: str, store: SpanStore, stop: asyncio.Event) -> None:
    """Receive and answer until `stop` is set."""
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(store), server)
    if server.add_insecure_port(otlp_listen) == 0:
        raise OSError(f"cannot listen on {otlp_listen}")
    await server.start()
    runner = web.AppRunner(query_app(store))
    await runner.setup()
    host, _, port = http_listen.rpartition(":")
    await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
    log.info("OTLP receiver on %s, Jaeger query API on %s", otlp_listen, http_listen)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await server.stop(1)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cluster.otlpreceiver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--otlp-listen", default="0.0.0.0:4317", help="OTLP/gRPC HOST:PORT (default %(default)s)")
    p.add_argument("--http-listen", default="0.0.0.0:16686", help="query API HOST:PORT (default %(default)s)")
    p.add_argument("--max-spans", type=int, default=200_000, help="spans kept (default %(default)s)")
    p.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.max_spans <= 0:
        print("otlpreceiver: --max-spans must be positive", file=sys.stderr)
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await serve(args.otlp_listen, args.http_listen, SpanStore(args.max_spans), stop)

    try:
        asyncio.run(run())
    except OSError as err:
        print(f"otlpreceiver: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

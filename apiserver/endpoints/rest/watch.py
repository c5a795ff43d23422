"""A watch over REST (upstream endpoints/handlers/watch.go): one JSON event per line, or one
length-prefixed protobuf WatchEvent per frame for clients that prefer protobuf, chunked,
until the watch's timeoutSeconds, the client leaving, or an error event."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from aiohttp import web

from apiserver.endpoints.rest.codec import to_json
from apiserver.endpoints.rest.protobuf import WATCH_STREAM, wire
from apiserver.endpoints.rest.request import JSON, Target, dumps, flag, int_query, negotiate_output
from apiserver.endpoints.rest.status import NotAcceptable, status_json
from apiserver.endpoints.rest.tables import table
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.deadline import until
from protos.kubeling.v1 import meta_pb2

__all__ = ["serve_watch", "EventLines"]


class EventLines:
    """The JSON line (or protobuf frame) of each recent event of one registry, made once for
    all its watchers (upstream's cachingObject: a watch event is serialized once per
    format, not per watcher). Keyed by the event as the watch cache encoded it, which every
    watcher receives alike, and the format (protobuf or not)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._lines: OrderedDict[tuple[bytes, bool], bytes] = OrderedDict()

    def get(self, data: tuple[bytes, bool]) -> bytes | None:
        return self._lines.get(data)

    def put(self, data: tuple[bytes, bool], line: bytes) -> None:
        self._lines[data] = line
        if len(self._lines) > self.size:
            self._lines.popitem(last=False)


async def serve_watch(request: web.Request, t: Target, registry: Registry[Any],
                      lines: EventLines | None = None) -> web.StreamResponse:
    out = negotiate_output(request)
    r = t.resource
    protobuf = out.protobuf and wire().kind_message(r.api_version, r.kind) is not None
    if not protobuf and not out.json_ok:
        raise NotAcceptable(f"{r.api_version} {r.kind} has no protobuf encoding")
    q = request.query
    timeout = int_query(q, "timeoutSeconds")
    req = meta_pb2.WatchRequest(namespace=t.namespace, labelSelector=q.get("labelSelector", ""),
                                fieldSelector=q.get("fieldSelector", ""),
                                resourceVersion=q.get("resourceVersion", ""),
                                allowWatchBookmarks=flag(q.get("allowWatchBookmarks")), timeoutSeconds=timeout,
                                resourceVersionMatch=q.get("resourceVersionMatch", ""))
    if "sendInitialEvents" in q:
        req.sendInitialEvents = flag(q["sendInitialEvents"])
    expired: errors.ApiError | None = None
    try:
        watcher = await registry.watch(req)
    except errors.Expired as err:
        expired, watcher = err, None
    frame = _protobuf_frame if protobuf else _json_line
    response = web.StreamResponse(headers={"Content-Type": WATCH_STREAM if protobuf else JSON,
                                           "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    if watcher is None:
        assert expired is not None
        await response.write(frame("ERROR", status_json(expired)))
        return response
    event_type = r.event_message
    printer = registry.strategy.printer()
    deadline = time.monotonic() + timeout if timeout > 0 else None
    try:
        shared = lines if not out.as_table else None
        async for data in until(watcher.stream(), deadline):
            key = (data, protobuf)
            line = shared.get(key) if shared is not None else None
            if line is None:
                event: Any = event_type.FromString(data)
                obj = {"kind": r.kind, "apiVersion": r.api_version, **to_json(event.object)}
                if out.as_table and event.type != "BOOKMARK":
                    obj = table(r.plural, [obj], include_object=out.include_object, printer=printer)
                line = frame(event.type, obj)
                if shared is not None:
                    shared.put(key, line)
            await response.write(line)
        if watcher.error is not None:
            await response.write(frame("ERROR", status_json(watcher.error)))
    finally:
        watcher.terminate()
    return response


def _json_line(event_type: str, obj: dict[str, Any]) -> bytes:
    return dumps({"type": event_type, "object": obj}) + b"\n"


def _protobuf_frame(event_type: str, obj: dict[str, Any]) -> bytes:
    return wire().watch_frame(event_type, obj)

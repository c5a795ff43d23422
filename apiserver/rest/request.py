"""One REST request's scope, as upstream's endpoints/handlers (RequestScope, negotiation):
what a resource URL names, how the client wants objects back, and the query, body and
header conventions every verb shares."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from apiserver.rest import resources as res
from apiserver.rest.codec import format_time
from apiserver.rest.status import NotAcceptable
from kubeling import errors

__all__ = ["JSON", "MAX_BODY", "Output", "Target", "dumps", "field_manager", "flag", "int_query", "json_response",
           "negotiate_output", "now_text", "read_body", "warning_header"]

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request body limit
JSON = "application/json"


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type=JSON, headers=headers)


@dataclass
class Target:
    """What a resource URL names."""

    resource: res.Resource
    namespace: str
    name: str
    sub: str

    @property
    def template(self) -> str:
        """The URL with placeholders, as a span's name."""
        r = self.resource
        path = r.prefix + ("/namespaces/{namespace}" if self.namespace else "") + f"/{r.plural}"
        return path + ("/{name}" if self.name else "") + (f"/{self.sub}" if self.sub else "")


@dataclass
class Output:
    """How the client asked to see objects (Accept, includeObject)."""

    as_table: bool = False
    include_object: str = "Metadata"


def negotiate_output(request: web.Request) -> Output:
    accept = request.headers.get("Accept", "")
    wants_json = not accept
    table_wanted = False
    for part in accept.split(","):
        media, *params = [p.strip() for p in part.split(";")]
        options = dict(p.split("=", 1) for p in params if "=" in p)
        if media in (JSON, "*/*", "application/*", "application/yaml"):
            if options.get("as") == "Table" and options.get("g") == "meta.k8s.io" and options.get("v") == "v1":
                table_wanted = True
                break
            if "as" not in options:
                wants_json = True
    if not table_wanted and not wants_json:
        raise NotAcceptable(f"only application/json is served (asked for {accept})")
    return Output(table_wanted, request.query.get("includeObject", "Metadata"))


async def read_body(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise errors.RequestEntityTooLarge(f"the request body is larger than {MAX_BODY} bytes") from None


def warning_header(text: str) -> str:
    """An RFC 7234 warning header value, as upstream sends them (code 299, agent "-")."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{quoted}"'


def int_query(query: Any, name: str) -> int:
    try:
        return int(query.get(name, "0") or 0)
    except ValueError:
        raise errors.BadRequest(f'{name}: invalid value "{query.get(name)}": must be an integer') from None


def field_manager(request: web.Request) -> str:
    """The field manager of a write: `fieldManager`, else the client's name from its
    User-Agent (as upstream defaults it)."""
    return request.query.get("fieldManager") or request.headers.get("User-Agent", "").split("/", 1)[0][:128]


def now_text() -> str:
    return format_time(Timestamp(seconds=int(time.time())))


def flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")

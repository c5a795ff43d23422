"""One REST request's scope, as upstream's endpoints/handlers (RequestScope, negotiation):
what a resource URL names, how the client wants objects back, and the query, body and
header conventions every verb shares."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from apiserver.endpoints.rest.codec import format_time
from apiserver.endpoints.rest.duplicates import load_json, load_yaml
from apiserver.endpoints.rest.protobuf import PROTOBUF, wire
from apiserver.endpoints.rest.status import NotAcceptable
from kubeling import errors
from kubeling.scheme import ResourceType

__all__ = ["JSON", "MAX_BODY", "MAX_DEPTH", "Output", "Target", "dry_run", "dumps", "field_manager", "flag",
           "int_query", "json_response", "negotiate_output", "now_text", "parse_document", "read_body", "respond",
           "warning_header"]

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request body limit
# No Kubernetes object nests anywhere near this; every layer that walks a document
# (decoding, conversion, patching, managed fields) recurses, so deeper is refused at once.
MAX_DEPTH = 100
JSON = "application/json"
_INT64 = 1 << 63
# A \uD800-\uDFFF escape: the document may hold a lone UTF-16 surrogate, which is no text.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type=JSON, headers=headers)


@dataclass
class Target:
    """What a resource URL names."""

    resource: ResourceType[Any]
    namespace: str
    name: str
    sub: str
    proxy_path: str = ""  # what follows .../NAME/proxy (with its slashes), for the proxy subresources

    @property
    def template(self) -> str:
        """The URL with placeholders, as a span's name."""
        r = self.resource
        path = r.path_prefix + ("/namespaces/{namespace}" if self.namespace else "") + f"/{r.plural}"
        return path + ("/{name}" if self.name else "") + (f"/{self.sub}" if self.sub else "")


@dataclass
class Output:
    """How the client asked to see objects (Accept, includeObject)."""

    as_table: bool = False
    include_object: str = "Metadata"
    # Kubernetes protobuf before JSON in Accept (client-go's "protobuf, json"): given for the
    # kinds that have it; json_ok says whether JSON may stand in for the others
    protobuf: bool = False
    json_ok: bool = True


_ACCEPTED = "only the following media types are accepted: application/json, application/yaml, " + PROTOBUF


def negotiate_output(request: web.Request) -> Output:
    accept = request.headers.get("Accept", "")
    wants_json = not accept
    table_wanted = protobuf = False
    for part in accept.split(","):
        media, *params = [p.strip() for p in part.split(";")]
        options = dict(p.split("=", 1) for p in params if "=" in p)
        if media in (JSON, "*/*", "application/*", "application/yaml"):
            if options.get("as") == "Table" and options.get("g") == "meta.k8s.io" and options.get("v") == "v1":
                table_wanted = True
                break
            if "as" not in options:
                wants_json = True
        elif media == PROTOBUF and "as" not in options and not wants_json:
            protobuf = True
    if not table_wanted and not wants_json and not protobuf:
        raise NotAcceptable(f"{_ACCEPTED} (asked for {accept})")
    return Output(table_wanted, request.query.get("includeObject", "Metadata"), protobuf and not table_wanted,
                  wants_json or table_wanted)


def respond(request: web.Request, body: dict[str, Any], status: int = 200,
            headers: dict[str, str] | None = None, out: Output | None = None) -> web.Response:
    """An object as the client asked for it: Kubernetes protobuf when it comes first in
    Accept and the kind has an upstream message, else JSON (406 when JSON was not asked)."""
    out = out or negotiate_output(request)
    if out.protobuf and wire().kind_message(body.get("apiVersion", ""), body.get("kind", "")) is not None:
        return web.Response(body=wire().encode(body), status=status, content_type=PROTOBUF, headers=headers)
    if not out.json_ok:
        raise NotAcceptable(f"{_ACCEPTED}: {body.get('apiVersion')} {body.get('kind')} has no protobuf encoding")
    return json_response(body, status, headers)


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
    """A query parameter for an int64 field (0 when absent)."""
    text = query.get(name, "0") or "0"
    try:
        value = int(text)
    except ValueError:
        raise errors.BadRequest(f'{name}: invalid value "{text}": must be an integer') from None
    if not -_INT64 <= value < _INT64:
        raise errors.BadRequest(f'{name}: invalid value "{text}": must fit in 64 bits')
    return value


def parse_document(raw: bytes, what: str, *, yaml_body: bool = False,
                   duplicates: list[str] | None = None) -> Any:
    """A JSON (or YAML) request document; BadRequest when it is not one or nests deeper
    than MAX_DEPTH. The fields it names twice are added to `duplicates` when given."""
    try:
        data, repeated = load_yaml(raw) if yaml_body else load_json(raw)
        if duplicates is not None:
            duplicates.extend(repeated)
    except RecursionError:
        raise errors.BadRequest(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, yaml.YAMLError) as err:
        raise errors.BadRequest(f"{what} is not valid {'YAML' if yaml_body else 'JSON'}: {err}") from None
    if _depth(data) > MAX_DEPTH:
        raise errors.BadRequest(f"{what} nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(raw):
        data = _valid_text(data)
    return data


def _valid_text(node: Any) -> Any:
    """The document with escaped surrogate pairs joined and lone surrogates replaced by
    U+FFFD, as Go's JSON decoder reads them (depth is bounded before this recursion)."""
    if isinstance(node, str):
        return node.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(node, dict):
        return {_valid_text(k): _valid_text(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_valid_text(v) for v in node]
    return node


def _depth(data: Any) -> int:
    """How deep objects and arrays nest (without recursion: the document may be hostile)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def field_manager(request: web.Request) -> str:
    """The field manager of a write: `fieldManager`, else the client's name from its
    User-Agent (as upstream defaults it)."""
    return request.query.get("fieldManager") or request.headers.get("User-Agent", "").split("/", 1)[0][:128]


def now_text() -> str:
    return format_time(Timestamp(seconds=int(time.time())))


def flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def dry_run(request: web.Request) -> bool:
    """`dryRun=All` (the only value upstream has): every stage of the write but the write."""
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"',
                                    violations=[errors.FieldViolation("dryRun", f'Unsupported value: "{value}"')])
    return bool(values)

"""The REST verbs on a resource (upstream's endpoints/handlers: get, list, create, update,
patch, delete, deletecollection): JSON (or protobuf, or YAML) in, the registry's call,
JSON, protobuf (or a Table) out. Every verb goes to the same Registry as the gRPC API."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from apiserver.endpoints.request import yield_turn
from apiserver.endpoints.rest.apply import apply, record_update
from apiserver.endpoints.rest.codec import from_json, to_json
from apiserver.endpoints.rest.protobuf import PROTOBUF, decode_envelope, prune_zero_fields, wire
from apiserver.endpoints.rest.request import (
    JSON,
    Target,
    dry_run,
    dumps,
    field_manager,
    flag,
    int_query,
    json_response,
    negotiate_output,
    now_text,
    parse_document,
    read_body,
    respond,
    warning_header,
)
from apiserver.endpoints.rest.status import NotAcceptable, UnsupportedMediaType
from apiserver.endpoints.rest.tables import table
from apiserver.registry.apiextensions.customresources import CustomResourceStrategy
from apiserver.registry.generic.store import Registry
from kubeling import errors, patches
from kubeling.scheme import ResourceType
from protos.kubeling.v1 import meta_pb2

__all__ = ["PATCH_TYPES", "body_of", "check_scope", "create", "decode", "delete", "delete_collection", "get",
           "list_", "object_json", "object_response", "patch", "patched", "update"]

PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply"}


# ------------------------------------------------------------------ encoding

def object_json(r: ResourceType[Any], obj: Any) -> dict[str, Any]:
    return {"kind": r.kind, "apiVersion": r.api_version, **to_json(obj)}


def object_response(request: web.Request, t: Target, obj: Any, status: int = 200,
                    warnings: list[str] | None = None, registry: Registry[Any] | None = None) -> web.Response:
    out = negotiate_output(request)
    body = object_json(t.resource, obj)
    if out.as_table:
        body = table(t.resource.plural, [body], include_object=out.include_object,
                     printer=registry.strategy.printer() if registry is not None else None)
    return respond(request, body, status, warning_headers(warnings, registry), out)


def warning_headers(warnings: list[str] | None, registry: Registry[Any] | None) -> dict[str, str] | None:
    """The Warning header: the request's own warnings and the resource's (a deprecated version)."""
    every = [*(registry.strategy.warnings() if registry is not None else []), *(warnings or [])]
    return {"Warning": ", ".join(warning_header(w) for w in every)} if every else None


DUPLICATES = web.RequestKey("kubeling.duplicate_fields", list[str])


async def body_of(request: web.Request, t: Target | None) -> Any:
    """The request's document (JSON, YAML, or the target resource's protobuf)."""
    raw = await read_body(request)
    ctype = request.content_type
    if ctype == PROTOBUF:
        data = decode_envelope(raw)
        return prune_zero_fields(data, _message_of(t, data))
    duplicates: list[str] = []
    data = parse_document(raw, "the request body", duplicates=duplicates,
                          yaml_body=ctype in ("application/yaml", "application/apply-patch+yaml"))
    request[DUPLICATES] = duplicates  # judged with the unknown fields, by fieldValidation
    return data


def _message_of(t: Target | None, data: dict[str, Any]) -> Any:
    """The descriptor of this project's message for the kind a body says it is: the
    resource's own, or its subresource's (a pod's Eviction); None for the others."""
    if t is None:
        return None
    r, sent = t.resource, (data.get("apiVersion"), data.get("kind"))
    if sent == (r.api_version, r.kind):
        return r.message.DESCRIPTOR
    for sub in r.subresources:
        if sub.method is not None and sub.method.request is not None and sub.kind == sent[1]:
            return sub.method.request.DESCRIPTOR
    return None


def decode(request: web.Request, t: Target, data: Any, registry: Registry[Any] | None = None,
           applied: bool = False) -> tuple[Any, list[str]]:
    """The body as the resource's message; unknown fields (those the message has no room
    for, or a custom resource's schema prunes) refused (Strict) or returned as warnings
    (Warn, the default) or dropped (Ignore)."""
    r = t.resource
    if isinstance(data, dict):
        kind, api_version = data.get("kind"), data.get("apiVersion")
        if kind and kind != r.kind or api_version and api_version != r.api_version:
            raise errors.BadRequest(f"the body is a {api_version}/{kind}, this endpoint takes "
                                    f"{r.api_version}/{r.kind}")
    decoded = from_json(data, r.message)
    if registry is not None:
        decoded.unknown.extend(registry.strategy.unknown_fields(decoded.message))
    mode = request.query.get("fieldValidation", "Warn")
    if mode not in ("Strict", "Warn", "Ignore"):
        raise errors.BadRequest(f'fieldValidation: invalid value "{mode}": must be Ignore, Warn or Strict')
    if applied:
        # server-side apply words an unknown field as structured-merge-diff's typed patch does
        problems = [f".{p}: field not declared in schema" for p in decoded.unknown]
    else:
        problems = [f'unknown field "{p}"' for p in decoded.unknown]
    problems += request.get(DUPLICATES, [])
    if problems and mode == "Strict":
        if applied:
            raise errors.BadRequest(f"failed to create typed patch object ({t.namespace}/{t.name}; "
                                    f"{r.api_version}, Kind={r.kind}): {', '.join(problems)}")
        raise errors.BadRequest(f'{r.kind} in version "{r.version}" cannot be handled as a {r.kind}: '
                                f"strict decoding error: {', '.join(problems)}")
    return decoded.message, problems if mode == "Warn" else []


def check_scope(t: Target, obj: Any) -> None:
    """The object's namespace and name agree with the URL's (and are filled from it)."""
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


def patched(kind: str, live: Any, body: Any) -> Any:
    """live with a JSON, merge or strategic merge patch applied."""
    if kind == "json":
        return patches.json_patch(live, body)
    if kind == "merge":
        return patches.merge_patch(live, body)
    return patches.strategic_merge_patch(live, body)


# ------------------------------------------------------------------ verbs

async def get(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    obj = await registry.get(t.namespace, t.name, request.query.get("resourceVersion", ""))
    return object_response(request, t, obj, registry=registry)


async def list_(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    out = negotiate_output(request)
    q = request.query
    req = meta_pb2.ListRequest(namespace=t.namespace, labelSelector=q.get("labelSelector", ""),
                               fieldSelector=q.get("fieldSelector", ""), limit=int_query(q, "limit"),
                               resourceVersion=q.get("resourceVersion", ""), **{"continue": q.get("continue", "")})
    items, meta = await registry.list(req)
    list_meta = to_json(meta)
    r = t.resource
    if out.as_table:
        objects = [to_json(o) for o in items]
        typed = [{"kind": r.kind, "apiVersion": r.api_version, **o} for o in objects]
        return json_response(table(r.plural, typed, include_object=out.include_object, list_meta=list_meta,
                                   printer=registry.strategy.printer()), headers=warning_headers(None, registry))
    head: dict[str, Any] = {"kind": f"{r.kind}List", "apiVersion": r.api_version, "metadata": list_meta}
    headers = warning_headers(None, registry)
    if out.protobuf and wire().kind_message(r.api_version, f"{r.kind}List") is not None:
        item_message = wire().kind_message(r.api_version, r.kind)
        assert item_message is not None
        parts = await _encoded(items, lambda some: registry.encoded(
            some, PROTOBUF, lambda o: wire().list_item(item_message, to_json(o))))
        return web.Response(body=wire().encode_list(head, b"".join(parts)), content_type=PROTOBUF, headers=headers)
    if not out.json_ok:
        raise NotAcceptable(f"{r.api_version} {r.kind} has no protobuf encoding")
    parts = await _encoded(items, lambda some: registry.encoded(some, JSON, lambda o: dumps(to_json(o))))
    body = dumps(head)[:-1] + b',"items":[' + b",".join(parts) + b"]}"
    return web.Response(body=body, content_type=JSON, headers=headers)


_ITEMS_PER_TURN = 25


async def _encoded(items: list[Any], encode: Callable[[list[Any]], list[bytes]]) -> list[bytes]:
    """A big list's items encoded a slice at a time, giving the event loop back in between:
    one LIST of thousands must not hold up every other request for as long as it encodes
    (with Priority and Fairness limiting how many such lists run at once, what waits
    behind them is a slice, not whole lists)."""
    parts: list[bytes] = []
    turn = yield_turn.get() or _next_turn
    for start in range(0, len(items), _ITEMS_PER_TURN):
        if start:
            # a turn even when the cache had every encoding: a flood of cheap lists would
            # otherwise hold the loop in longer steps (the protected flows' p50 doubled)
            await turn()
        parts += encode(items[start:start + _ITEMS_PER_TURN])
    return parts


async def _next_turn() -> None:
    await asyncio.sleep(0)


async def create(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    body = await body_of(request, t)
    if isinstance(body, dict):
        record_update(None, body, field_manager(request), now_text())
    obj, warnings = decode(request, t, body, registry)
    check_scope(t, obj)
    created = await registry.create(obj, dry_run=dry_run(request))
    return object_response(request, t, created, 201, warnings, registry)


async def update(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    """PUT of the object, or of its status (t.sub "status") or approval (certificatesigningrequests)."""
    body = await body_of(request, t)
    if not t.sub and isinstance(body, dict):
        current = await registry.get(t.namespace, t.name)
        record_update(object_json(t.resource, current), body, field_manager(request), now_text())
    obj, warnings = decode(request, t, body, registry)
    check_scope(t, obj)
    updated = await registry.update(obj, status=t.sub == "status", approval=t.sub == "approval",
                                    dry_run=dry_run(request))
    return object_response(request, t, updated, 200, warnings, registry)


async def patch(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    """PATCH of the object or its status: JSON, merge and strategic merge patches, and
    server-side apply (which creates what does not exist yet)."""
    kind = PATCH_TYPES.get(request.content_type)
    custom = isinstance(registry.strategy, CustomResourceStrategy)  # no patch strategies in a schema: upstream's 415
    accepted = [m for m, k in PATCH_TYPES.items() if k != "strategic" or not custom]
    if kind is None or kind == "strategic" and custom:
        raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media types "
                                   f"include: {', '.join(accepted)}")
    body = await body_of(request, t)
    if kind == "apply" and not request.query.get("fieldManager"):
        raise errors.BadRequest("PATCH, fieldManager: Required value: is required for apply patch")
    force = flag(request.query.get("force"))
    for _ in range(10):
        try:
            current = await registry.get(t.namespace, t.name)
        except errors.NotFound:
            if kind != "apply":
                raise
            applied = apply(None, body, field_manager(request), force=force, now=now_text())
            obj, warnings = decode(request, t, applied, registry, applied=True)
            check_scope(t, obj)
            return object_response(request, t, await registry.create(obj, dry_run=dry_run(request)), 201, warnings,
                                   registry)
        live = object_json(t.resource, current)
        if kind == "apply":
            result = apply(live, body, field_manager(request), force=force, now=now_text())
        else:
            result = patched(kind, live, body)
            if not t.sub:
                record_update(live, result, field_manager(request), now_text())
        obj, warnings = decode(request, t, result, registry, applied=kind == "apply")
        check_scope(t, obj)
        pinned = _patch_sets_version(kind, body)
        if not pinned:
            obj.metadata.resourceVersion = current.metadata.resourceVersion
        try:
            updated = await registry.update(obj, status=t.sub == "status", approval=t.sub == "approval",
                                            dry_run=dry_run(request))
        except errors.Conflict:
            if pinned:
                raise
            continue  # someone wrote in between: patch the newer object
        return object_response(request, t, updated, 200, warnings, registry)
    raise errors.Conflict(f'Operation cannot be fulfilled on {t.resource.plural} "{t.name}": '
                          "the object kept changing while it was patched")


def _patch_sets_version(kind: str, body: Any) -> bool:
    """Whether the patch pins metadata.resourceVersion (then a conflict is the client's)."""
    if kind == "json":
        return any(isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in body or [])
    return isinstance(body, dict) and bool((body.get("metadata") or {}).get("resourceVersion"))


async def _delete_options(request: web.Request) -> meta_pb2.DeleteOptions:
    """The DeleteOptions of a DELETE: its JSON or protobuf body (kubectl's typed clients,
    drain's, send protobuf) and the query's parameters, which win."""
    options = meta_pb2.DeleteOptions()
    if request.can_read_body:
        raw = await read_body(request)
        if raw.strip():
            data = prune_zero_fields(decode_envelope(raw), meta_pb2.DeleteOptions.DESCRIPTOR) \
                if request.content_type == PROTOBUF else parse_document(raw, "the DeleteOptions")
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


def _delete_args(options: meta_pb2.DeleteOptions) -> dict[str, Any]:
    policy = options.propagationPolicy if options.HasField("propagationPolicy") else None
    if policy is None and options.HasField("orphanDependents"):  # the deprecated form
        policy = "Orphan" if options.orphanDependents else "Background"
    return {"grace_seconds": options.gracePeriodSeconds if options.HasField("gracePeriodSeconds") else None,
            "preconditions": options.preconditions if options.HasField("preconditions") else None,
            "propagation": policy, "dry_run": bool(options.dryRun)}


async def delete(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    options = await _delete_options(request)
    deleted = await registry.delete(t.namespace, t.name, **_delete_args(options))
    return object_response(request, t, deleted, registry=registry)


async def delete_collection(request: web.Request, t: Target, registry: Registry[Any]) -> web.Response:
    """DELETE on a collection (upstream's deletecollection): every object the label and
    field selectors match, each deleted as one DELETE would; the answer lists them."""
    options = await _delete_options(request)
    q = request.query
    items, _ = await registry.list(meta_pb2.ListRequest(
        namespace=t.namespace, labelSelector=q.get("labelSelector", ""), fieldSelector=q.get("fieldSelector", "")))
    args = _delete_args(options)
    args["preconditions"] = None  # per object: a collection has no single uid or version
    deleted = []
    for obj in items:
        try:
            deleted.append(await registry.delete(obj.metadata.namespace, obj.metadata.name, **args))
        except errors.NotFound:
            continue  # gone meanwhile
    r = t.resource
    return respond(request, {"kind": f"{r.kind}List", "apiVersion": r.api_version, "metadata": {},
                             "items": [to_json(o) for o in deleted]})

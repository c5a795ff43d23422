"""A sample extension apiserver (what upstream's sample-apiserver is for Go): the group
`wardle.example.com/v1alpha1` with one namespaced resource, `flunders`, kept in memory,
served over TLS behind kubeling's aggregator.

It trusts only the aggregator: a request must come with a client certificate of the
front-proxy CA (`--requestheader-client-ca-file`, the PKI's front-proxy-ca.crt) whose
common name is allowed (`--requestheader-allowed-names`), and the user is then the one the
`X-Remote-User` and `X-Remote-Group` headers name (requestheader authentication, as
upstream's delegated authentication). Authorization is the main apiserver's: it applied
RBAC before proxying. A flunder remembers who created it (annotation
`wardle.example.com/created-by`).

    python examples/sample-apiserver/server.py --listen 127.0.0.1:8443 \\
        --tls-cert-file serving.crt --tls-private-key-file serving.key \\
        --requestheader-client-ca-file front-proxy-ca.crt

then register it with an APIService for `v1alpha1.wardle.example.com` whose Service
reaches that address (see docs/admission.md#api-aggregation).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import signal
import ssl
import uuid
from typing import Any

from aiohttp import web

GROUP, VERSION = "wardle.example.com", "v1alpha1"
PREFIX = f"/apis/{GROUP}/{VERSION}"
CREATED_BY = f"{GROUP}/created-by"


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}, status=code)


class SampleAPIServer:
    def __init__(self, allowed_names: list[str]) -> None:
        self.allowed_names = allowed_names
        self.flunders: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = 0

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/openapi/v3", self._openapi_index)
        app.router.add_get(f"/openapi/v3{PREFIX}", self._openapi)
        app.router.add_get(f"/apis/{GROUP}", self._group)
        app.router.add_get(PREFIX, self._resources)
        app.router.add_get(f"{PREFIX}/flunders", self._list)
        app.router.add_get(f"{PREFIX}/namespaces/{{namespace}}/flunders", self._list)
        app.router.add_post(f"{PREFIX}/namespaces/{{namespace}}/flunders", self._create)
        app.router.add_get(f"{PREFIX}/namespaces/{{namespace}}/flunders/{{name}}", self._get)
        app.router.add_delete(f"{PREFIX}/namespaces/{{namespace}}/flunders/{{name}}", self._delete)
        app.router.add_patch(f"{PREFIX}/namespaces/{{namespace}}/flunders/{{name}}", self._patch)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """requestheader authentication: the front proxy's certificate, then its headers."""
        if request.path == "/healthz":
            return await handler(request)
        tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        cert = tls.getpeercert() if tls is not None else None
        names = [value for rdn in (cert or {}).get("subject", ()) for key, value in rdn if key == "commonName"]
        user = request.headers.get("X-Remote-User", "")
        if not names or (self.allowed_names and names[0] not in self.allowed_names) or not user:
            return _status(401, "Unauthorized", "Unauthorized")
        request["user"] = user
        request["groups"] = request.headers.getall("X-Remote-Group", [])
        return await handler(request)

    async def _group(self, request: web.Request) -> web.Response:
        version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
        return web.json_response({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
                                  "preferredVersion": version})

    async def _openapi_index(self, request: web.Request) -> web.Response:
        return web.json_response({"paths": {PREFIX.lstrip("/"): {"serverRelativeURL": f"/openapi/v3{PREFIX}?hash=1"}}})

    async def _openapi(self, request: web.Request) -> web.Response:
        """What kubectl validates a flunder with (and `kubectl explain` shows)."""
        gvk = [{"group": GROUP, "version": VERSION, "kind": "Flunder"}]
        ref = {"$ref": "#/components/schemas/com.example.wardle.v1alpha1.Flunder"}
        ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}
        body = {"content": {"*/*": {"schema": ref}}, "required": True}
        collection = f"{PREFIX}/namespaces/{{namespace}}/flunders"
        # kubectl leaves validation to the server where a PATCH takes fieldValidation
        field_validation = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]

        def op(verb: str, action: str, with_body: bool = False) -> dict[str, Any]:
            out = {"operationId": f"{verb}Flunder", "responses": ok, "x-kubernetes-action": action,
                   "x-kubernetes-group-version-kind": gvk[0], "parameters": field_validation if with_body else []}
            return {**out, "requestBody": body} if with_body else out
        return web.json_response({
            "openapi": "3.0.0", "info": {"title": "wardle", "version": VERSION},
            "paths": {collection: {"get": op("list", "list"), "post": op("create", "post", True)},
                      f"{collection}/{{name}}": {"get": op("read", "get"), "patch": op("patch", "patch", True),
                                                 "delete": op("delete", "delete")}},
            "components": {"schemas": {"com.example.wardle.v1alpha1.Flunder": {
                "type": "object", "x-kubernetes-group-version-kind": gvk,
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}})

    async def _resources(self, request: web.Request) -> web.Response:
        flunders = {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder",
                    "verbs": ["create", "delete", "get", "list", "patch"]}
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
                                  "resources": [flunders]})

    def _answer(self, request: web.Request, objects: list[dict[str, Any]], single: bool) -> web.Response:
        if "as=Table" in request.headers.get("Accept", ""):
            now = dt.datetime.now(dt.timezone.utc)
            rows = []
            for obj in objects:
                made = dt.datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
                rows.append({"cells": [obj["metadata"]["name"], f"{int((now - made).total_seconds())}s"],
                             "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                        "metadata": obj["metadata"]}})
            return web.json_response({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {
                "resourceVersion": str(self.revision)}, "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0}], "rows": rows})
        if single:
            return web.json_response(objects[0])
        return web.json_response({"kind": "FlunderList", "apiVersion": f"{GROUP}/{VERSION}",
                                  "metadata": {"resourceVersion": str(self.revision)}, "items": objects})

    async def _list(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("namespace")
        items = [o for (ns, _), o in sorted(self.flunders.items()) if namespace is None or ns == namespace]
        return self._answer(request, items, False)

    async def _get(self, request: web.Request) -> web.Response:
        found = self.flunders.get((request.match_info["namespace"], request.match_info["name"]))
        if found is None:
            return _status(404, "NotFound", f'flunders.{GROUP} "{request.match_info["name"]}" not found')
        return self._answer(request, [found], True)

    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as err:
            return _status(400, "BadRequest", f"the body is not JSON: {err}")
        meta = body.get("metadata") if isinstance(body, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(name, str) or not name:
            return _status(422, "Invalid", "Flunder.wardle.example.com is invalid: metadata.name: Required value")
        namespace = request.match_info["namespace"]
        if (namespace, name) in self.flunders:
            return _status(409, "AlreadyExists", f'flunders.{GROUP} "{name}" already exists')
        self.revision += 1
        obj = {"kind": "Flunder", "apiVersion": f"{GROUP}/{VERSION}", "spec": body.get("spec") or {},
               "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                            "resourceVersion": str(self.revision),
                            "creationTimestamp": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "annotations": {**(meta.get("annotations") or {}), CREATED_BY: request["user"]}}}
        self.flunders[(namespace, name)] = obj
        return web.json_response(obj, status=201)

    async def _patch(self, request: web.Request) -> web.Response:
        """A JSON merge patch of the spec and labels (what `kubectl patch --type merge` and
        `kubectl label` send)."""
        found = self.flunders.get((request.match_info["namespace"], request.match_info["name"]))
        if found is None:
            return _status(404, "NotFound", f'flunders.{GROUP} "{request.match_info["name"]}" not found')
        if request.content_type != "application/merge-patch+json":
            return _status(415, "UnsupportedMediaType", f"the patch type {request.content_type} is not supported")
        try:
            patch = json.loads(await request.read())
        except ValueError as err:
            return _status(400, "BadRequest", f"the body is not JSON: {err}")
        if not isinstance(patch, dict):
            return _status(400, "BadRequest", "a merge patch is a JSON object")
        for key in ("spec",):
            if isinstance(patch.get(key), dict):
                found[key] = _merged(found.get(key) or {}, patch[key])
        labels = (patch.get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            found["metadata"]["labels"] = _merged(found["metadata"].get("labels") or {}, labels)
        self.revision += 1
        found["metadata"]["resourceVersion"] = str(self.revision)
        return web.json_response(found)

    async def _delete(self, request: web.Request) -> web.Response:
        found = self.flunders.pop((request.match_info["namespace"], request.match_info["name"]), None)
        if found is None:
            return _status(404, "NotFound", f'flunders.{GROUP} "{request.match_info["name"]}" not found')
        return web.json_response(found)


def _merged(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386: null removes, objects merge, anything else replaces."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


async def serve(args: argparse.Namespace) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)
    context.load_verify_locations(args.requestheader_client_ca_file)
    context.verify_mode = ssl.CERT_OPTIONAL  # /healthz is open; the API checks the certificate
    server = SampleAPIServer([n for n in args.requestheader_allowed_names.split(",") if n])
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    host, _, port = args.listen.rpartition(":")
    site = web.TCPSite(runner, host, int(port), ssl_context=context)
    await site.start()
    print(f"sample-apiserver serving {GROUP}/{VERSION} on https://{args.listen}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:8443")
    parser.add_argument("--tls-cert-file", required=True)
    parser.add_argument("--tls-private-key-file", required=True)
    parser.add_argument("--requestheader-client-ca-file", required=True)
    parser.add_argument("--requestheader-allowed-names", default="front-proxy-client")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()

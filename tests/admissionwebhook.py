"""An admission webhook server as users write one (aiohttp, TLS with its own CA), for the
contract and e2e tests and the benchmark. Paths:

- `/mutate`: adds the label `webhook: mutated` and, to pods, a `sidecar` container (JSON patch);
- `/deny`: refuses objects named `deny-*` (`the name is not allowed: <name>`) or with a
  `data` or `spec` value `webhook-disallow`, and deleting one labelled
  `webhook-e2e-test: webhook-nondeletable`; allows the rest;
- `/stage-1`, `/stage-2`: add `mutation-stage-1` to the `data` of an object whose data has
  `mutation-start`, and `mutation-stage-2` to one that has `mutation-stage-1` (ordered mutation);
- `/add-fields`: adds `spec.mutated: true` and `spec.extra: true` to custom resources (pruning);
- `/allow`: allows, with a warning and an audit annotation;
- `/append`: appends `+` to the annotation `trail` (for reinvocation);
- `/slow`: answers after `slow_seconds`; `/garbage`: answers HTML; `/status-500`: an HTTP 500.

Every review received is kept in `reviews` (path, request)."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from kubeling import pki

__all__ = ["AdmissionWebhookServer", "webhook_config"]


def _patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


class AdmissionWebhookServer:
    def __init__(self, pki_dir: Path, host: str = "127.0.0.1", names: tuple[str, ...] = ()) -> None:
        pki.ensure(pki_dir, {}, [host, *names])
        self.ca = (pki_dir / "ca.crt").read_bytes()
        self.cert, self.key = pki_dir / "apiserver.crt", pki_dir / "apiserver.key"
        self.host = host
        self.slow_seconds = 5.0
        self.reviews: list[tuple[str, dict[str, Any]]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca).decode()

    def url(self, path: str) -> str:
        return f"https://{self.host}:{self.port}{path}"

    async def start(self, port: int = 0) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        app = web.Application()
        app.router.add_post("/{kind}", self._review)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def requests(self, path: str) -> list[dict[str, Any]]:
        return [r for p, r in self.reviews if p == path]

    async def _review(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["kind"]
        review = await request.json()
        req = review["request"]
        self.reviews.append((path, req))
        response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        obj = req.get("object") or {}
        ops: list[dict[str, Any]] = []
        if path == "/slow":
            await asyncio.sleep(self.slow_seconds)
        elif path == "/garbage":
            return web.Response(text="<html>not a review</html>", content_type="text/html")
        elif path == "/status-500":
            return web.Response(status=500, text="broken")
        elif path == "/deny":
            response.update(_judge(req))
        elif path in ("/stage-1", "/stage-2") and obj:
            data = obj.get("data") or {}
            wanted, key = ("mutation-start", "mutation-stage-1") if path == "/stage-1" else \
                ("mutation-stage-1", "mutation-stage-2")
            if wanted in data and key not in data:
                ops.append({"op": "add", "path": f"/data/{key}", "value": "yes"})
                response.update(patchType="JSONPatch", patch=_patch(ops))
        elif path == "/add-fields" and obj:
            if not isinstance(obj.get("spec"), dict):
                ops.append({"op": "add", "path": "/spec", "value": {}})
            ops += [{"op": "add", "path": "/spec/mutated", "value": True},
                    {"op": "add", "path": "/spec/extra", "value": True}]
            response.update(patchType="JSONPatch", patch=_patch(ops))
        elif path == "/allow":
            response["warnings"] = ["allowed with a warning"]
            response["auditAnnotations"] = {"seen": "yes"}
        elif path == "/mutate" and obj:
            if "labels" not in obj.get("metadata", {}):
                ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
            ops.append({"op": "add", "path": "/metadata/labels/webhook", "value": "mutated"})
            if req["kind"]["kind"] == "Pod" and not any(c["name"] == "sidecar"
                                                        for c in obj["spec"].get("containers", [])):
                ops.append({"op": "add", "path": "/spec/containers/-",
                            "value": {"name": "sidecar", "image": "busybox", "command": ["sleep", "3600"]}})
            response.update(patchType="JSONPatch", patch=_patch(ops))
        elif path == "/append" and obj:
            annotations = obj.get("metadata", {}).get("annotations")
            trail = (annotations or {}).get("trail", "")
            if annotations is None:
                ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
            ops.append({"op": "add", "path": "/metadata/annotations/trail", "value": trail + "+"})
            response.update(patchType="JSONPatch", patch=_patch(ops))
        return web.json_response({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                                  "response": response})


def _judge(req: dict[str, Any]) -> dict[str, Any]:
    """What /deny answers: a refusal (allowed False and its status) or nothing to add."""
    obj = req.get("object") or {}
    old = req.get("oldObject") or {}
    name = (obj or old).get("metadata", {}).get("name", "") or req.get("name", "")  # CONNECT: the options
    values = [*((obj.get("data") or {}).values()), *((obj.get("spec") or {}).values())] \
        if isinstance(obj.get("spec") or {}, dict) else list((obj.get("data") or {}).values())
    if req["operation"] == "CONNECT" and name.startswith("deny-"):
        why = f"attaching to pod '{name}' is not allowed"
    elif req["operation"] == "DELETE" and \
            (old.get("metadata", {}).get("labels") or {}).get("webhook-e2e-test") == "webhook-nondeletable":
        why = "the object is not deletable"
    elif name.startswith("deny-"):
        why = f"the name is not allowed: {name}"
    elif "webhook-disallow" in values:
        why = "the object contains unwanted data"
    else:
        return {}
    return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": why}}


def webhook_config(kind: str, name: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    """A (Validating|Mutating)WebhookConfiguration of `hooks` (each gets the v1 required fields)."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"sideEffects": "None", "admissionReviewVersions": ["v1"], **h} for h in hooks]}

"""The metrics server's HTTPS endpoint: the metrics.k8s.io/v1beta1 discovery documents,
nodes and pods (all, a namespace's, one), `labelSelector`, `/healthz`; every API request
authenticated as requestheader authentication does it (a client certificate of the
front-proxy CA with an allowed name, then the user in X-Remote-User). Authorization is the
aggregator's: the apiserver applied RBAC before proxying."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from kubeling import errors
from kubeling.client import Client
from kubeling.options import flag
from kubeling.servingtls import ServingTLS, client_context, peer_common_name
from metricsserver.scraper import GROUP, VERSION, Scraper, resource_list

__all__ = ["MetricsConfig", "MetricsServer"]

log = logging.getLogger(__name__)
PREFIX = f"/apis/{GROUP}/{VERSION}"
_CODES = {"NotFound": 404, "BadRequest": 400}


@dataclass
class MetricsConfig:
    listen: str = flag("127.0.0.1:0", "HOST:PORT to serve metrics.k8s.io on, over TLS (default %(default)s)")
    tls_cert_file: str = flag("", "serving certificate, naming metrics-server.kube-system.svc (required)")
    tls_private_key_file: str = flag("", "its private key (required)")
    requestheader_client_ca_file: str = flag("", "the front-proxy CA: only its client certificates may name the "
                                             "user in X-Remote-User (required)")
    requestheader_allowed_names: str = flag("front-proxy-client", "the common names of those certificates, "
                                            "comma-separated (default %(default)s)")
    kubelet_client_certificate: str = flag("", "client certificate for the kubelets' /stats/summary")
    kubelet_client_key: str = flag("", "its private key")
    kubelet_certificate_authority: str = flag("", "verify the kubelets' serving certificates against this CA")


def _status(err: errors.ApiError) -> web.Response:
    code = _CODES.get(err.reason, 500)
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": err.message, "reason": err.reason, "code": code}, status=code)


@dataclass
class MetricsServer:
    client: Client
    config: MetricsConfig
    port: int = 0
    _runner: web.AppRunner | None = field(default=None, repr=False)

    async def start(self) -> None:
        cfg = self.config
        if not (cfg.tls_cert_file and cfg.tls_private_key_file and cfg.requestheader_client_ca_file):
            raise ValueError("--tls-cert-file, --tls-private-key-file and --requestheader-client-ca-file are required")
        kubelet_files = (cfg.kubelet_client_certificate, cfg.kubelet_client_key, cfg.kubelet_certificate_authority)
        kubelet_ssl = client_context(Path(cfg.kubelet_certificate_authority), Path(cfg.kubelet_client_certificate),
                                     Path(cfg.kubelet_client_key)) if all(kubelet_files) else None
        self.scraper = Scraper(self.client, kubelet_ssl)
        self.allowed = [n.strip() for n in cfg.requestheader_allowed_names.split(",") if n.strip()]
        tls = ServingTLS(Path(cfg.tls_cert_file), Path(cfg.tls_private_key_file),
                         Path(cfg.requestheader_client_ca_file))
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get(f"/apis/{GROUP}", self._group)
        app.router.add_get(PREFIX, self._resources)
        app.router.add_get(f"{PREFIX}/nodes", self._nodes)
        app.router.add_get(f"{PREFIX}/nodes/{{name}}", self._nodes)
        app.router.add_get(f"{PREFIX}/pods", self._pods)
        app.router.add_get(f"{PREFIX}/namespaces/{{namespace}}/pods", self._pods)
        app.router.add_get(f"{PREFIX}/namespaces/{{namespace}}/pods/{{name}}", self._pods)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, _, port = cfg.listen.rpartition(":")
        site = web.TCPSite(self._runner, host.strip("[]"), int(port), ssl_context=tls.ssl_context())
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        log.info("metrics server serving %s/%s on https://%s:%d", GROUP, VERSION, host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _authenticate(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path == "/healthz":
            return await handler(request)
        peer = peer_common_name(request.transport.get_extra_info("peercert") if request.transport else None)
        user = request.headers.get("X-Remote-User", "")
        if peer is None or (self.allowed and peer not in self.allowed) or not user:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, status=401)
        try:
            return await handler(request)
        except errors.ApiError as err:
            return _status(err)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _group(self, request: web.Request) -> web.Response:
        version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
        return web.json_response({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
                                  "preferredVersion": version})

    async def _resources(self, request: web.Request) -> web.Response:
        return web.json_response(resource_list())

    def _answer(self, kind: str, items: list[dict[str, Any]], name: str) -> web.Response:
        version = f"{GROUP}/{VERSION}"
        if name:
            return web.json_response({"kind": kind, "apiVersion": version, **items[0]})
        return web.json_response({"kind": f"{kind}List", "apiVersion": version, "metadata": {}, "items": items})

    async def _nodes(self, request: web.Request) -> web.Response:
        name = request.match_info.get("name", "")
        items = await self.scraper.node_metrics(name, request.query.get("labelSelector", ""))
        return self._answer("NodeMetrics", items, name)

    async def _pods(self, request: web.Request) -> web.Response:
        name = request.match_info.get("name", "")
        items = await self.scraper.pod_metrics(request.match_info.get("namespace", ""), name,
                                               request.query.get("labelSelector", ""))
        return self._answer("PodMetrics", items, name)

"""The service health server (upstream's pkg/proxy/healthcheck): for every Service of type
LoadBalancer with `externalTrafficPolicy: Local`, kube-proxy answers HTTP on its
`healthCheckNodePort` at each node address with how many ready endpoints the Service
has on this node; 200 when some, 503 when none, so that a load balancer sends outside
traffic only to nodes that can keep the client's address and still serve it.

One aiohttp runner holds a site per (address, port); a request is told apart by the
port it arrived on. A port someone else holds is logged and tried again at the next
sync (upstream records an event and does the same)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiohttp import web

from proxy.serviceinfo import ServicePort

__all__ = ["HealthCheck", "ServiceHealthServer", "health_checks"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HealthCheck:
    namespace: str
    name: str
    port: int


def health_checks(ports: Iterable[ServicePort], local_nodes: frozenset[str]) -> dict[HealthCheck, int]:
    """Each health check wanted -> the Service's ready endpoints on these nodes (distinct
    addresses over all its ports, as upstream's LocalReadyEndpoints counts them)."""
    local: dict[HealthCheck, set[str]] = {}
    for sp in ports:
        if not sp.health_check_node_port or not sp.external_local:
            continue
        check = HealthCheck(sp.namespace, sp.name, sp.health_check_node_port)
        local.setdefault(check, set()).update(e.ip for e in sp.endpoints if e.ready and e.node in local_nodes)
    return {check: len(ips) for check, ips in local.items()}


@dataclass
class ServiceHealthServer:
    counts: dict[int, tuple[HealthCheck, int]] = field(default_factory=dict)  # port -> (check, local endpoints)
    _sites: dict[tuple[str, int], web.TCPSite] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        entry = self.counts.get(sockname[1]) if sockname else None
        if entry is None:
            raise web.HTTPNotFound()
        check, count = entry
        body = json.dumps({"service": {"namespace": check.namespace, "name": check.name}, "localEndpoints": count,
                           "serviceProxyHealthy": True}, indent=2)
        return web.Response(text=body, status=200 if count else 503, content_type="application/json",
                            headers={"X-Content-Type-Options": "nosniff",
                                     "X-Load-Balancing-Endpoint-Weight": str(count)})

    async def sync(self, wanted: dict[HealthCheck, int], addresses: Iterable[str]) -> None:
        """Serve exactly `wanted` on `addresses`: new ports opened, gone ones closed."""
        self.counts = {check.port: (check, count) for check, count in wanted.items()}
        keys = {(address, port) for address in addresses for port in self.counts}
        for key in [k for k in self._sites if k not in keys]:
            await self._sites.pop(key).stop()
        missing = sorted(keys - set(self._sites))
        if not missing:
            return
        if self._runner is None:
            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
        for address, port in missing:
            site = web.TCPSite(self._runner, address, port, reuse_address=True)
            try:
                await site.start()
            except OSError as err:
                check = self.counts[port][0]
                log.warning("health check node port %s:%d of %s/%s not served: %s", address, port, check.namespace,
                            check.name, err)
                continue
            self._sites[(address, port)] = site

    async def stop(self) -> None:
        self._sites.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

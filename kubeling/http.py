"""A component's small HTTP endpoint: /metrics (Prometheus), /healthz, /readyz."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["StatusServer", "start_site"]


async def start_site(app: web.Application, listen: str, *, ssl_context: ssl.SSLContext | None = None,
                     **options: Any) -> tuple[web.AppRunner, int]:
    """Serve `app` on host:port (port 0: a free one; HTTPS with ssl_context); the runner
    (to clean up) and the port."""
    runner = web.AppRunner(app, access_log=None, **options)
    await runner.setup()
    host, _, port = listen.rpartition(":")
    site = web.TCPSite(runner, host or "127.0.0.1", int(port), ssl_context=ssl_context)
    await site.start()
    return runner, int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


@dataclass
class StatusServer:
    registry: CollectorRegistry
    ready: Callable[[], tuple[bool, str]] = field(default=lambda: (True, "ok"))
    port: int = 0
    _runner: web.AppRunner | None = None

    async def start(self, listen: str) -> int:
        app = web.Application()

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            ok, why = self.ready()
            return web.Response(text=why, status=200 if ok else 503)

        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        self._runner, self.port = await start_site(app, listen)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

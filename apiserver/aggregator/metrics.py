"""PodMetrics for the kubeling.v1.Metrics gRPC service (what the HorizontalPodAutoscaler
reads), fetched through the aggregator from the APIService that serves metrics.k8s.io
(the metrics server), as the caller: upstream's HPA reads the same API through the same
proxy. No such APIService, or one that does not answer: ServiceUnavailable with upstream's
words."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any
from urllib.parse import quote

import aiohttp

from apiserver.aggregator.remote import RemoteAPIs
from apiserver.auth.authentication import ANONYMOUS, current_user
from kubeling import errors

__all__ = ["AggregatedMetrics", "GROUP", "VERSION"]

GROUP, VERSION = "metrics.k8s.io", "v1beta1"


class AggregatedMetrics:
    def __init__(self, remote: RemoteAPIs) -> None:
        self.remote = remote

    async def pod_metrics(self, namespace: str, name: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        unavailable = errors.ServiceUnavailable("the server is currently unable to handle the request "
                                                "(get pods.metrics.k8s.io)")
        backend = self.remote.backend_for(GROUP, VERSION)
        if backend is None:
            raise unavailable
        address = await self.remote.address(backend)
        where = f"/namespaces/{namespace}" if namespace else ""
        path = f"/apis/{GROUP}/{VERSION}{where}/pods" + (f"/{name}" if name else "")
        query = f"?labelSelector={quote(label_selector)}" if label_selector else ""
        user = current_user.get() or ANONYMOUS
        headers: list[tuple[str, str]] = [("Accept", "application/json"), ("X-Remote-User", user.name),
                                          *(("X-Remote-Group", g) for g in user.groups)]
        try:
            async with asyncio.timeout(self.remote.timeout * 2):
                async with self.remote.http().get(f"https://{address}{path}{query}", headers=headers,
                                                  ssl=self.remote.ssl_context(backend),
                                                  server_hostname=backend.server_name) as r:
                    body = await r.read()
                    if r.status == 404:
                        raise errors.NotFound(f'podmetrics.metrics.k8s.io "{name}" not found')
                    if r.status != 200:
                        raise unavailable
        except (TimeoutError, aiohttp.ClientError, OSError, ssl.SSLError):
            raise unavailable from None
        try:
            document = json.loads(body)
        except ValueError:
            raise unavailable from None
        return [document] if name else list(document.get("items") or [])

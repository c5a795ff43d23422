"""Calling one webhook (upstream's webhook client): POST the AdmissionReview over HTTPS to
the URL, or to the Service's ClusterIP and port (as kube-apiserver reaches webhooks by
default), verified with the configuration's caBundle (else the system's roots), within the
webhook's timeout; the answer must be an AdmissionReview of the version sent, for the
request's uid. Any failure is a CallError, which the failure policy judges."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from apiserver.admission.webhook.source import Webhook
from kubeling import errors

__all__ = ["WebhookClient", "CallError", "ServiceAddress"]

# (namespace, name, port) of a Service -> the host:port its ClusterIP answers on.
ServiceAddress = Callable[[str, str, int], Awaitable[str]]
_REVIEW_VERSIONS = ("v1", "v1beta1")


class CallError(Exception):
    """The webhook could not be asked, or did not answer as the protocol says."""


@functools.lru_cache(maxsize=256)
def _ssl_context(bundle: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if bundle:
        try:
            context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
        except (ValueError, ssl.SSLError) as err:
            raise CallError(f"caBundle is not a PEM certificate bundle: {err}") from None
    return context


@dataclass
class WebhookClient:
    service_address: ServiceAddress
    _session: aiohttp.ClientSession | None = field(default=None, repr=False)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _url(self, hook: Webhook) -> tuple[str, str | None]:
        """The URL to POST to, and the name the serving certificate must have (a Service's
        `<name>.<namespace>.svc`, as upstream verifies it; a URL's own host)."""
        config = hook.client_config
        if config.get("url"):
            return str(config["url"]), None
        service = config.get("service") or {}
        try:
            address = await self.service_address(service.get("namespace", ""), service.get("name", ""),
                                                 int(service.get("port") or 443))
        except errors.ApiError as err:
            raise CallError(err.message) from None
        return f"https://{address}{service.get('path') or ''}", \
            f"{service.get('name', '')}.{service.get('namespace', '')}.svc"

    @staticmethod
    def review_version(hook: Webhook) -> str:
        return next((v for v in hook.review_versions if v in _REVIEW_VERSIONS), "v1")

    async def call(self, hook: Webhook, request: dict[str, Any]) -> dict[str, Any]:
        """The webhook's AdmissionResponse to `request`."""
        version = self.review_version(hook)
        review = {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}
        url, server_name = await self._url(hook)
        context = _ssl_context(hook.client_config.get("caBundle") or "")
        try:
            async with asyncio.timeout(hook.timeout):
                async with self._http().post(url, data=json.dumps(review, separators=(",", ":")).encode(),
                                             headers={"Content-Type": "application/json",
                                                      "Accept": "application/json"}, ssl=context,
                                             server_hostname=server_name) as response:
                    body = await response.read()
                    if response.status >= 300:
                        raise CallError(f"expected webhook response of admission.k8s.io/{version}, Kind=AdmissionReview"
                                        f", got an HTTP {response.status}: {body[:200].decode(errors='replace')}")
        except TimeoutError:
            raise CallError(f'Post "{url}": context deadline exceeded') from None
        except (aiohttp.ClientError, OSError, ssl.SSLError) as err:
            raise CallError(f'Post "{url}": {err}') from None
        return _response(body, version, request["uid"])


def _response(body: bytes, version: str, uid: str) -> dict[str, Any]:
    try:
        review = json.loads(body)
    except ValueError as err:
        raise CallError(f"the server responded with an invalid body: {err}") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview" \
            or review.get("apiVersion") != f"admission.k8s.io/{version}":
        got = f"{review.get('apiVersion')}, Kind={review.get('kind')}" if isinstance(review, dict) else type(review)
        raise CallError(f"expected webhook response of admission.k8s.io/{version}, Kind=AdmissionReview, "
                        f"got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise CallError("webhook response was absent")
    if response.get("uid") != uid:
        raise CallError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
    if not isinstance(response.get("allowed"), bool):
        raise CallError("webhook response.allowed must be a boolean")
    if "patch" in response and response.get("patchType") != "JSONPatch" and version == "v1":
        raise CallError(f"webhook returned response.patch but not response.patchType: "
                        f"{response.get('patchType')!r}")
    return response

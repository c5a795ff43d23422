"""The proxy subresources over REST (pods/proxy, services/proxy, nodes/proxy): the
request, with its method, path after `/proxy`, query, headers and body, sent on to
where ProxyLocator says, and the answer streamed back as it comes; an upgrade
(WebSocket) is relayed byte for byte. The caller's credentials never go further (the
Authorization and impersonation headers are dropped, as upstream's proxy does)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from urllib.parse import quote

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from apiserver.endpoints.rest.request import Target
from apiserver.registry.core.proxy_location import ProxyLocator
from kubeling import errors
from kubeling.upgradeproxy import ProxyError, is_upgrade, proxy_upgrade

__all__ = ["serve_proxy"]

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
# Hop-by-hop headers (RFC 9110) and the caller's credentials stay here.
_DROPPED = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                      "transfer-encoding", "upgrade", "host", "authorization", "content-length"})


def _forwarded(headers: Mapping[str, str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in headers.items():
        if key.lower() not in _DROPPED and not key.lower().startswith("impersonate-"):
            out.add(key, value)
    return out


async def serve_proxy(request: web.Request, t: Target, locator: ProxyLocator,
                      session: aiohttp.ClientSession) -> web.StreamResponse:
    target = await locator.locate(t.resource.plural, t.namespace, t.name)
    url = target.base + quote(t.proxy_path, safe="/%:@!$&'()*+,;=-._~")
    if request.query_string:
        url += f"?{request.query_string}"
    if is_upgrade(request):
        try:
            return await proxy_upgrade(request, url, ssl_context=target.ssl if isinstance(target.ssl, ssl.SSLContext)
                                       else None)
        except ProxyError as exc:
            raise errors.ServiceUnavailable(f"error trying to reach service: {exc}") from None
    body = request.content if request.can_read_body else None
    try:
        async with session.request(request.method, url, headers=_forwarded(request.headers), data=body,
                                   ssl=target.ssl, allow_redirects=False) as reply:
            response = web.StreamResponse(status=reply.status, reason=reply.reason, headers=_forwarded(reply.headers))
            await response.prepare(request)
            async for chunk in reply.content.iter_chunked(_CHUNK):
                await response.write(chunk)
            await response.write_eof()
            return response
    except (aiohttp.ClientConnectionError, TimeoutError) as exc:
        log.info("proxy to %s failed: %s", url, exc)
        raise errors.ServiceUnavailable(f"error trying to reach service: {exc or type(exc).__name__}") from None

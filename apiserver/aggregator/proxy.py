"""The aggregator's proxy (upstream's kube-aggregator proxy handler): a request for a
group-version an APIService names a Service for is authenticated and authorized here (RBAC
of this apiserver), then sent on to the extension apiserver over TLS with the front-proxy
client certificate, the user in `X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*`
(what it trusts from that certificate alone: requestheader authentication), and its
answer streamed back as it comes (watches included)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from urllib.parse import quote

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from apiserver.aggregator.remote import Backend, RemoteAPIs
from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo
from kubeling import errors

__all__ = ["AggregatorProxy", "aggregated_request_info", "group_version_of"]

log = logging.getLogger(__name__)

# Hop-by-hop headers and what names the caller to this apiserver: never sent on.
_DROPPED = frozenset({"authorization", "host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
                      "proxy-authorization", "content-length"})
_DROPPED_PREFIXES = ("impersonate-", "x-remote-")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def group_version_of(path: str) -> tuple[str, str] | None:
    """(group, version) of a path under /apis/<group>/<version>."""
    parts = path.split("/")
    if len(parts) < 4 or parts[1] != "apis" or not parts[2] or not parts[3]:
        return None
    return parts[2], parts[3]


def aggregated_request_info(path: str, method: str, watch: bool) -> RequestInfo:
    """Upstream's RequestInfoFactory on a path no scheme entry describes: /apis/<g>/<v>
    [/namespaces/<ns>]/<resource>[/<name>[/<subresource>]]."""
    parts = [p for p in path.split("/") if p]
    group, rest = parts[1], parts[3:]
    if not rest:
        return RequestInfo.non_resource(method.lower(), path)  # the group-version's discovery
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "get" if name else "watch" if watch else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return RequestInfo(verb, True, group, resource, sub, namespace, name)


class AggregatorProxy:
    def __init__(self, remote: RemoteAPIs) -> None:
        self.remote = remote

    async def serve(self, request: web.Request, backend: Backend, user: UserInfo) -> web.StreamResponse:
        try:
            address = await self.remote.address(backend)
        except errors.ApiError as err:
            raise errors.ServiceUnavailable(err.message) from None
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in request.headers.items():
            lower = key.lower()
            if lower not in _DROPPED and not lower.startswith(_DROPPED_PREFIXES):
                headers.add(key, value)
        headers["X-Remote-User"] = user.name
        for group in user.groups:
            headers.add("X-Remote-Group", group)
        for key, values in user.extra:
            for value in values:
                headers.add(f"X-Remote-Extra-{quote(key, safe='')}", value)
        url = f"https://{address}{request.raw_path}"
        body = await request.read() if request.body_exists else None
        try:
            upstream = await self.remote.http().request(
                request.method, url, data=body, headers=headers, ssl=self.remote.ssl_context(backend),
                server_hostname=backend.server_name, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.remote.timeout))
        except (aiohttp.ClientError, OSError, ssl.SSLError, asyncio.TimeoutError) as err:
            raise errors.ServiceUnavailable(f"error trying to reach service: {err}") from None
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _DROPPED:
                    response.headers.add(key, value)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            upstream.release()

"""The extension apiservers behind the APIServices (upstream's kube-aggregator): where each
is reached (its Service's ClusterIP and port, as kube-apiserver does by default, or with
--enable-aggregator-routing an endpoint of the Service), how (TLS verified with the
APIService's caBundle for `<service>.<namespace>.svc`, or not verified with
insecureSkipTLSVerify; the front-proxy client certificate presented), whether it answers
its group-version's discovery (the `Available` condition's facts), and that discovery
document, merged into the apiserver's own. Every apiserver follows them for itself (it
serves and proxies them); the elected one writes the conditions (apiservices.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from apiserver.registry.core.proxy_location import ready_endpoint
from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.dynamic import content_of
from kubeling.periodic import Periodic

__all__ = ["Backend", "RemoteAPIs", "ProxyIdentity"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProxyIdentity:
    """The front-proxy client certificate and key (None: none is presented)."""

    cert_file: str = ""
    key_file: str = ""


@dataclass
class Backend:
    name: str  # <version>.<group>
    group: str
    version: str
    namespace: str
    service: str
    port: int
    ca_bundle: str = ""
    insecure: bool = False
    # what the last check found: (status, reason, message) of `Available`, and the discovery
    available: tuple[str, str, str] = ("Unknown", "", "")
    discovery: dict[str, Any] | None = None
    openapi: dict[str, Any] | None = None  # its OpenAPI v3 document of the group-version, if it serves one
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def server_name(self) -> str:
        return f"{self.service}.{self.namespace}.svc"

    def key(self) -> tuple[Any, ...]:
        return self.group, self.version, self.namespace, self.service, self.port, self.ca_bundle, self.insecure


def _backend(obj: Any) -> Backend | None:
    spec = content_of(obj).get("spec") or {}
    service = spec.get("service")
    if not service:
        return None  # a local APIService: served by this apiserver
    return Backend(obj.metadata.name, spec.get("group", ""), spec.get("version", ""), service.get("namespace", ""),
                   service.get("name", ""), int(service.get("port") or 443), spec.get("caBundle") or "",
                   bool(spec.get("insecureSkipTLSVerify")))


class RemoteAPIs:
    def __init__(self, apiservices: Registry[Any], services: Registry[Any], slices: Registry[Any],
                 identity: ProxyIdentity, *, routing: bool = False, interval: float = 1.0,
                 timeout: float = 5.0) -> None:
        self.apiservices = apiservices
        self.services = services
        self.slices = slices
        self.identity = identity
        self.routing = routing
        self.timeout = timeout
        self._backends: dict[str, Backend] = {}  # by APIService name
        self._seen = -1
        self._session: aiohttp.ClientSession | None = None
        self._loop = Periodic("aggregator-discovery", interval, self.sync, first_at_start=True)
        self.changed = asyncio.Event()  # set after every sync (tests and the status controller wait on it)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        if self._session is not None:
            await self._session.close()

    def http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    # ------------------------------------------------------------ what is served

    def backend_for(self, group: str, version: str) -> Backend | None:
        found = self._backends.get(f"{version}.{group}")
        if found is None:
            self._refresh()
            found = self._backends.get(f"{version}.{group}")
        return found

    def backends(self) -> list[Backend]:
        self._refresh()
        return list(self._backends.values())

    def groups(self) -> dict[str, dict[str, Any]]:
        """group -> version -> its APIResourceList, of the backends that answered discovery."""
        out: dict[str, dict[str, Any]] = {}
        for b in self.backends():
            if b.discovery is not None and b.available[0] == "True":
                out.setdefault(b.group, {})[b.version] = b.discovery
        return out

    def _refresh(self) -> None:
        """The backends as the APIServices now say (kept: what was found of unchanged ones)."""
        cache = self.apiservices.watch_cache
        if cache.changes == self._seen:
            return
        self._seen = cache.changes
        wanted = {}
        for entry in cache.store.values():
            backend = _backend(entry.obj)
            if backend is not None:
                old = self._backends.get(backend.name)
                wanted[backend.name] = old if old is not None and old.key() == backend.key() else backend
        self._backends = wanted

    # ------------------------------------------------------------ reaching one

    def ssl_context(self, backend: Backend) -> ssl.SSLContext:
        if backend._ssl is None:
            context = ssl.create_default_context()
            if backend.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif backend.ca_bundle:
                context.load_verify_locations(cadata=base64.b64decode(backend.ca_bundle).decode())
            if self.identity.cert_file:
                context.load_cert_chain(self.identity.cert_file, self.identity.key_file)
            backend._ssl = context
        return backend._ssl

    async def address(self, backend: Backend) -> str:
        """host:port of the backend (ServiceUnavailable with upstream's reason when none)."""
        try:
            svc = await self.services.get(backend.namespace, backend.service)
        except errors.NotFound:
            raise errors.ServiceUnavailable(f'service/{backend.service} in "{backend.namespace}" is not present',
                                            metadata={"cause": "ServiceNotFound"}) from None
        port = next((p for p in svc.spec.ports if p.port == backend.port), None)
        if port is None:
            raise errors.ServiceUnavailable(f'service/{backend.service} in "{backend.namespace}" is not listening on '
                                            f"port {backend.port}", metadata={"cause": "ServicePortError"})
        if not self.routing:
            if not svc.spec.clusterIP or svc.spec.clusterIP == "None":
                raise errors.ServiceUnavailable(f'service/{backend.service} in "{backend.namespace}" has no '
                                                "ClusterIP", metadata={"cause": "ServiceNotFound"})
            return _hostport(svc.spec.clusterIP, backend.port)
        address = ready_endpoint(self.slices, backend.namespace, backend.service, port.name)
        if address is not None:
            return address
        raise errors.ServiceUnavailable(f'service/{backend.service} in "{backend.namespace}" has no endpoints',
                                        metadata={"cause": "MissingEndpoints"})

    # ------------------------------------------------------------ checking

    async def sync(self) -> None:
        await asyncio.gather(*(self._check(b) for b in self.backends()))
        self.changed.set()

    async def _check(self, backend: Backend) -> None:
        path = f"/apis/{backend.group}/{backend.version}"
        try:
            address = await self.address(backend)
        except errors.ApiError as err:
            backend.available = ("False", err.metadata.get("cause", "ServiceNotFound"), err.message)
            backend.discovery = None
            return
        url = f"https://{address}{path}"
        try:
            async with asyncio.timeout(self.timeout):
                async with self.http().get(url, ssl=self.ssl_context(backend), server_hostname=backend.server_name,
                                           headers=_CHECK_HEADERS) as r:
                    body = await r.read()
                    if r.status != 200:
                        raise ValueError(f"bad status from {url}: {r.status}")
            document = json.loads(body)
            if not isinstance(document, dict) or not isinstance(document.get("resources"), list):
                raise ValueError(f"{url} answered no APIResourceList")
        except (TimeoutError, aiohttp.ClientError, OSError, ssl.SSLError, ValueError) as err:
            why = "context deadline exceeded" if isinstance(err, TimeoutError) else str(err) or type(err).__name__
            backend.available = ("False", "FailedDiscoveryCheck", f"failing or missing response from {url}: {why}")
            backend.discovery = None
            return
        backend.available = ("True", "Passed", "all checks passed")
        backend.discovery = document
        backend.openapi = await self._openapi(backend, address)

    async def _openapi(self, backend: Backend, address: str) -> dict[str, Any] | None:
        """The backend's OpenAPI v3 document of its group-version (merged into this apiserver's
        index, as upstream's aggregator merges them), None when it serves none."""
        url = f"https://{address}/openapi/v3/apis/{backend.group}/{backend.version}"
        try:
            async with asyncio.timeout(self.timeout):
                async with self.http().get(url, ssl=self.ssl_context(backend), server_hostname=backend.server_name,
                                           headers=_CHECK_HEADERS) as r:
                    if r.status != 200:
                        return None
                    document = json.loads(await r.read())
        except (TimeoutError, aiohttp.ClientError, OSError, ssl.SSLError, ValueError):
            return None
        return document if isinstance(document, dict) and isinstance(document.get("paths"), dict) else None

    def openapi_documents(self) -> dict[str, dict[str, Any]]:
        """apis/<group>/<version> -> the OpenAPI v3 document, of the available backends."""
        return {f"apis/{b.group}/{b.version}": b.openapi for b in self.backends()
                if b.openapi is not None and b.available[0] == "True"}


# Who the checks are, as upstream's aggregator names itself to extension apiservers.
_CHECK_HEADERS = {"Accept": "application/json", "X-Remote-User": "system:kube-aggregator",
                  "X-Remote-Group": "system:masters"}


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

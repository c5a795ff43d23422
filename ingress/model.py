"""What the ingress controller serves, from the Ingresses of its class, their Services,
EndpointSlices and TLS Secrets: routes in precedence order, backends with their pods'
addresses, certificates by host, and the problems to report on each Ingress.

Precedence, as the Ingress API documents it and ingress-nginx applies it: a request's
host (its Host header without the port, lower case) picks the rules of that exact host,
else of a wildcard host (`*.example.com`: one label), else the rules without a host; among
a host's paths the longest wins, an `Exact` path before a `Prefix` one of the same length
(`ImplementationSpecific` is a prefix here). A prefix matches whole path elements (`/api`
matches `/api`, `/api/` and `/api/v1`, not `/apis`). A request matching nothing goes to
the default backend (the oldest Ingress's `defaultBackend`), else gets 404. When two
Ingresses claim the same host and path, the older one wins.

Backends are the Services' ready endpoints, resolved from EndpointSlices to pod
addresses and target ports (no ClusterIP hop, as ingress-nginx does it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubeling.discovery import SERVICE_NAME_LABEL
from protos.kubeling.v1 import core_pb2, custom_pb2, discovery_pb2

__all__ = ["CONTROLLER", "CLASS_ANNOTATION", "DEFAULT_CLASS_ANNOTATION", "Server", "Backend", "Route", "Certificate",
           "Routing", "routing", "ours", "ingress_content"]

CONTROLLER = "kubeling.io/ingress-haproxy"
CLASS_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"


@dataclass(frozen=True)
class Server:
    address: str
    port: int


@dataclass(frozen=True)
class Backend:
    name: str  # HAProxy's backend name
    service: str  # namespace/name:port, for people reading the config
    servers: tuple[Server, ...]


@dataclass(frozen=True)
class Route:
    host: str  # "" : any host; "*.example.com": a wildcard
    path: str  # normalised: no trailing slash but the root's
    exact: bool
    backend: str
    ingress: str  # namespace/name

    @property
    def order(self) -> tuple[int, str, int, int]:
        host_rank = 2 if not self.host else 1 if self.host.startswith("*.") else 0
        return host_rank, self.host, -len(self.path), 0 if self.exact else 1


@dataclass(frozen=True)
class Certificate:
    name: str  # namespace_secret, the PEM file's name
    pem: bytes  # certificate chain then key, as HAProxy reads it
    hosts: tuple[str, ...]


@dataclass
class Routing:
    routes: list[Route] = field(default_factory=list)
    backends: dict[str, Backend] = field(default_factory=dict)
    default_backend: str = ""  # "" : the built-in 404
    certificates: list[Certificate] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)  # ingress key -> what is wrong with it
    ingresses: list[str] = field(default_factory=list)  # the Ingresses served (keys)

    @property
    def hosts(self) -> list[str]:
        return sorted({r.host for r in self.routes if r.host})


def ingress_content(obj: custom_pb2.CustomResource) -> dict[str, Any]:
    try:
        parsed = json.loads(obj.content or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def ours(ingress: custom_pb2.CustomResource, classes: Iterable[custom_pb2.CustomResource]) -> bool:
    """Whether the Ingress is this controller's: its class (field, else the legacy
    annotation) is one of ours; one naming no class is ours when our class is the default."""
    spec = ingress_content(ingress).get("spec") or {}
    name = spec.get("ingressClassName") or ingress.metadata.annotations.get(CLASS_ANNOTATION, "")
    mine = [c for c in classes if (ingress_content(c).get("spec") or {}).get("controller") == CONTROLLER]
    if name:
        return any(c.metadata.name == name for c in mine)
    return any(c.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true" for c in mine)


def _path(path: str) -> str:
    return path.rstrip("/") or "/"


class _Resolver:
    def __init__(self, services: Mapping[str, core_pb2.Service], slices: list[discovery_pb2.EndpointSlice],
                 secrets: Mapping[str, core_pb2.Secret]) -> None:
        self.services = services
        self.secrets = secrets
        self.slices: dict[str, list[discovery_pb2.EndpointSlice]] = {}
        for es in slices:
            name = es.metadata.labels.get(SERVICE_NAME_LABEL)
            if name and es.addressType == "IPv4":
                self.slices.setdefault(f"{es.metadata.namespace}/{name}", []).append(es)
        self.out = Routing()

    def backend(self, namespace: str, ingress: str, raw: Mapping[str, Any]) -> str:
        """The HAProxy backend for an Ingress backend (made once per Service port)."""
        service = raw.get("service")
        if not service:
            self._problem(ingress, f"backend {json.dumps(raw.get('resource'))}: only Service backends are served")
            return ""
        port = service.get("port") or {}
        wanted = port.get("number") or port.get("name") or ""
        key = f"{namespace}/{service.get('name', '')}"
        name = f"be_{namespace}_{service.get('name', '')}_{wanted}"
        if name in self.out.backends:
            return name
        svc = self.services.get(key)
        servers: tuple[Server, ...] = ()
        if svc is None:
            self._problem(ingress, f"service {key} not found")
        else:
            sport = next((p for p in svc.spec.ports if (p.port == wanted if isinstance(wanted, int) else
                                                         p.name == wanted)), None)
            if sport is None:
                self._problem(ingress, f"service {key} has no port {wanted}")
            else:
                servers = self._servers(key, sport.name)
        self.out.backends[name] = Backend(name, f"{key}:{wanted}", servers)
        return name

    def _servers(self, key: str, port_name: str) -> tuple[Server, ...]:
        found: set[Server] = set()
        for es in self.slices.get(key, []):
            port = next((p for p in es.ports if p.name == port_name and (p.protocol or "TCP") == "TCP"), None)
            if port is None or not port.HasField("port"):
                continue
            for endpoint in es.endpoints:
                ready = endpoint.conditions.ready if endpoint.conditions.HasField("ready") else True
                if ready and endpoint.addresses:
                    found.add(Server(endpoint.addresses[0], port.port))
        return tuple(sorted(found, key=lambda s: (tuple(int(x) for x in s.address.split(".")), s.port)))

    def certificate(self, namespace: str, ingress: str, tls: Mapping[str, Any]) -> None:
        secret_name = tls.get("secretName")
        if not secret_name:
            return  # TLS without a secret: the default certificate serves these hosts
        key = f"{namespace}/{secret_name}"
        secret = self.secrets.get(key)
        if secret is None:
            self._problem(ingress, f"secret {key} not found: its hosts get the default certificate")
            return
        crt, private = secret.data.get("tls.crt", b""), secret.data.get("tls.key", b"")
        try:
            x509.load_pem_x509_certificate(crt)
            serialization.load_pem_private_key(private, password=None)
        except ValueError as err:
            self._problem(ingress, f"secret {key} holds no usable TLS certificate and key: {err}")
            return
        pem = crt.rstrip(b"\n") + b"\n" + private.rstrip(b"\n") + b"\n"
        hosts = tuple(sorted(str(h) for h in tls.get("hosts") or []))
        name = f"{namespace}_{secret_name}"
        existing = next((c for c in self.out.certificates if c.name == name), None)
        if existing is not None:
            self.out.certificates.remove(existing)
            hosts = tuple(sorted(set(existing.hosts) | set(hosts)))
        self.out.certificates.append(Certificate(name, pem, hosts))

    def _problem(self, ingress: str, text: str) -> None:
        self.out.problems.setdefault(ingress, []).append(text)


def routing(ingresses: list[custom_pb2.CustomResource], services: Iterable[core_pb2.Service],
            slices: list[discovery_pb2.EndpointSlice], secrets: Iterable[core_pb2.Secret]) -> Routing:
    """The routing for `ingresses` (this controller's, not being deleted)."""
    resolver = _Resolver({f"{s.metadata.namespace}/{s.metadata.name}": s for s in services}, slices,
                         {f"{s.metadata.namespace}/{s.metadata.name}": s for s in secrets})
    out = resolver.out
    claimed: set[tuple[str, str, bool]] = set()
    for ing in sorted(ingresses, key=lambda i: (i.metadata.creationTimestamp.seconds, i.metadata.namespace,
                                                i.metadata.name)):
        namespace, key = ing.metadata.namespace, f"{ing.metadata.namespace}/{ing.metadata.name}"
        spec = ingress_content(ing).get("spec") or {}
        out.ingresses.append(key)
        if spec.get("defaultBackend"):
            name = resolver.backend(namespace, key, spec["defaultBackend"])
            if name and not out.default_backend:
                out.default_backend = name
        for tls in spec.get("tls") or []:
            resolver.certificate(namespace, key, tls)
        for rule in spec.get("rules") or []:
            host = str(rule.get("host") or "").lower()
            for item in (rule.get("http") or {}).get("paths") or []:
                exact = item.get("pathType") == "Exact"
                path = _path(str(item.get("path") or "/"))
                if (host, path, exact) in claimed:
                    resolver._problem(key, f"{host or '*'}{path} is served by an older Ingress")
                    continue
                name = resolver.backend(namespace, key, item.get("backend") or {})
                if not name:
                    continue
                claimed.add((host, path, exact))
                out.routes.append(Route(host, path, exact, name, key))
    out.routes.sort(key=lambda r: r.order)
    return out


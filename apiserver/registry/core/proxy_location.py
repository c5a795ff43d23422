"""Where pods/proxy, services/proxy and nodes/proxy send a request (the
ResourceLocation of upstream's pod, service and node registries).

The name in the URL may carry a scheme and a port: `[scheme:]name[:port]`.
- a pod: its IP, at the port given or the first port its containers declare;
- a Service: one of its ready endpoints (from its EndpointSlices, picked at random as
  upstream picks from its Endpoints) at the target port of the Service port named (by
  name, or by number);
- a node: its kubelet's daemon endpoint (HTTPS with the apiserver's kubelet client
  certificate) unless another port is named, which is reached over plain HTTP.
Pods and Services are reached over HTTP, or HTTPS without verifying their certificate,
as upstream's proxy transport does.
"""

from __future__ import annotations

import random
import ssl
from dataclasses import dataclass
from typing import Any

from apiserver.registry.core.pod_location import PodLocator
from apiserver.registry.generic.store import Registry
from kubeling import errors
from protos.kubeling.v1 import core_pb2, discovery_pb2

__all__ = ["ProxyLocator", "ProxyTarget", "split_scheme_name_port", "ready_endpoint"]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True)
class ProxyTarget:
    base: str  # scheme://host:port
    ssl: ssl.SSLContext | bool  # the TLS to reach it with (False: none, or not verified)


def split_scheme_name_port(text: str) -> tuple[str, str, str]:
    """upstream's SplitSchemeNamePort: `name`, `name:port` or `scheme:name:port`."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        raise errors.BadRequest(f'invalid request "{text}"')
    if not name or scheme not in ("", "http", "https"):
        raise errors.BadRequest(f'invalid request "{text}"')
    return scheme, name, port


def _hostport(host: str, port: int | str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def ready_endpoint(slices: Registry[Any], namespace: str, service: str, port_name: str) -> str | None:
    """host:port of a ready endpoint of the Service's port of that name (its EndpointSlices,
    from the watch cache), picked at random; None when there is none."""
    found = []
    for entry in slices.watch_cache.store.values():
        es: discovery_pb2.EndpointSlice = entry.obj
        if es.metadata.namespace != namespace or es.metadata.labels.get(SERVICE_NAME_LABEL) != service:
            continue
        target = next((p.port for p in es.ports if p.name == port_name), None)
        if not target:
            continue
        for endpoint in es.endpoints:
            ready = not endpoint.conditions.HasField("ready") or endpoint.conditions.ready
            if ready and endpoint.addresses:
                found.append(_hostport(endpoint.addresses[0], target))
    return random.choice(found) if found else None


_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


@dataclass
class ProxyLocator:
    pods: PodLocator
    services: Registry[core_pb2.Service]
    slices: Registry[Any]

    async def locate(self, resource: str, namespace: str, text: str) -> ProxyTarget:
        scheme, name, port = split_scheme_name_port(text)
        if resource == "pods":
            return await self._pod(namespace, scheme, name, port)
        if resource == "services":
            return await self._service(namespace, scheme, name, port)
        return await self._node(scheme, name, port)

    @staticmethod
    def _target(scheme: str, hostport: str) -> ProxyTarget:
        return ProxyTarget(f"{scheme or 'http'}://{hostport}", _INSECURE if scheme == "https" else False)

    async def _pod(self, namespace: str, scheme: str, name: str, port: str) -> ProxyTarget:
        pod = await self.pods.pod(namespace, name)
        if not port:
            port = next((str(p.containerPort) for c in pod.spec.containers for p in c.ports), "")
        if not pod.status.podIP:
            raise errors.ServiceUnavailable(f'pod "{name}" has no IP address yet')
        if port and not port.isdigit():
            raise errors.BadRequest(f'invalid port "{port}" for pod "{name}": a number')
        return self._target(scheme, _hostport(pod.status.podIP, port) if port else pod.status.podIP)

    async def _service(self, namespace: str, scheme: str, name: str, port: str) -> ProxyTarget:
        service = await self.services.get(namespace, name)
        port_name = port
        if port.isdigit():
            found = next((p for p in service.spec.ports if p.port == int(port)), None)
            if found is None:
                raise errors.ServiceUnavailable(f'no service port {port} found for service "{name}"')
            port_name = found.name
        address = ready_endpoint(self.slices, namespace, name, port_name)
        if address is None:
            raise errors.ServiceUnavailable(f'no endpoints available for service "{name}"')
        return self._target(scheme, address)

    async def _node(self, scheme: str, name: str, port: str) -> ProxyTarget:
        node: core_pb2.Node = await self.pods.nodes.get("", name)
        kubelet_port = node.status.daemonEndpoints.kubeletEndpoint.Port
        address = next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")
        if not address:
            raise errors.ServiceUnavailable(f'node "{name}" has no InternalIP')
        if not port or port == str(kubelet_port):
            if not kubelet_port:
                raise errors.ServiceUnavailable(f'node "{name}" has no kubelet endpoint')
            tls = self.pods.ssl
            return ProxyTarget(f"{'https' if tls is not None else 'http'}://{_hostport(address, kubelet_port)}",
                               tls if tls is not None else False)
        return self._target(scheme, _hostport(address, port))

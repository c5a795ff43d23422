"""What kube-proxy programs, from the informers' Services and EndpointSlices (upstream's
pkg/proxy ServicePortMap and EndpointsMap): one ServicePort per Service port with a
ClusterIP, and its endpoints merged across the Service's slices."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubeling.discovery import SERVICE_NAME_LABEL
from protos.kubeling.v1 import core_pb2, discovery_pb2

__all__ = ["ServicePort", "Endpoint", "service_ports"]


@dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int
    node: str
    ready: bool
    serving: bool
    terminating: bool

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"


@dataclass
class ServicePort:
    namespace: str
    name: str
    port_name: str
    protocol: str  # TCP, UDP, SCTP
    cluster_ip: str
    port: int
    node_port: int = 0
    affinity_seconds: int = 0  # ClientIP session affinity's timeout; 0: none
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()  # status.loadBalancer's VIPs: traffic arrives addressed to them
    source_ranges: tuple[str, ...] = ()  # loadBalancerSourceRanges: the only clients of the load balancer IPs
    health_check_node_port: int = 0
    internal_local: bool = False  # internalTrafficPolicy: Local
    external_local: bool = False  # externalTrafficPolicy: Local
    endpoints: list[Endpoint] = field(default_factory=list)

    @property
    def external(self) -> bool:
        """Reached from outside the cluster (node port, external or load balancer IPs)."""
        return bool(self.node_port or self.external_ips or self.load_balancer_ips)

    @property
    def id(self) -> str:
        """upstream's ServicePortName.String(): ns/name[:port]."""
        return f"{self.namespace}/{self.name}" + (f":{self.port_name}" if self.port_name else "")

    def usable(self, local_nodes: frozenset[str] | None = None) -> list[Endpoint]:
        """The endpoints traffic goes to: the ready ones, else (upstream's terminating
        fallback) those still serving while they terminate; only local ones if asked."""
        pool = [e for e in self.endpoints if local_nodes is None or e.node in local_nodes]
        ready = [e for e in pool if e.ready]
        return ready or [e for e in pool if e.serving and e.terminating]


def _slice_endpoints(es: discovery_pb2.EndpointSlice, port_name: str, protocol: str) -> Iterable[Endpoint]:
    port = next((p for p in es.ports if p.name == port_name and (p.protocol or "TCP") == protocol), None)
    if port is None or not port.HasField("port"):
        return
    for endpoint in es.endpoints:
        if not endpoint.addresses:
            continue
        cond = endpoint.conditions
        # unset conditions mean ready and serving (the API's documented reading)
        ready = cond.ready if cond.HasField("ready") else True
        serving = cond.serving if cond.HasField("serving") else ready
        yield Endpoint(endpoint.addresses[0], port.port, endpoint.nodeName, ready, serving,
                       cond.terminating if cond.HasField("terminating") else False)


def _ipv4(addresses: Iterable[str]) -> list[str]:
    out = []
    for address in addresses:
        try:
            if ipaddress.ip_address(address).version == 4:
                out.append(address)
        except ValueError:
            continue
    return out


def _ipv4_cidrs(ranges: Iterable[str]) -> list[str]:
    out = []
    for text in ranges:
        try:
            net = ipaddress.ip_network(text.strip(), strict=False)  # the API keeps host bits (a legacy field)
        except ValueError:
            continue
        if net.version == 4:
            out.append(str(net))
    return out


def service_ports(services: Iterable[core_pb2.Service],
                  slices: Iterable[discovery_pb2.EndpointSlice]) -> list[ServicePort]:
    by_service: dict[tuple[str, str], list[discovery_pb2.EndpointSlice]] = {}
    for es in slices:
        if es.addressType != "IPv4" or SERVICE_NAME_LABEL not in es.metadata.labels:
            continue
        by_service.setdefault((es.metadata.namespace, es.metadata.labels[SERVICE_NAME_LABEL]), []).append(es)
    out: list[ServicePort] = []
    for svc in services:
        spec = svc.spec
        if spec.type == "ExternalName" or not spec.clusterIP or spec.clusterIP == "None":
            continue
        try:
            if ipaddress.ip_address(spec.clusterIP).version != 4:
                continue
        except ValueError:
            continue
        affinity = spec.sessionAffinityConfig.clientIP.timeoutSeconds if spec.sessionAffinity == "ClientIP" else 0
        balanced = spec.type == "LoadBalancer"
        # upstream skips ipMode Proxy: that load balancer's traffic arrives addressed to the node
        vips = tuple(_ipv4(i.ip for i in svc.status.loadBalancer.ingress
                           if i.ip and (not i.HasField("ipMode") or i.ipMode == "VIP"))) if balanced else ()
        for port in spec.ports:
            sp = ServicePort(svc.metadata.namespace, svc.metadata.name, port.name, port.protocol or "TCP",
                             spec.clusterIP, port.port,
                             node_port=port.nodePort if spec.type in ("NodePort", "LoadBalancer") else 0,
                             affinity_seconds=affinity or (10800 if spec.sessionAffinity == "ClientIP" else 0),
                             external_ips=tuple(_ipv4(spec.externalIPs)), load_balancer_ips=vips,
                             source_ranges=tuple(_ipv4_cidrs(spec.loadBalancerSourceRanges)) if vips else (),
                             health_check_node_port=spec.healthCheckNodePort if balanced else 0,
                             internal_local=spec.internalTrafficPolicy == "Local",
                             external_local=spec.externalTrafficPolicy == "Local")
            seen: set[str] = set()
            for es in sorted(by_service.get((svc.metadata.namespace, svc.metadata.name), []),
                             key=lambda s: s.metadata.name):
                for endpoint in _slice_endpoints(es, port.name, sp.protocol):
                    if endpoint.address not in seen:  # the same pod in two slices (a slice moving)
                        seen.add(endpoint.address)
                        sp.endpoints.append(endpoint)
            sp.endpoints.sort(key=lambda e: (socket.inet_aton(e.ip), e.port))  # IPv4 only, by number
            out.append(sp)
    return sorted(out, key=lambda s: (s.id, s.protocol))

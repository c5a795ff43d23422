"""v1 Services and Endpoints: defaults and validation as upstream's pkg/apis/core
(SetDefaults_Service, ValidateService, ValidateEndpoints). Addresses and node ports are
not chosen here: the Service registry's allocation hooks
(`apiserver.registry.core.service_allocation`) fill them in before validation."""

from __future__ import annotations

import ipaddress

from apiserver.registry.generic.strategy import Strategy
from apiserver.validation import Checker
from kubeling import names, scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["ServiceStrategy", "EndpointsStrategy", "check_addresses", "SERVICE_TYPES", "NONE",
           "headless", "uses_node_ports", "PROTOCOLS", "needs_health_check", "externally_accessible",
           "allocates_node_ports"]

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
NONE = "None"  # clusterIP of a headless Service
DEFAULT_AFFINITY_TIMEOUT = 10800  # upstream's DefaultClientIPServiceAffinitySeconds
MAX_AFFINITY_TIMEOUT = 86400


def headless(svc: core_pb2.Service) -> bool:
    return svc.spec.clusterIP == NONE


def uses_node_ports(svc: core_pb2.Service) -> bool:
    return svc.spec.type in ("NodePort", "LoadBalancer")


def allocates_node_ports(svc: core_pb2.Service) -> bool:
    """Whether ports without a node port get one: a LoadBalancer may decline
    (allocateLoadBalancerNodePorts: false, for load balancers that reach pods directly)."""
    if svc.spec.type == "LoadBalancer":
        return not svc.spec.HasField("allocateLoadBalancerNodePorts") or svc.spec.allocateLoadBalancerNodePorts
    return svc.spec.type == "NodePort"


def externally_accessible(svc: core_pb2.Service) -> bool:
    """upstream's ExternallyAccessible: reached from outside by node ports, a load
    balancer or external IPs; only these have an externalTrafficPolicy."""
    return uses_node_ports(svc) or (svc.spec.type == "ClusterIP" and bool(svc.spec.externalIPs))


def needs_health_check(svc: core_pb2.Service) -> bool:
    """upstream's NeedsHealthCheck: a load balancer that sends traffic only to nodes with
    local endpoints asks each node's health-check node port which ones have them."""
    return svc.spec.type == "LoadBalancer" and svc.spec.externalTrafficPolicy == "Local"


def _target_port(path: str, port: core_pb2.ServicePort, check: Checker) -> None:
    target = port.targetPort
    if target.type == 0:
        check.port(path, target.intVal)
    else:
        check.name(path, target.strVal, names.port_name)


def _validate_ports(svc: core_pb2.Service, check: Checker) -> None:
    spec = svc.spec
    if not spec.ports and not headless(svc) and spec.type != "ExternalName":
        check.add("spec.ports", "Required value")
    seen_names: set[str] = set()
    seen_ports: set[tuple[int, str]] = set()
    seen_node_ports: set[tuple[int, str]] = set()
    for i, port in enumerate(spec.ports):
        path = f"spec.ports[{i}]"
        if len(spec.ports) > 1 and not port.name:
            check.add(f"{path}.name", "Required value")
        elif port.name:
            check.name(f"{path}.name", port.name, names.dns1123_label)
            if port.name in seen_names:
                check.add(f"{path}.name", f'Duplicate value: "{port.name}"')
            seen_names.add(port.name)
        check.port(f"{path}.port", port.port)
        check.unsupported(f"{path}.protocol", port.protocol, PROTOCOLS)
        _target_port(f"{path}.targetPort", port, check)
        if (port.port, port.protocol) in seen_ports:
            check.add(f"{path}", f'Duplicate value: {{"port":{port.port},"protocol":"{port.protocol}"}}')
        seen_ports.add((port.port, port.protocol))
        if port.nodePort:
            if not uses_node_ports(svc):
                check.add(f"{path}.nodePort", f"Forbidden: may not be used when `type` is '{spec.type}'")
            check.port(f"{path}.nodePort", port.nodePort)
            if (port.nodePort, port.protocol) in seen_node_ports:
                check.add(f"{path}.nodePort", f"Duplicate value: {port.nodePort}")
            seen_node_ports.add((port.nodePort, port.protocol))


class ServiceStrategy(Strategy[core_pb2.Service]):
    resource = scheme.SERVICES

    def validate_name(self, name: str) -> list[str]:
        return names.dns1123_label(name)  # a Service's name is a DNS label (it is one in DNS)

    def prepare_for_create(self, obj: core_pb2.Service) -> None:
        obj.ClearField("status")

    def default(self, obj: core_pb2.Service) -> None:
        spec = obj.spec
        spec.type = spec.type or "ClusterIP"
        spec.sessionAffinity = spec.sessionAffinity or "None"
        if spec.sessionAffinity == "ClientIP":
            client_ip = spec.sessionAffinityConfig.clientIP
            if not client_ip.HasField("timeoutSeconds"):
                client_ip.timeoutSeconds = DEFAULT_AFFINITY_TIMEOUT
        for port in spec.ports:
            port.protocol = port.protocol or "TCP"
            if port.targetPort.type == 0 and port.targetPort.intVal == 0:
                port.targetPort.intVal = port.port
        if spec.type != "ExternalName" and not spec.HasField("internalTrafficPolicy"):
            spec.internalTrafficPolicy = "Cluster"
        if externally_accessible(obj) and not spec.externalTrafficPolicy:
            spec.externalTrafficPolicy = "Cluster"
        if spec.type == "LoadBalancer" and not spec.HasField("allocateLoadBalancerNodePorts"):
            spec.allocateLoadBalancerNodePorts = True
        _default_status(obj)
        if spec.clusterIP and not spec.clusterIPs:
            spec.clusterIPs.append(spec.clusterIP)

    def prepare_for_update(self, new: core_pb2.Service, old: core_pb2.Service) -> None:
        """upstream's patchAllocatedValues: an update that leaves out what was allocated
        (a `kubectl replace` of the original manifest) keeps it; and its
        dropTypeDependentFields: what only the old type had goes, unless the update set it."""
        super().prepare_for_update(new, old)
        spec, was = new.spec, old.spec
        if needs_health_check(old) and needs_health_check(new) and not spec.healthCheckNodePort:
            spec.healthCheckNodePort = was.healthCheckNodePort
        if not needs_health_check(new) and spec.healthCheckNodePort == was.healthCheckNodePort:
            spec.healthCheckNodePort = 0
        if was.type == "LoadBalancer" and spec.type != "LoadBalancer":
            for name in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
                if spec.HasField(name) and was.HasField(name) and getattr(spec, name) == getattr(was, name):
                    spec.ClearField(name)
        if not externally_accessible(new) and externally_accessible(old) and \
                spec.externalTrafficPolicy == was.externalTrafficPolicy:
            spec.externalTrafficPolicy = ""
        if was.clusterIP and spec.type != "ExternalName" and old.spec.type != "ExternalName":
            if not spec.clusterIP:
                spec.clusterIP = was.clusterIP
            if not spec.clusterIPs:
                spec.clusterIPs.extend(was.clusterIPs)
            if not spec.ipFamilies:
                spec.ipFamilies.extend(was.ipFamilies)
            if not spec.HasField("ipFamilyPolicy") and was.HasField("ipFamilyPolicy"):
                spec.ipFamilyPolicy = was.ipFamilyPolicy
        if uses_node_ports(old) and (spec.type or "ClusterIP") in ("NodePort", "LoadBalancer"):
            used = {p.nodePort for p in spec.ports if p.nodePort}
            by_name = {p.name: p.nodePort for p in was.ports}
            for port in spec.ports:
                kept = by_name.get(port.name, 0)
                if not port.nodePort and kept and kept not in used:
                    port.nodePort = kept

    def validate(self, obj: core_pb2.Service, check: Checker) -> None:
        spec = obj.spec
        check.unsupported("spec.type", spec.type, SERVICE_TYPES)
        check.unsupported("spec.sessionAffinity", spec.sessionAffinity, ("ClientIP", "None"))
        if spec.sessionAffinity == "ClientIP":
            timeout = spec.sessionAffinityConfig.clientIP.timeoutSeconds
            if not 0 < timeout <= MAX_AFFINITY_TIMEOUT:
                check.invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                              f"must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT}")
        elif spec.HasField("sessionAffinityConfig"):
            check.add("spec.sessionAffinityConfig",
                      "Invalid value: must not be set when session affinity is None")
        _validate_ports(obj, check)
        check.labels("spec.selector", spec.selector)
        if spec.clusterIPs and spec.clusterIPs[0] != spec.clusterIP:
            check.invalid("spec.clusterIPs[0]", spec.clusterIPs[0],
                          "must be same as `clusterIP`")
        if spec.type == "ExternalName":
            if spec.clusterIP:
                check.add("spec.clusterIPs", "Forbidden: may not be set for ExternalName services")
            if check.required("spec.externalName", spec.externalName):
                check.name("spec.externalName", spec.externalName.rstrip("."), names.dns1123_subdomain)
        elif spec.clusterIP and spec.clusterIP != NONE:
            check.ip("spec.clusterIPs[0]", spec.clusterIP)
        if headless(obj) and uses_node_ports(obj):
            check.invalid("spec.clusterIPs[0]", NONE, f"may not be set to 'None' for {spec.type} services")
        if spec.externalTrafficPolicy and not externally_accessible(obj):
            check.invalid("spec.externalTrafficPolicy", spec.externalTrafficPolicy,
                          "may only be set for externally-accessible services")
        elif spec.externalTrafficPolicy:
            check.unsupported("spec.externalTrafficPolicy", spec.externalTrafficPolicy, ("Cluster", "Local"))
        if spec.healthCheckNodePort:
            if not needs_health_check(obj):
                check.add("spec.healthCheckNodePort", "Forbidden: may only be set when `type` is 'LoadBalancer' "
                                                      "and `externalTrafficPolicy` is 'Local'")
            check.port("spec.healthCheckNodePort", spec.healthCheckNodePort)
        if spec.HasField("internalTrafficPolicy"):
            check.unsupported("spec.internalTrafficPolicy", spec.internalTrafficPolicy, ("Cluster", "Local"))
        for i, ip in enumerate(spec.externalIPs):
            check.ip(f"spec.externalIPs[{i}]", ip)
        _validate_load_balancer(obj, check)

    def validate_update(self, new: core_pb2.Service, old: core_pb2.Service, check: Checker) -> None:
        # upstream: a ClusterIP is kept for the Service's life, unless its type becomes ExternalName
        if old.spec.clusterIP and new.spec.type != "ExternalName" and new.spec.clusterIP != old.spec.clusterIP:
            check.invalid("spec.clusterIPs[0]", new.spec.clusterIP, "may not change once set")
        # the class says which controller owns the load balancer: it may not pass to another
        if old.spec.type == new.spec.type == "LoadBalancer" and _class(new) != _class(old):
            check.invalid("spec.loadBalancerClass", _class(new) or None, "may not change once set")

    def prepare_for_status_update(self, new: core_pb2.Service, old: core_pb2.Service) -> None:
        super().prepare_for_status_update(new, old)
        _default_status(new)

    def validate_status(self, new: core_pb2.Service, check: Checker) -> None:
        for i, ingress in enumerate(new.status.loadBalancer.ingress):
            path = f"status.loadBalancer.ingress[{i}]"
            if ingress.ip:
                check.ip(f"{path}.ip", ingress.ip)
            if ingress.hostname:
                check.name(f"{path}.hostname", ingress.hostname, names.dns1123_subdomain)
                try:
                    ipaddress.ip_address(ingress.hostname)
                    check.invalid(f"{path}.hostname", ingress.hostname, "must be a DNS name, not an IP address")
                except ValueError:
                    pass
            if ingress.HasField("ipMode"):
                if not ingress.ip:
                    check.add(f"{path}.ipMode", "Forbidden: may not be specified when `ip` is not set")
                else:
                    check.unsupported(f"{path}.ipMode", ingress.ipMode, ("Proxy", "VIP"))
            elif ingress.ip:
                check.add(f"{path}.ipMode", "Required value: must be specified when `ip` is set")


def _class(svc: core_pb2.Service) -> str:
    return svc.spec.loadBalancerClass if svc.spec.HasField("loadBalancerClass") else ""


def _default_status(svc: core_pb2.Service) -> None:
    """upstream's SetDefaults_Service: an ingress address without a mode is a VIP (traffic
    arrives addressed to it, kube-proxy answers there)."""
    for ingress in svc.status.loadBalancer.ingress:
        if ingress.ip and not ingress.HasField("ipMode"):
            ingress.ipMode = "VIP"


def _validate_load_balancer(svc: core_pb2.Service, check: Checker) -> None:
    spec = svc.spec
    balanced = spec.type == "LoadBalancer"
    if spec.HasField("allocateLoadBalancerNodePorts") and not balanced:
        check.add("spec.allocateLoadBalancerNodePorts", "Forbidden: may only be used when `type` is 'LoadBalancer'")
    if spec.HasField("loadBalancerClass"):
        if not balanced:
            check.add("spec.loadBalancerClass", "Forbidden: may only be used when `type` is 'LoadBalancer'")
        else:
            check.name("spec.loadBalancerClass", spec.loadBalancerClass, names.qualified_name)
    if spec.loadBalancerSourceRanges:
        if not balanced:
            check.add("spec.loadBalancerSourceRanges", "Forbidden: may only be used when `type` is 'LoadBalancer'")
        for i, value in enumerate(spec.loadBalancerSourceRanges):
            try:
                ipaddress.ip_network(value.strip(), strict=False)
            except ValueError:
                check.invalid(f"spec.loadBalancerSourceRanges[{i}]", value,
                              "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")
    if spec.loadBalancerIP:
        check.ip("spec.loadBalancerIP", spec.loadBalancerIP)


def check_addresses(path: str, address_type: str, addresses: list[str], check: Checker) -> None:
    for j, address in enumerate(addresses):
        if address_type == "FQDN":
            check.name(f"{path}[{j}]", address, names.dns1123_subdomain)
            continue
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            check.invalid(f"{path}[{j}]", address, "must be a valid IP address")
            continue
        if ip.version != (4 if address_type == "IPv4" else 6):
            check.invalid(f"{path}[{j}]", address, f"must be an {address_type} address")


class EndpointsStrategy(Strategy[core_pb2.Endpoints]):
    resource = scheme.ENDPOINTS

    def validate(self, obj: core_pb2.Endpoints, check: Checker) -> None:
        for i, subset in enumerate(obj.subsets):
            path = f"subsets[{i}]"
            for field, addresses in (("addresses", subset.addresses), ("notReadyAddresses", subset.notReadyAddresses)):
                for j, address in enumerate(addresses):
                    check.ip(f"{path}.{field}[{j}].ip", address.ip)
            for j, port in enumerate(subset.ports):
                check.port(f"{path}.ports[{j}].port", port.port)
                check.unsupported(f"{path}.ports[{j}].protocol", port.protocol or "TCP", PROTOCOLS)

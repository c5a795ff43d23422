"""networking.k8s.io/v1: Ingresses (how HTTP from outside reaches Services, by host and
path), IngressClasses (which controller serves an Ingress) and NetworkPolicies (which
traffic may reach and leave pods), kept as JSON (json_strategy) with upstream's defaults
and validation (pkg/apis/networking/validation). What acts on them comes with their
controllers; the API is what kubectl, operators and the conformance tests use first."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from apiserver.registry.admissionregistration.rules import validate_selector
from apiserver.registry.generic.json_strategy import (
    CR,
    LABEL_SELECTOR,
    JsonStrategy,
    array,
    integer,
    obj,
    string,
)
from apiserver.validation import Checker
from kubeling import names, scheme
from kubeling.dynamic import content_of

__all__ = ["STRATEGIES", "DEFAULT_CLASS_ANNOTATION", "IngressStrategy", "IngressClassStrategy",
           "NetworkPolicyStrategy", "is_default_class"]

DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
_INT_OR_STRING = {"x-kubernetes-int-or-string": True}
_SERVICE_BACKEND = obj({"name": string(), "port": obj({"name": string(), "number": integer()})})
_TYPED_REF = obj({"apiGroup": string(), "kind": string(), "name": string()})
_BACKEND = obj({"service": _SERVICE_BACKEND, "resource": _TYPED_REF})
_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
# upstream's invalidPathSequences and invalidPathSuffixes for Exact and Prefix paths
_BAD_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_BAD_SUFFIXES = ("/..", "/.")
_LOAD_BALANCER = obj({"ingress": array(obj({"ip": string(), "hostname": string(), "ports": array(obj({
    "port": integer(), "protocol": string(), "error": string()}))}))})


def is_default_class(ingress_class: CR) -> bool:
    return ingress_class.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"


def _host(host: str, path: str, check: Checker) -> None:
    """A rule's or TLS entry's host: a DNS name, a wildcard only as its whole first label."""
    try:
        ipaddress.ip_address(host)
        check.invalid(path, host, "must be a DNS name, not an IP address")
        return
    except ValueError:
        pass
    if host.startswith("*."):
        if names.dns1123_subdomain(host[2:]):
            check.invalid(path, host, "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS "
                                      "subdomain, which must consist of lower case alphanumeric characters, '-' or "
                                      "'.' and end with an alphanumeric character (e.g. '*.example.com', regex "
                                      "used for validation is "
                                      "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        return
    check.name(path, host, names.dns1123_subdomain)


def _backend(backend: dict[str, Any], path: str, check: Checker) -> None:
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        check.invalid(path, "", "cannot set both resource and service backends")
        return
    if service is None and resource is None:
        check.add(path, "Required value: one of `backend.service` or `backend.resource` must be specified")
        return
    if resource is not None:
        if not resource.get("kind"):
            check.add(f"{path}.resource.kind", "Required value")
        if not resource.get("name"):
            check.add(f"{path}.resource.name", "Required value")
        return
    assert service is not None
    if not service.get("name"):
        check.add(f"{path}.service.name", "Required value")
    else:
        check.name(f"{path}.service.name", service["name"], names.dns1035_label)
    port = service.get("port") or {}
    has_name, has_number = bool(port.get("name")), "number" in port and port["number"] != 0
    if has_name and has_number:
        check.invalid(f"{path}.service.port", port, "cannot set both port name & port number")
    elif has_name:
        check.name(f"{path}.service.port.name", port["name"], names.port_name)
    elif has_number:
        check.port(f"{path}.service.port.number", port["number"])
    else:
        check.add(f"{path}.service.port", "Required value: port name or number is required")


def _http_path(p: dict[str, Any], at: str, check: Checker) -> None:
    kind, value = p.get("pathType"), p.get("path", "")
    if not kind:
        check.add(f"{at}.pathType", "Required value: pathType must be specified")
    else:
        check.unsupported(f"{at}.pathType", kind, _PATH_TYPES)
    if kind in ("Exact", "Prefix"):
        if not value.startswith("/"):
            check.invalid(f"{at}.path", value, "must be an absolute path")
        for bad in _BAD_SEQUENCES:
            if bad in value:
                check.invalid(f"{at}.path", value, f"must not contain '{bad}'")
        for bad in _BAD_SUFFIXES:
            if value.endswith(bad):
                check.invalid(f"{at}.path", value, f"cannot end with '{bad}'")
    elif value and not value.startswith("/"):
        check.invalid(f"{at}.path", value, "must be an absolute path")
    _backend(p.get("backend") or {}, f"{at}.backend", check)


class IngressStrategy(JsonStrategy):
    resource = scheme.INGRESSES
    storage_path = "ingress"  # upstream's etcd key
    schema = {
        "spec": obj({
            "ingressClassName": string(),
            "defaultBackend": _BACKEND,
            "tls": array(obj({"hosts": array(string()), "secretName": string()})),
            "rules": array(obj({"host": string(), "http": obj({"paths": array(obj({
                "path": string(), "pathType": string(), "backend": _BACKEND}))})}))}, default={}),
        "status": obj({"loadBalancer": _LOAD_BALANCER})}

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        rules, default = spec.get("rules") or [], spec.get("defaultBackend")
        if not rules and default is None:
            check.invalid("spec.rules", [], "either `defaultBackend` or `rules` must be specified")
        if default is not None:
            _backend(default, "spec.defaultBackend", check)
        if spec.get("ingressClassName"):
            check.name("spec.ingressClassName", spec["ingressClassName"], names.dns1123_subdomain)
        for i, tls in enumerate(spec.get("tls") or []):
            for j, host in enumerate(tls.get("hosts") or []):
                _host(host, f"spec.tls[{i}].hosts[{j}]", check)
            if tls.get("secretName"):
                check.name(f"spec.tls[{i}].secretName", tls["secretName"], names.dns1123_subdomain)
        for i, rule in enumerate(rules):
            at = f"spec.rules[{i}]"
            if rule.get("host"):
                _host(rule["host"], f"{at}.host", check)
            http = rule.get("http")
            if http is None:
                continue
            paths = http.get("paths") or []
            if not paths:
                check.add(f"{at}.http.paths", "Required value")
            for j, p in enumerate(paths):
                _http_path(p, f"{at}.http.paths[{j}]", check)

    def validate(self, obj: CR, check: Checker) -> None:
        super().validate(obj, check)
        spec = content_of(obj).get("spec") or {}
        if spec.get("ingressClassName") and _CLASS_ANNOTATION in obj.metadata.annotations:
            check.invalid("annotations.kubernetes.io/ingress.class", obj.metadata.annotations[_CLASS_ANNOTATION],
                          "can not be set when the class field is also set")


class IngressClassStrategy(JsonStrategy):
    resource = scheme.INGRESSCLASSES
    storage_path = "ingressclasses"
    schema = {"spec": obj({"controller": string(), "parameters": obj({
        "apiGroup": string(), "kind": string(), "name": string(), "scope": string(), "namespace": string()})},
        default={})}

    def set_defaults(self, content: dict[str, Any]) -> None:
        parameters = (content.get("spec") or {}).get("parameters")
        if parameters is not None and "scope" not in parameters:
            parameters["scope"] = "Cluster"

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        controller = spec.get("controller", "")
        if not controller:
            check.add("spec.controller", "Required value")
        elif len(controller) > 250:
            check.add("spec.controller", "Too long: may not be more than 250 bytes")
        elif not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/\S+", controller):
            check.invalid("spec.controller", controller, "must be a domain-prefixed path (such as \"acme.io/foo\")")
        parameters = spec.get("parameters")
        if parameters is None:
            return
        at = "spec.parameters"
        for field in ("kind", "name"):
            if not parameters.get(field):
                check.add(f"{at}.{field}", "Required value")
        scope, namespace = parameters.get("scope"), parameters.get("namespace")
        check.unsupported(f"{at}.scope", scope, ("Cluster", "Namespace"))
        if scope == "Namespace" and not namespace:
            check.add(f"{at}.namespace", "Required value: `parameters.scope` is set to 'Namespace'")
        if scope == "Cluster" and namespace:
            check.add(f"{at}.namespace", "Forbidden: `parameters.scope` is set to 'Cluster'")

    def validate_content_update(self, content: dict[str, Any], before: dict[str, Any], check: Checker) -> None:
        new, old = (content.get("spec") or {}).get("controller"), (before.get("spec") or {}).get("controller")
        if new != old:
            check.invalid("spec.controller", new, "field is immutable")


_PEER = obj({"podSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR,
             "ipBlock": obj({"cidr": string(), "except": array(string())})})
_PORT = obj({"protocol": string(default="TCP"), "port": _INT_OR_STRING, "endPort": integer()})


def _peers(peers: list[dict[str, Any]], path: str, check: Checker) -> None:
    for i, peer in enumerate(peers):
        at = f"{path}[{i}]"
        selectors = [k for k in ("podSelector", "namespaceSelector") if peer.get(k) is not None]
        block = peer.get("ipBlock")
        if block is not None and selectors:
            check.add(at, "Forbidden: may not specify both ipBlock and another peer")
        if block is None and not selectors:
            check.add(at, "Required value: must specify a peer")
        for key in selectors:
            validate_selector(peer[key], f"{at}.{key}", check)
        if block is not None:
            _ip_block(block, f"{at}.ipBlock", check)


def _ip_block(block: dict[str, Any], at: str, check: Checker) -> None:
    cidr = block.get("cidr", "")
    if not cidr:
        check.add(f"{at}.cidr", "Required value")
        return
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        check.invalid(f"{at}.cidr", cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")
        return
    for k, excepted in enumerate(block.get("except") or []):
        try:
            inner = ipaddress.ip_network(excepted, strict=False)
        except ValueError:
            check.invalid(f"{at}.except[{k}]", excepted, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                                          "2001:db8::/64)")
            continue
        if inner.version != network.version or inner.prefixlen <= network.prefixlen or \
                inner.network_address not in network:
            check.invalid(f"{at}.except[{k}]", excepted, "must be a strict subset of `cidr`")


def _ports(ports: list[dict[str, Any]], path: str, check: Checker) -> None:
    for i, port in enumerate(ports):
        at = f"{path}[{i}]"
        check.unsupported(f"{at}.protocol", port.get("protocol", "TCP"), ("SCTP", "TCP", "UDP"))
        value, end = port.get("port"), port.get("endPort")
        if isinstance(value, int):
            check.port(f"{at}.port", value)
        elif isinstance(value, str):
            check.name(f"{at}.port", value, names.port_name)
        if end is not None:
            if not isinstance(value, int):
                check.add(f"{at}.endPort", "Required value: may not be specified when `port` is non-numeric"
                          if value is not None else "Required value: may not be specified when `port` is not "
                                                    "specified")
            elif end < value:
                check.invalid(f"{at}.endPort", end, "must be greater than or equal to `port`")
            else:
                check.port(f"{at}.endPort", end)


class NetworkPolicyStrategy(JsonStrategy):
    resource = scheme.NETWORKPOLICIES
    storage_path = "networkpolicies"
    schema = {"spec": obj({
        "podSelector": LABEL_SELECTOR,
        "policyTypes": array(string()),
        "ingress": array(obj({"from": array(_PEER), "ports": array(_PORT)})),
        "egress": array(obj({"to": array(_PEER), "ports": array(_PORT)}))}, default={})}

    def set_defaults(self, content: dict[str, Any]) -> None:
        """upstream's SetDefaults_NetworkPolicy: Ingress always, Egress when it has egress rules."""
        spec = content.setdefault("spec", {})
        spec.setdefault("podSelector", {})
        if not spec.get("policyTypes"):
            spec["policyTypes"] = ["Ingress", *(["Egress"] if spec.get("egress") else [])]

    def validate_content(self, content: dict[str, Any], check: Checker) -> None:
        spec = content.get("spec") or {}
        validate_selector(spec.get("podSelector") or {}, "spec.podSelector", check)
        for i, rule in enumerate(spec.get("ingress") or []):
            _ports(rule.get("ports") or [], f"spec.ingress[{i}].ports", check)
            _peers(rule.get("from") or [], f"spec.ingress[{i}].from", check)
        for i, rule in enumerate(spec.get("egress") or []):
            _ports(rule.get("ports") or [], f"spec.egress[{i}].ports", check)
            _peers(rule.get("to") or [], f"spec.egress[{i}].to", check)
        types = spec.get("policyTypes") or []
        if len(types) > 2:
            check.invalid("spec.policyTypes", types, "may not specify more than two policyTypes")
        for i, kind in enumerate(types):
            check.unsupported(f"spec.policyTypes[{i}]", kind, ("Egress", "Ingress"))


STRATEGIES = (IngressClassStrategy, IngressStrategy, NetworkPolicyStrategy)

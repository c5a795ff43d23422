"""The ingress controller's routing and HAProxy configuration: which Ingresses are ours (by
class, legacy annotation, or the default class), precedence (exact host, wildcard, any
host; longest path, Exact first), whole-element prefixes, backends from EndpointSlices
(ready pod addresses and target ports), the default backend, certificates from TLS
Secrets, problems reported; the configuration checked by the real HAProxy (`haproxy -c`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ingress.haproxy import HAProxy, render
from ingress.model import CONTROLLER, DEFAULT_CLASS_ANNOTATION, ours, routing
from kubeling import pki
from protos.kubeling.v1 import core_pb2, custom_pb2, discovery_pb2, meta_pb2


def _cr(kind: str, name: str, spec: dict[str, Any], namespace: str = "default", created: int = 0,
        annotations: dict[str, str] | None = None) -> custom_pb2.CustomResource:
    meta = meta_pb2.ObjectMeta(name=name, namespace=namespace, annotations=annotations or {})
    meta.creationTimestamp.seconds = created
    return custom_pb2.CustomResource(apiVersion="networking.k8s.io/v1", kind=kind, metadata=meta,
                                     content=json.dumps({"spec": spec}))


def _service(name: str, port: int = 80, port_name: str = "http") -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                            spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(name=port_name, port=port)]))


def _slice(service: str, target: int, *addresses: tuple[str, bool], port_name: str = "http"
           ) -> discovery_pb2.EndpointSlice:
    return discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name=f"{service}-x", namespace="default",
                                     labels={"kubernetes.io/service-name": service}),
        addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name=port_name, protocol="TCP", port=target)],
        endpoints=[discovery_pb2.Endpoint(addresses=[ip], conditions=discovery_pb2.EndpointConditions(ready=ok))
                   for ip, ok in addresses])


def _backend(service: str, port: int | str = 80) -> dict[str, Any]:
    return {"service": {"name": service, "port": {"number": port} if isinstance(port, int) else {"name": port}}}


def _rule(host: str, *paths: tuple[str, str, str]) -> dict[str, Any]:
    rule: dict[str, Any] = {"http": {"paths": [{"path": p, "pathType": t, "backend": _backend(s)}
                                                for p, t, s in paths]}}
    if host:
        rule["host"] = host
    return rule


CLASSES = [_cr("IngressClass", "kubeling", {"controller": CONTROLLER}, "",
               annotations={DEFAULT_CLASS_ANNOTATION: "true"}),
           _cr("IngressClass", "other", {"controller": "example.com/other"}, "")]


def test_which_ingresses_are_ours() -> None:
    assert ours(_cr("Ingress", "a", {"ingressClassName": "kubeling"}), CLASSES)
    assert not ours(_cr("Ingress", "b", {"ingressClassName": "other"}), CLASSES)
    assert ours(_cr("Ingress", "c", {}, annotations={"kubernetes.io/ingress.class": "kubeling"}), CLASSES)
    assert ours(_cr("Ingress", "d", {}), CLASSES)  # no class: ours while ours is the default
    assert not ours(_cr("Ingress", "d", {}), CLASSES[1:])


def test_precedence_backends_and_problems() -> None:
    ingresses = [
        _cr("Ingress", "site", {"rules": [_rule("a.example", ("/", "Prefix", "web")),
                                          _rule("b.example", ("/api", "Prefix", "api"), ("/api/v1", "Exact", "web"),
                                                ("/api", "Exact", "web")),
                                          _rule("*.example", ("/", "Prefix", "web"))],
                                "defaultBackend": _backend("web")}, created=10),
        _cr("Ingress", "late", {"rules": [_rule("a.example", ("/", "Prefix", "api")),
                                          _rule("", ("/gone", "Prefix", "missing"))]}, created=20)]
    services = [_service("web"), _service("api", 8080, "")]
    slices = [_slice("web", 8080, ("10.88.0.3", True), ("10.88.0.2", True), ("10.88.0.9", False)),
              _slice("api", 9090, ("10.88.1.2", True), port_name="")]
    out = routing(ingresses, services, slices, [])
    order = [(r.host, r.path, r.exact, r.backend) for r in out.routes]
    assert order == [("a.example", "/", False, "be_default_web_80"),
                     ("b.example", "/api/v1", True, "be_default_web_80"),
                     ("b.example", "/api", True, "be_default_web_80"),
                     ("b.example", "/api", False, "be_default_api_80"),
                     ("*.example", "/", False, "be_default_web_80"),
                     ("", "/gone", False, "be_default_missing_80")]
    web = out.backends["be_default_web_80"]
    assert [(s.address, s.port) for s in web.servers] == [("10.88.0.2", 8080), ("10.88.0.3", 8080)]
    assert [(s.address, s.port) for s in out.backends["be_default_api_80"].servers] == []  # the port is 8080
    assert out.default_backend == "be_default_web_80"
    assert out.problems["default/late"] == ["a.example/ is served by an older Ingress",
                                            "service default/missing not found"]


def test_certificates_from_tls_secrets() -> None:
    cert, key = pki.self_signed("a.example", ["a.example"])
    secret = core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="a-tls", namespace="default"),
                             type="kubernetes.io/tls", data={"tls.crt": cert, "tls.key": key})
    broken = core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="bad", namespace="default"),
                             type="kubernetes.io/tls", data={"tls.crt": b"nope", "tls.key": key})
    ing = _cr("Ingress", "tls", {"tls": [{"hosts": ["a.example"], "secretName": "a-tls"},
                                         {"hosts": ["b.example"], "secretName": "bad"},
                                         {"hosts": ["c.example"], "secretName": "none"}],
                                 "rules": [_rule("a.example", ("/", "Prefix", "web"))]})
    out = routing([ing], [_service("web")], [], [secret, broken])
    [certificate] = out.certificates
    assert certificate.name == "default_a-tls" and certificate.hosts == ("a.example",)
    assert certificate.pem.startswith(b"-----BEGIN CERTIFICATE-----") and b"PRIVATE KEY" in certificate.pem
    problems = out.problems["default/tls"]
    assert problems[0].startswith("secret default/bad holds no usable TLS certificate and key")
    assert problems[1] == "secret default/none not found: its hosts get the default certificate"


def test_the_configuration_is_one_haproxy_accepts(tmp_path: Path) -> None:
    ing = _cr("Ingress", "site", {"rules": [_rule("a.example", ("/", "Prefix", "web")),
                                            _rule("*.example.com", ("/api", "Prefix", "web")),
                                            _rule("", ("/x", "Exact", "web"))]})
    out = routing([ing], [_service("web")], [_slice("web", 8080, ("10.88.0.2", True))], [])
    config = render(out, "127.0.0.1:18080", "127.0.0.1:18443", tmp_path)
    assert "    use_backend be_default_web_80 if { var(txn.host) -m str a.example }  # default/site" in config
    assert "{ var(txn.host) -m reg ^[^.]+[.]example[.]com$ } { path -m beg /api/ }" in config
    assert "use_backend be_default_web_80 if !known_host { path -m str /x }" in config
    assert "    server s0 10.88.0.2:8080" in config
    haproxy = HAProxy(tmp_path)
    cert, key = pki.self_signed("default")
    haproxy.write_certificates({}, cert + key)
    (tmp_path / "haproxy.cfg").write_text(config)
    checked = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr

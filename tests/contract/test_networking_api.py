"""networking.k8s.io/v1 against the API: Ingresses, IngressClasses and NetworkPolicies over
REST on a real etcd, with upstream's validation and defaults, the DefaultIngressClass
admission plugin, and the real kubectl (`kubectl create ingress` sends protobuf). Names
follow upstream's conformance tests ([sig-network] Ingress API, IngressClass API)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from kubeling.kubeconfig import write_kubeconfig
from tests.contract.test_crds import Rest
from tests.e2e.kubectl import Kubectl

GV = "/apis/networking.k8s.io/v1"
INGRESSES = f"{GV}/namespaces/default/ingresses"
CLASSES = f"{GV}/ingressclasses"
POLICIES = f"{GV}/namespaces/default/networkpolicies"


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


def _ingress(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "labels": {"test": "ing"}},
            "spec": spec or {"defaultBackend": {"service": {"name": "default-backend", "port": {"number": 8080}}},
                             "rules": [{"host": "foo.bar.com", "http": {"paths": [{
                                 "path": "/foo", "pathType": "Prefix",
                                 "backend": {"service": {"name": "test-backend", "port": {"number": 8080}}}}]}}]}}


def _class(name: str, default: bool = False, **spec: Any) -> dict[str, Any]:
    annotations = {"ingressclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name, "labels": {"test": "ic"}, "annotations": annotations},
            "spec": spec or {"controller": "example.com/controller"}}


async def _lifecycle(http: Rest, path: str, make: Any, label: str) -> None:
    """create, get, list, watch, update, patch, delete and deletecollection, as the
    conformance tests walk them."""
    code, made, _ = await http.call("POST", path, make("one"))
    assert code == 201, made
    for name in ("two", "three"):
        assert (await http.call("POST", path, make(name)))[0] == 201
    async with http.session.get(http.base + path, params={"watch": "1", "labelSelector": label,
                                                          "resourceVersion": made["metadata"]["resourceVersion"]},
                                timeout=aiohttp.ClientTimeout(total=20)) as watch:
        code, got, _ = await http.call("GET", f"{path}/one")
        assert code == 200 and got["metadata"]["uid"] == made["metadata"]["uid"]
        code, listed, _ = await http.call("GET", path, query={"labelSelector": label})
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["one", "three", "two"]
        code, patched, _ = await http.call("PATCH", f"{path}/one", {"metadata": {"annotations": {"patched": "true"}}},
                                           content_type="application/merge-patch+json")
        assert code == 200 and patched["metadata"]["annotations"]["patched"] == "true"
        patched["metadata"]["annotations"]["updated"] = "true"
        code, updated, _ = await http.call("PUT", f"{path}/one", patched)
        assert code == 200 and updated["metadata"]["annotations"]["updated"] == "true"
        seen: list[str] = []
        while len(seen) < 4:  # two ADDED after the first, then the patch and the update
            seen.append(json.loads(await watch.content.readline())["type"])
        assert seen == ["ADDED", "ADDED", "MODIFIED", "MODIFIED"]
    assert (await http.call("DELETE", f"{path}/one"))[0] == 200
    assert (await http.call("GET", f"{path}/one"))[0] == 404
    assert (await http.call("DELETE", path, query={"labelSelector": label}))[0] == 200
    code, listed, _ = await http.call("GET", path, query={"labelSelector": label})
    assert listed["items"] == []


async def test_ingress_api(http: Rest) -> None:
    """[sig-network] Ingress API should support creating Ingress API operations."""
    code, groups, _ = await http.call("GET", "/apis")
    assert "networking.k8s.io" in [g["name"] for g in groups["groups"]]
    code, group, _ = await http.call("GET", "/apis/networking.k8s.io")
    assert "v1" in [v["version"] for v in group["versions"]]
    code, listing, _ = await http.call("GET", GV)
    served = {r["name"]: r for r in listing["resources"]}
    assert {"ingresses", "ingresses/status", "ingressclasses", "networkpolicies"} <= set(served)
    assert served["ingresses"]["shortNames"] == ["ing"]
    await _lifecycle(http, INGRESSES, _ingress, "test=ing")
    # the status subresource: update and patch, the spec left alone
    code, made, _ = await http.call("POST", INGRESSES, _ingress("lb"))
    status = {"loadBalancer": {"ingress": [{"ip": "169.1.1.1"}]}}
    code, patched, _ = await http.call("PATCH", f"{INGRESSES}/lb/status", {"status": status},
                                       content_type="application/merge-patch+json")
    assert code == 200 and patched["status"] == status
    patched["status"]["loadBalancer"]["ingress"] = [{"ip": "169.1.1.2"}]
    patched["spec"]["rules"] = []
    code, updated, _ = await http.call("PUT", f"{INGRESSES}/lb/status", patched)
    assert code == 200 and updated["status"]["loadBalancer"]["ingress"] == [{"ip": "169.1.1.2"}]
    assert updated["spec"]["rules"][0]["host"] == "foo.bar.com"
    code, got, _ = await http.call("GET", f"{INGRESSES}/lb/status")
    assert code == 200 and got["status"] == updated["status"]


async def test_ingressclass_api(http: Rest) -> None:
    """[sig-network] IngressClass API should support creating IngressClass API operations."""
    await _lifecycle(http, CLASSES, _class, "test=ic")
    code, made, _ = await http.call("POST", CLASSES, _class("params", controller="example.com/controller",
                                                            parameters={"kind": "Config", "name": "c"}))
    assert code == 201 and made["spec"]["parameters"]["scope"] == "Cluster", made  # upstream's default
    made["spec"]["controller"] = "example.com/other"
    code, body, _ = await http.call("PUT", f"{CLASSES}/params", made)
    assert code == 422 and 'spec.controller: Invalid value: "example.com/other": field is immutable' in body["message"]


async def test_the_default_class_is_given_to_ingresses_that_name_none(http: Rest) -> None:
    """DefaultIngressClass admission ([sig-network] IngressClass [Feature:Ingress] should set
    default value on new IngressClass; should choose the one with the later
    CreationTimestamp, if equal the one with the lower name)."""
    code, made, _ = await http.call("POST", INGRESSES, _ingress("before"))
    assert "ingressClassName" not in made["spec"]  # no default class yet
    for name in ("older", "newer"):
        assert (await http.call("POST", CLASSES, _class(name, default=True)))[0] == 201
    assert (await http.call("POST", CLASSES, _class("plain")))[0] == 201
    code, made, _ = await http.call("POST", INGRESSES, _ingress("defaulted"))
    assert made["spec"]["ingressClassName"] in ("newer", "older")  # same second: the later by name order
    code, made, _ = await http.call("POST", INGRESSES, {**_ingress("chosen"), "spec": {
        **_ingress("x")["spec"], "ingressClassName": "plain"}})
    assert made["spec"]["ingressClassName"] == "plain"
    legacy = _ingress("legacy")
    legacy["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "nginx"}
    code, made, _ = await http.call("POST", INGRESSES, legacy)
    assert code == 201 and "ingressClassName" not in made["spec"]  # the annotation names its class


@pytest.mark.parametrize("spec,messages", [
    ({}, ["spec.rules: Invalid value: []: either `defaultBackend` or `rules` must be specified"]),
    ({"defaultBackend": {}}, ["spec.defaultBackend: Required value: one of `backend.service` or "
                              "`backend.resource` must be specified"]),
    ({"defaultBackend": {"service": {"name": "s", "port": {"name": "http", "number": 80}}}},
     ["spec.defaultBackend.service.port: Invalid value", "cannot set both port name & port number"]),
    ({"defaultBackend": {"service": {"name": "Bad_Name", "port": {}}}},
     ["spec.defaultBackend.service.name: Invalid value: \"Bad_Name\"",
      "spec.defaultBackend.service.port: Required value: port name or number is required"]),
    ({"rules": [{"host": "1.2.3.4", "http": {"paths": [{"path": "foo", "backend": {
        "service": {"name": "s", "port": {"number": 70000}}}}]}}]},
     ['spec.rules[0].host: Invalid value: "1.2.3.4": must be a DNS name, not an IP address',
      "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
      "spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000"]),
    ({"rules": [{"host": "*.*.example.com", "http": {"paths": [{"path": "/a//b", "pathType": "Exact", "backend": {
        "service": {"name": "s", "port": {"number": 80}}}}]}}]},
     ["spec.rules[0].host: Invalid value: \"*.*.example.com\": a wildcard DNS-1123 subdomain",
      "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//'"]),
    ({"rules": [{"host": "ok.example.com", "http": {"paths": []}}]}, ["spec.rules[0].http.paths: Required value"]),
])
async def test_bad_ingresses_are_refused_naming_the_field(http: Rest, spec: dict[str, Any],
                                                          messages: list[str]) -> None:
    code, body, _ = await http.call("POST", INGRESSES, {**_ingress("bad"), "spec": spec})
    assert code == 422, body
    for message in messages:
        assert message in body["message"], (message, body["message"])


async def test_network_policies_defaults_and_validation(http: Rest) -> None:
    code, made, _ = await http.call("POST", POLICIES, {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny-all"},
        "spec": {}})
    assert code == 201 and made["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    code, made, _ = await http.call("POST", POLICIES, {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "web"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}},
                 "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}],
                              "ports": [{"port": 80}, {"port": "http", "protocol": "UDP"},
                                        {"port": 32000, "endPort": 32768}]}],
                 "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}})
    assert code == 201, made
    assert made["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert made["spec"]["ingress"][0]["ports"][0] == {"protocol": "TCP", "port": 80}
    code, body, _ = await http.call("POST", POLICIES, {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "bad"},
        "spec": {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]},
                 "policyTypes": ["Sideways"],
                 "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}],
                              "ports": [{"port": "http", "endPort": 90}, {"port": 90, "endPort": 80},
                                        {"protocol": "ICMP"}]}],
                 "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}}]}]}})
    assert code == 422
    message = body["message"]
    for expected in ('spec.podSelector.matchExpressions[0].operator: Unsupported value: "Near"',
                     'spec.policyTypes[0]: Unsupported value: "Sideways"',
                     "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer",
                     "spec.ingress[0].ports[0].endPort: Required value: may not be specified when `port` is "
                     "non-numeric",
                     "spec.ingress[0].ports[1].endPort: Invalid value: 80: must be greater than or equal to `port`",
                     'spec.ingress[0].ports[2].protocol: Unsupported value: "ICMP"',
                     'spec.egress[0].to[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict '
                     "subset of `cidr`"):
        assert expected in message, (expected, message)


async def test_kubectl_creates_and_shows_them(rest: APIServer, tmp_path: Path) -> None:
    kubectl = Kubectl(write_kubeconfig(tmp_path / "config", rest.rest_address))
    _, out, trace = await kubectl("-v=8", "create", "ingress", "simple", "--class=default",
                                  "--rule=foo.com/bar=svc1:8080,tls=my-cert", "--rule=*.example.com/*=svc2:http")
    assert "Content-Type: application/vnd.kubernetes.protobuf" in trace  # kubectl's typed client
    _, out, _ = await kubectl("get", "ingress", "simple", "-o", "json")
    spec = json.loads(out)["spec"]
    assert spec["ingressClassName"] == "default"
    assert spec["rules"][0] == {"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact",
                                                                        "backend": {"service": {
                                                                            "name": "svc1",
                                                                            "port": {"number": 8080}}}}]}}
    assert spec["rules"][1]["http"]["paths"][0]["pathType"] == "Prefix"
    assert spec["tls"] == [{"hosts": ["foo.com"], "secretName": "my-cert"}]
    _, out, _ = await kubectl("get", "ing")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert row.split()[:4] == ["simple", "default", "foo.com,*.example.com", "80,"]
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "web"},
              "spec": {"podSelector": {"matchLabels": {"app": "web"}}}}
    await kubectl("apply", "-f", "-", stdin=json.dumps(policy))
    _, out, _ = await kubectl("get", "netpol")
    assert out.splitlines()[0].split() == ["NAME", "POD-SELECTOR", "AGE"]
    assert out.splitlines()[1].split()[:2] == ["web", "app=web"]
    _, out, _ = await kubectl("describe", "networkpolicy", "web")
    assert "PodSelector:     app=web" in out
    # in a List, kubectl validates on its side with the v2 document: a JSON kind's fields are all allowed there
    listed = {"apiVersion": "v1", "kind": "List", "items": [{**policy, "metadata": {"name": "in-list"}}]}
    await kubectl("apply", "-f", "-", stdin=json.dumps(listed))

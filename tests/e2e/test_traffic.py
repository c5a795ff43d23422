"""Traffic on a `kubeling up` cluster (two nodes on this machine): Ingresses served by the
ingress controller's HAProxy, and NetworkPolicies enforced by the network policy
controller beside kube-proxy, with the real kubectl.

Ingress: `a.example/` and `b.example/api` routed to two Services from this machine (Host
header; a TLS host by SNI with its Secret's certificate), the default backend's 404 for
the rest, a backend scaled from 1 to 3 getting traffic from all three with no request
lost across the reloads, a missing Service and a missing Secret reported as events while
the other rules keep working, the Ingress's status naming the address, and a deleted Ingress no longer routing.

NetworkPolicy:

- upstream's "Declare Network Policy" walk-through: an nginx-like server behind a Service,
  the `access-nginx` policy; a client without `access=true` times out, one with it gets
  the page; the policy deleted restores traffic;
- default-deny egress blocks DNS until a policy allows port 53;
- a namespaceSelector lets a client of a labelled namespace in; an ipBlock with an except
  lets one client in and keeps another out;
- `kubeling down` leaves no chain or set of the controller's, nor kube-proxy's, and no HAProxy.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.plan import ClusterPlan
from kubeling import pki
from tests.e2e.kubectl import Kubectl
from tests.wait import until

CIDR = f"10.{160 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@dataclass
class Cluster:
    state: Path
    plan: ClusterPlan
    kubectl: Kubectl
    nodes: list[str]


def _leftovers() -> tuple[list[str], list[str]]:
    chains = [line for line in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.splitlines()
              if line.startswith((":KUBE-NP-", ":KUBE-SVC-", ":KUBE-SERVICES"))]
    sets = [name for name in subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True).stdout.split()
            if name.startswith(("KUBE-NP-", "KUBE-NT-"))]
    return chains, sets


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    state = tmp_path_factory.mktemp("netpol") / "cluster"
    prefix = f"p{os.getpid() % 1000}-"
    up = _kubeling("up", "--nodes", "2", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
                   "--cluster-cidr", CIDR)
    print(up.stdout)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "policies     network-policy (iptables, ipset)" in up.stdout, up.stdout
        plan = ClusterPlan.load(state)
        assert plan is not None
        yield Cluster(state, plan, Kubectl(state / "kubeconfig"), plan.nodes)
    finally:
        down = _kubeling("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert _leftovers() == ([], []), _leftovers()  # no chain or set of the controller's or kube-proxy's
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""  # HAProxy too


async def _apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    await kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def _pod(name: str, namespace: str = "default", labels: dict[str, str] | None = None,
         node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 1, "containers": [
        {"name": "main", "image": "busybox", "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                           "labels": labels or {}}, "spec": spec}


async def _fetch(kubectl: Kubectl, pod: str, url: str, namespace: str = "default") -> bool:
    """Whether `pod` gets `url` within 2 s (a dropped SYN waits it out; `timeout`, as this
    busybox's wget crashes on its own -T)."""
    code, out, _ = await kubectl("exec", "-n", namespace, pod, "--", "timeout", "2", "wget", "-q", "-O", "-", url,
                                 ok=False)
    return code == 0 and "nginx-like" in out


async def _eventually(kubectl: Kubectl, pod: str, url: str, want: bool, what: str, namespace: str = "default") -> float:
    """Wait until the fetch succeeds (or fails) as wanted; the seconds it took."""
    started = time.monotonic()
    await until(lambda: _fetch(kubectl, pod, url, namespace), what, 30, interval=0.2, check=lambda ok: ok == want)
    return time.monotonic() - started


async def _running(kubectl: Kubectl, *pods: str, namespace: str = "default") -> None:
    await kubectl("wait", "-n", namespace, "--for=condition=Ready", *(f"pod/{p}" for p in pods), "--timeout=90s")


async def test_declare_network_policy_walkthrough(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    server = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "labels": {"app": "nginx"}},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nginx"}}, "template": {
                  "metadata": {"labels": {"app": "nginx"}}, "spec": {
                      "nodeName": cluster.nodes[0], "terminationGracePeriodSeconds": 1, "containers": [{
                          "name": "nginx", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                          "ports": [{"name": "http", "containerPort": 80}],
                          "command": ["sh", "-c", "mkdir /www && echo nginx-like > /www/index.html && "
                                                  "exec httpd -f -p 80 -h /www"]}]}}}}
    await _apply(kubectl, server, _pod("busybox", node=cluster.nodes[0]),
                 _pod("far", node=cluster.nodes[1]),
                 _pod("access", labels={"access": "true"}, node=cluster.nodes[1]))
    await kubectl("expose", "deployment", "nginx", "--port=80")
    await kubectl("rollout", "status", "deployment/nginx", "--timeout=90s")
    await _running(kubectl, "busybox", "far", "access")
    url = "http://nginx.default.svc.cluster.local/"
    await _eventually(kubectl, "busybox", url, True, "nginx answering before any policy")

    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "access-nginx"},
              "spec": {"podSelector": {"matchLabels": {"app": "nginx"}},
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {"access": "true"}}}]}]}}
    await _apply(kubectl, policy)
    took = await _eventually(kubectl, "busybox", url, False, "the unlabelled client (same node) cut off")
    print(f"policy write to enforcement: within {took:.2f} s (fetch attempts included)")
    assert not await _fetch(kubectl, "far", url)  # across nodes too
    assert await _fetch(kubectl, "access", url)
    _, out, _ = await kubectl("get", "networkpolicy")
    assert out.split("\n")[1].split()[:2] == ["access-nginx", "app=nginx"], out

    await kubectl("delete", "networkpolicy", "access-nginx")
    await _eventually(kubectl, "busybox", url, True, "traffic restored with the policy gone")


async def test_default_deny_egress_blocks_dns_until_allowed(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    await kubectl("create", "namespace", "locked")
    await _apply(kubectl, _pod("client", "locked"))
    await _running(kubectl, "client", namespace="locked")

    async def resolves() -> bool:
        code, _, _ = await kubectl("exec", "-n", "locked", "client", "--", "nslookup", "-timeout=1",
                                   "kubernetes.default.svc.cluster.local", ok=False)
        return code == 0

    await until(resolves, "DNS before any policy", 30, interval=0.2)
    deny = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-egress", "namespace": "locked"},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}
    await _apply(kubectl, deny)
    await until(resolves, "DNS blocked by default-deny egress", 30, interval=0.2, check=lambda ok: not ok)
    dns = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"name": "allow-dns", "namespace": "locked"},
           "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                    "egress": [{"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]}}
    await _apply(kubectl, dns)
    await until(resolves, "DNS allowed by its policy", 30, interval=0.2)
    # ... and nothing else: the nginx page stays out of reach
    assert not await _fetch(kubectl, "client", "http://nginx.default.svc.cluster.local/", "locked")


async def test_namespace_selectors_and_ip_blocks(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    await kubectl("create", "namespace", "friends")
    await kubectl("label", "namespace", "friends", "team=friends")
    await _apply(kubectl, _pod("friend", "friends"), _pod("blocked", labels={"blocked": "yes"}))
    await _running(kubectl, "friend", namespace="friends")
    await _running(kubectl, "blocked")
    _, ip, _ = await kubectl("get", "pod", "blocked", "-o", "jsonpath={.status.podIP}")
    url = "http://nginx.default.svc.cluster.local/"
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "friends-and-net"},
              "spec": {"podSelector": {"matchLabels": {"app": "nginx"}}, "ingress": [
                  {"from": [{"namespaceSelector": {"matchLabels": {"team": "friends"}}}]},
                  {"from": [{"ipBlock": {"cidr": CIDR, "except": [f"{ip}/32"]}}], "ports": [{"port": "http"}]}]}}
    await _apply(kubectl, policy)
    await _eventually(kubectl, "blocked", url, False, "the excepted address kept out")
    assert await _fetch(kubectl, "friend", url, "friends")
    assert await _fetch(kubectl, "busybox", url)  # in the block, on the named port
    # a malformed CIDR is refused with upstream's message
    bad = json.loads(json.dumps(policy))
    bad["metadata"]["name"] = "bad-cidr"
    bad["spec"]["ingress"][1]["from"][0]["ipBlock"] = {"cidr": "10.0.0.0/33"}
    code, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(bad), ok=False)
    assert code != 0 and "spec.ingress[1].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\"" in err, err
    await kubectl("delete", "networkpolicy", "friends-and-net")


def _site(name: str, replicas: int = 1) -> dict[str, Any]:
    """A Deployment of web servers answering `<name> <pod name>` at /, /api/ and /api/v1/."""
    script = (f"for d in /www /www/api /www/api/v1; do mkdir -p $d && echo {name} $HOSTNAME > $d/index.html; done "
              "&& exec httpd -f -p 8080 -h /www")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"site": name}}, "template": {
                "metadata": {"labels": {"site": name}}, "spec": {
                    "terminationGracePeriodSeconds": 1, "containers": [{
                        "name": "web", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "command": ["sh", "-c", script]}]}}}}


def haproxy_reloads(plan: ClusterPlan) -> int:
    """The ingress controller's HAProxy reloads, as its log tells them."""
    log = plan.root / "logs" / "ingress-controller.log"
    return log.read_text().count("HAProxy reloaded") if log.exists() else -1


def _http(address: str, port: int, host: str, path: str = "/", *, tls_ca: bytes = b"") -> tuple[int, str]:
    """One request to the ingress, as from outside: the Host header (and with TLS, the SNI)
    naming `host`; the certificate checked against `tls_ca` for that name."""
    sock = socket.create_connection((address, port), timeout=5)
    try:
        if tls_ca:
            ctx = ssl.create_default_context(cadata=tls_ca.decode())
            sock = ctx.wrap_socket(sock, server_hostname=host)
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode().strip()


async def test_ingress_routes_by_host_and_path(cluster: Cluster) -> None:
    kubectl, plan = cluster.kubectl, cluster.plan
    at, port, tls_port = plan.ingress_address, plan.ingress_http_port, plan.ingress_https_port
    cert, key = pki.self_signed("secure.example", ["secure.example"])
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "secure-tls"}, "type": "kubernetes.io/tls",
              "data": {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}}
    await _apply(kubectl, _site("site-a"), _site("site-b"), secret)
    for name in ("site-a", "site-b"):
        await kubectl("expose", "deployment", name, "--port=80", "--target-port=http")
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "sites"},
               "spec": {"tls": [{"hosts": ["secure.example"], "secretName": "secure-tls"},
                                {"hosts": ["absent.example"], "secretName": "absent"}], "rules": [
                   {"host": "a.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                       "service": {"name": "site-a", "port": {"number": 80}}}}]}},
                   {"host": "b.example", "http": {"paths": [{"path": "/api", "pathType": "Prefix", "backend": {
                       "service": {"name": "site-b", "port": {"number": 80}}}}]}},
                   {"host": "secure.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                       "service": {"name": "site-b", "port": {"number": 80}}}}]}},
                   {"host": "broken.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                       "service": {"name": "missing", "port": {"number": 80}}}}]}}]}}
    await _apply(kubectl, ingress)
    for name in ("site-a", "site-b"):
        await kubectl("rollout", "status", f"deployment/{name}", "--timeout=90s")

    async def get(host: str, path: str = "/", tls: bool = False) -> tuple[int, str]:
        return await asyncio.to_thread(_http, at, tls_port if tls else port, host, path, tls_ca=cert if tls else b"")

    status, body = await until(lambda: get("a.example"), "a.example routed", 60, interval=0.2,
                               check=lambda r: r[0] == 200, retry_on=(OSError,))
    assert body.startswith("site-a site-a-"), body
    status, body = await until(lambda: get("b.example", "/api/v1/"), "b.example/api routed", 30, interval=0.2,
                               check=lambda r: r[0] == 200, retry_on=(OSError,))
    assert body.startswith("site-b "), body
    assert (await get("b.example", "/apis"))[0] == 404  # a prefix is whole path elements
    assert await get("b.example", "/") == (404, "default backend - 404")
    assert await get("nowhere.example") == (404, "default backend - 404")
    status, body = await get("secure.example", tls=True)  # SNI picks the Secret's certificate, verified
    assert status == 200 and body.startswith("site-b "), body
    assert (await get("broken.example"))[0] == 503  # no endpoints: the other rules unaffected

    async def events() -> str:  # recorded in the background after the sync that found the problems
        _, out, _ = await kubectl("get", "events", "--field-selector", "involvedObject.name=sites")
        return out
    await until(events, "the Ingress's warning events", 30, interval=0.3,
                check=lambda out: "service default/missing not found" in out and
                "secret default/absent not found: its hosts get the default certificate" in out)
    _, out, _ = await kubectl("get", "ingress", "sites")
    row = out.split("\n")[1]
    assert "kubeling   a.example,b.example,secure.example + 1 more...   " + at in row, out

    # scaled from 1 to 3: all three get traffic within seconds; no request fails across the reloads
    failures: list[str] = []
    stop = asyncio.Event()

    async def hammer() -> int:
        count = 0
        while not stop.is_set():
            try:
                status, body = await get("a.example")
                if status != 200:
                    failures.append(f"{status} {body}")
            except OSError as err:
                failures.append(repr(err))
            count += 1
        return count

    load = asyncio.create_task(hammer())
    await kubectl("scale", "deployment", "site-a", "--replicas=3")
    seen: set[str] = set()

    async def spread() -> int:
        for _ in range(12):
            status, body = await get("a.example")
            if status == 200:
                seen.add(body.split()[1])
        return len(seen)
    started = time.monotonic()
    await until(spread, "all three site-a pods answering", 60, interval=0.1, check=lambda n: n == 3)
    took = time.monotonic() - started
    stop.set()
    sent = await load
    print(f"ingress: three backends answering {took:.1f} s after the scale; {sent} requests meanwhile, "
          f"{haproxy_reloads(plan)} HAProxy reloads so far")
    assert not failures, f"{len(failures)} of {sent} requests failed across reloads: {failures[:3]}"

    await kubectl("delete", "ingress", "sites")
    await until(lambda: get("a.example"), "a.example no longer routed", 30, interval=0.2,
                check=lambda r: r[0] == 404)

"""The Ingress and NetworkPolicy parts of `python -m bench.services` (not a test).

- ingress: HTTP requests to a pod through the ingress controller's HAProxy (on the
  machine's side of the benchmark's veth, the Ingress routing a host to a Service whose
  slice names the pod) against the same requests to the pod directly, both from the pod
  namespace: sequential latency p50/p99 (ratio) and requests per second with 32 clients;
- network_policy: in namespaces of its own, a client (`C`) reaching a server pod (`P`)
  through a node (`R`, a router whose FORWARD chain the network policy controller
  programs): the time from a NetworkPolicy write (create, then delete) to the client's
  connections being refused (restored), probed every 10 ms; and the per-connection cost of
  100 policies selecting the server (each allowing other peers, the last one the client's),
  connect + request + answer against no policy, measured none / 100 / none.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ingress.addon import install_class
from ingress.controller import IngressConfig, IngressController
from kubeling.client import Client
from kubeling.netutil import free_port
from netpol.controller import PolicyConfig, PolicyController
from protos.kubeling.v1 import core_pb2, custom_pb2, discovery_pb2, meta_pb2

__all__ = ["ingress_measure", "network_policy_measure", "run_ip", "percentile", "in_netns"]

# answers every connection with one HTTP response (a pod's web server)
_HTTP = """
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(512)
reply = b"HTTP/1.0 200 OK\\r\\nContent-Length: 3\\r\\nContent-Type: text/plain\\r\\n\\r\\nok\\n"
while True:
    conn, _ = srv.accept()
    conn.recv(4096)
    conn.sendall(reply)
    conn.close()
"""
# sequential HTTP/1.0 requests to two targets, alternating; then `clients` concurrent clients for `seconds` to each
_HTTP_LOAD = """
import asyncio, json, socket, sys, time
targets = [(sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4]))]
n, seconds, clients = int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
request = b"GET / HTTP/1.0\\r\\nHost: bench.example\\r\\n\\r\\n"
lat = [[], []]
for i in range(2 * n):
    t = time.perf_counter()
    s = socket.create_connection(targets[i % 2], timeout=5)
    s.sendall(request)
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.0 200") or data.startswith(b"HTTP/1.1 200"), data[:80]
    lat[i % 2].append((time.perf_counter() - t) * 1e6)
async def load(target):
    done = 0
    end = time.perf_counter() + seconds
    async def one():
        nonlocal done
        while time.perf_counter() < end:
            r, w = await asyncio.open_connection(*target)
            w.write(request)
            await r.read()
            w.close()
            done += 1
    await asyncio.gather(*(one() for _ in range(clients)))
    return done / seconds
rates = [asyncio.run(load(t)) for t in targets]
print(json.dumps({"latency": lat, "rates": rates}))
"""
# connect + request + answer, sequentially, N times
_CONNECT = """
import json, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    while s.recv(4096):
        pass
    s.close()
    out.append((time.perf_counter() - t) * 1e6)
print(json.dumps(out))
"""
# prints the wall-clock time of the first probe whose outcome is `want` (connected or not)
_FLIP = """
import json, socket, sys, time
host, port, want, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "open", time.time() + float(sys.argv[4])
print("ready", flush=True)
while time.time() < limit:
    s = socket.socket()
    s.settimeout(0.05)
    try:
        s.connect((host, port))
        ok = True
    except OSError:
        ok = False
    finally:
        s.close()
    if ok == want:
        print(json.dumps(time.time()), flush=True)
        break
    time.sleep(0.01)
else:
    print("null", flush=True)
"""


def run_ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def in_netns(ns: str, script: str, *args: str, timeout: float = 300) -> Any:
    proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", ns, sys.executable, "-c", script, *args,
                                                stdout=asyncio.subprocess.PIPE)
    async with asyncio.timeout(timeout):
        out, _ = await proc.communicate()
    return json.loads(out)


def _resource(kind: str, name: str, spec: dict[str, Any], namespace: str = "default") -> custom_pb2.CustomResource:
    return custom_pb2.CustomResource(apiVersion="networking.k8s.io/v1", kind=kind,
                                     metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace),
                                     content=json.dumps({"spec": spec}))


async def ingress_measure(client: Client, ns: str, root_ip: str, ns_ip: str, backend: str, work: Path,
                          requests: int, seconds: float) -> dict[str, Any]:
    """`backend` is an address of the pod namespace; the controller's HAProxy listens on `root_ip`."""
    port = 7080
    server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", _HTTP, backend, str(port)])
    run_ip("route", "add", f"{backend}/32", "via", ns_ip)
    controller: IngressController | None = None
    try:
        await client.services.create(core_pb2.Service(
            metadata=meta_pb2.ObjectMeta(name="site", namespace="default"),
            spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(name="http", port=80)])))
        await client.endpointslices.create(discovery_pb2.EndpointSlice(
            metadata=meta_pb2.ObjectMeta(name="site", namespace="default",
                                         labels={"kubernetes.io/service-name": "site"}),
            addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="http", protocol="TCP", port=port)],
            endpoints=[discovery_pb2.Endpoint(addresses=[backend], conditions=discovery_pb2.EndpointConditions(
                ready=True))]))
        await install_class(client)
        await client.ingresses.create(_resource("Ingress", "site", {"ingressClassName": "kubeling", "rules": [
            {"host": "bench.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": "site", "port": {"number": 80}}}}]}}]}))
        http_port, https_port = free_port(root_ip), free_port(root_ip)
        controller = IngressController(Client(client.address), IngressConfig(
            http_listen=f"{root_ip}:{http_port}", https_listen=f"{root_ip}:{https_port}", state_dir=work / "ingress"))
        await controller.start()
        deadline = time.monotonic() + 30
        while not controller.routing.routes or not controller.routing.backends["be_default_site_80"].servers:
            if time.monotonic() > deadline:
                raise RuntimeError("the ingress controller never routed bench.example")
            await asyncio.sleep(0.05)
            await controller.sync()
        measured = await in_netns(ns, _HTTP_LOAD, root_ip, str(http_port), backend, str(port), str(requests),
                                str(seconds), "32")
    finally:
        if controller is not None:
            await controller.stop()
            await controller.client.close()
        server.kill()
        server.wait()
    via, direct = measured["latency"]
    return {"requests": requests, "through_ingress_us": {"p50": round(statistics.median(via), 1),
                                                         "p99": round(percentile(via, 0.99), 1)},
            "pod_direct_us": {"p50": round(statistics.median(direct), 1), "p99": round(percentile(direct, 0.99), 1)},
            "ratio_p50": round(statistics.median(via) / statistics.median(direct), 3),
            "ratio_p99": round(percentile(via, 0.99) / percentile(direct, 0.99), 3),
            "requests_per_second_32_clients": {"through_ingress": round(measured["rates"][0], 1),
                                               "pod_direct": round(measured["rates"][1], 1),
                                               "ratio": round(measured["rates"][0] / measured["rates"][1], 3)}}


async def _flip(ns: str, host: str, port: int, want: str, write: Any) -> float:
    """Seconds from `write` (a coroutine function) returning to the first probe from `ns`
    seeing the connection `want` ("open" or "closed")."""
    proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", ns, sys.executable, "-c", _FLIP, host,
                                                str(port), want, "20", stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    await proc.stdout.readline()  # ready
    await write()
    written = time.time()
    line = await proc.stdout.readline()
    await proc.wait()
    seen = json.loads(line)
    if seen is None:
        raise RuntimeError(f"the connection never turned {want}")
    return max(0.0, seen - written)


async def network_policy_measure(client: Client, requests: int, rounds: int = 5) -> dict[str, Any]:
    tag = os.getpid() % 10000
    router, pod, peer = f"kbbnr{tag}", f"kbbnp{tag}", f"kbbnc{tag}"
    server_ip, client_ip, port = "10.244.1.2", "10.244.2.2", 7080
    names = (router, pod, peer)
    procs: list[subprocess.Popen[bytes]] = []
    controller: PolicyController | None = None
    try:
        for name in names:
            run_ip("netns", "add", name)
            run_ip("-n", name, "link", "set", "lo", "up")
        run_ip("-n", router, "link", "add", "br0", "type", "bridge")
        run_ip("-n", router, "addr", "add", "10.244.1.1/24", "dev", "br0")
        run_ip("-n", router, "link", "set", "br0", "up")
        run_ip("-n", router, "link", "add", "p0", "type", "veth", "peer", "name", "eth0", "netns", pod)
        run_ip("-n", router, "link", "set", "p0", "master", "br0", "up")
        run_ip("-n", pod, "addr", "add", f"{server_ip}/24", "dev", "eth0")
        run_ip("-n", pod, "link", "set", "eth0", "up")
        run_ip("-n", pod, "route", "add", "default", "via", "10.244.1.1")
        run_ip("-n", router, "link", "add", "c0", "type", "veth", "peer", "name", "eth0", "netns", peer)
        run_ip("-n", router, "addr", "add", "10.244.2.1/24", "dev", "c0")
        run_ip("-n", router, "link", "set", "c0", "up")
        run_ip("-n", peer, "addr", "add", f"{client_ip}/24", "dev", "eth0")
        run_ip("-n", peer, "link", "set", "eth0", "up")
        run_ip("-n", peer, "route", "add", "default", "via", "10.244.2.1")
        subprocess.run(["ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        procs.append(subprocess.Popen(["ip", "netns", "exec", pod, sys.executable, "-c", _HTTP, server_ip,
                                       str(port)]))
        for name, ip, node, labels in (("server", server_ip, "node-1", {"app": "server"}),
                                       ("client", client_ip, "node-2", {"role": "client"})):
            made = await client.pods.create(core_pb2.Pod(
                metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels=labels),
                spec=core_pb2.PodSpec(nodeName=node, containers=[core_pb2.Container(name="c", image="busybox")])))
            made.status.phase, made.status.podIP = "Running", ip
            await client.pods.update_status(made)
        controller = PolicyController(Client(client.address), PolicyConfig(
            node_names=["node-1"], cluster_cidr="10.244.0.0/16", min_sync_period=0.05, netns=f"/run/netns/{router}"))
        await controller.start()
        await in_netns(peer, _CONNECT, server_ip, str(port), "20")  # warm: the server answers

        deny = _resource("NetworkPolicy", "deny", {"podSelector": {"matchLabels": {"app": "server"}},
                                                   "ingress": [{"from": [{"podSelector": {"matchLabels": {
                                                       "role": "nobody"}}}]}]})
        blocked, restored = [], []
        for _ in range(rounds):
            blocked.append(await _flip(peer, server_ip, port, "closed",
                                       lambda: client.networkpolicies.create(deny)))
            restored.append(await _flip(peer, server_ip, port, "open",
                                        lambda: client.networkpolicies.delete("deny", "default")))

        async def connects() -> list[float]:
            return list(await in_netns(peer, _CONNECT, server_ip, str(port), str(requests)))

        none_before = await connects()
        for i in range(100):  # 99 allowing nobody present, the last one the client
            role = "client" if i == 99 else f"other-{i}"
            await client.networkpolicies.create(_resource("NetworkPolicy", f"p{i:03}", {
                "podSelector": {"matchLabels": {"app": "server"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": role}}}], "ports": [{"port": port}]}]}))
        deadline = time.monotonic() + 60
        while len(controller.policies.store.list()) < 100:
            if time.monotonic() > deadline:
                raise RuntimeError("the controller never saw the 100 policies")
            await asyncio.sleep(0.05)
        await controller.sync()
        saved = subprocess.run(["ip", "netns", "exec", router, "iptables-save", "-t", "filter"], capture_output=True,
                               text=True).stdout
        rules = sum(1 for line in saved.splitlines() if line.startswith("-A KUBE-NP-IN-"))
        with_policies = await connects()
        for i in range(100):
            await client.networkpolicies.delete(f"p{i:03}", "default")
        await asyncio.sleep(0.5)
        await controller.sync()
        none_after = await connects()
    finally:
        if controller is not None:
            await controller.stop()
            await controller.client.close()
        for proc in procs:
            proc.kill()
            proc.wait()
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    none = none_before + none_after
    return {"write_to_enforced_s": {"rounds": rounds, "blocked_p50": round(statistics.median(blocked), 3),
                                    "blocked_max": round(max(blocked), 3),
                                    "restored_p50": round(statistics.median(restored), 3),
                                    "restored_max": round(max(restored), 3)},
            "connection_us": {"requests": requests, "server_chain_rules": rules,
                              "no_policy_p50": round(statistics.median(none), 1),
                              "no_policy_p99": round(percentile(none, 0.99), 1),
                              "policies_100_p50": round(statistics.median(with_policies), 1),
                              "policies_100_p99": round(percentile(with_policies, 0.99), 1),
                              "ratio_p50": round(statistics.median(with_policies) / statistics.median(none), 3),
                              "drift_p50": round(statistics.median(none_after) / statistics.median(none_before), 3)}}

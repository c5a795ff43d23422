"""Services' data path and control (not a test): `python -m bench.services [--services 1000
--endpoints 10] [--json OUT.json]`.

etcd and an apiserver in this process; kube-proxy programs a network namespace of the
benchmark's own, where "pods" are addresses on a bridge and the client runs; the cluster
DNS listens on a veth into that namespace. Three measures, each against an anchor taken
in the same run:

- sync: kube-proxy's full sync for `services` Services x `endpoints` endpoints (render and
  one iptables-restore), and a sync after one endpoint changed (only the changed chains
  written); anchor: iptables-restore alone loading the same input (the floor any proxy
  writing those rules pays);
- latency: a connection and a request through a ClusterIP (one endpoint) vs to the pod IP
  directly, sequential and alternating, medians and p99 (ratio: what DNAT and the rules
  walk cost);
- dns: queries per second and p99 from the pod's namespace to the ClusterIP 10.96.0.10
  (DNAT to the server), 32 in flight; anchor: a UDP responder in the same event loop that
  answers every datagram with one prepared reply (the floor of Python UDP serving here);
- ingress and network_policy (`bench.traffic`): HTTP through the ingress controller's
  HAProxy against the pod directly; a NetworkPolicy's write to enforcement, and the
  per-connection cost of 100 policies against none.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dns.message

from apiserver.server import APIServer, Config
from bench.output import report
from bench.traffic import in_netns, ingress_measure, network_policy_measure, percentile, run_ip
from cluster.etcd import EtcdServer
from clusterdns.addon import publish
from clusterdns.server import DNSConfig, DNSServer
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2
from proxy.proxier import Iptables, Proxier, ProxyConfig

CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
BACKEND = "10.244.1.2"
DNS_IP = "10.96.0.10"
CONCURRENCY = 64

# in the pod namespace: sequential connect + request + answer, N times to each of two
# targets, alternating (so that the host's drift falls on both alike)
_LATENCY = """
import socket, sys, time, json
targets = [(sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4]))]
n = int(sys.argv[5])
out = [[], []]
for i in range(2 * n):
    t = time.perf_counter()
    s = socket.create_connection(targets[i % 2], timeout=5)
    s.sendall(b"ping\\n")
    s.recv(16)
    s.close()
    out[i % 2].append((time.perf_counter() - t) * 1e6)
print(json.dumps(out))
"""
_ECHO = """
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(128)
while True:
    conn, _ = srv.accept()
    conn.recv(16)
    conn.sendall(b"pong\\n")
    conn.close()
"""
# in the pod namespace: `inflight` UDP queries always outstanding for `seconds`
_DNS_LOAD = """
import asyncio, json, sys, time
import dns.message
host, port, seconds, inflight = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
wire = dns.message.make_query("web.default.svc.cluster.local", "A").to_wire()
lat = []
async def worker(end):
    loop = asyncio.get_running_loop()
    while time.perf_counter() < end:
        fut = loop.create_future()
        class P(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                if not fut.done(): fut.set_result(data)
        t, _ = await loop.create_datagram_endpoint(P, remote_addr=(host, port))
        start = time.perf_counter()
        t.sendto(wire)
        try:
            async with asyncio.timeout(2):
                await fut
            lat.append((time.perf_counter() - start) * 1e6)
        except asyncio.TimeoutError:
            pass
        t.close()
async def main():
    end = time.perf_counter() + seconds
    await asyncio.gather(*(worker(end) for _ in range(inflight)))
    print(json.dumps(lat))
asyncio.run(main())
"""


async def _populate(client: Client, services: int, endpoints: int) -> core_pb2.Service:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with sem:
            name = f"svc-{i}"
            await client.services.create(core_pb2.Service(
                metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(name="http", port=80)])))
            await client.endpointslices.create(discovery_pb2.EndpointSlice(
                metadata=meta_pb2.ObjectMeta(name=name, namespace="default",
                                             labels={"kubernetes.io/service-name": name}),
                addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="http", protocol="TCP", port=8080)],
                endpoints=[discovery_pb2.Endpoint(addresses=[f"10.244.{100 + (i * endpoints + j) // 250}."
                                                             f"{(i * endpoints + j) % 250 + 1}"],
                                                  conditions=discovery_pb2.EndpointConditions(ready=True))
                           for j in range(endpoints)]))

    await asyncio.gather(*(one(i) for i in range(services)))
    web = await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="web", namespace="default"),
        spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(name="http", port=80)])))
    await client.endpointslices.create(discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name="web", namespace="default", labels={"kubernetes.io/service-name": "web"}),
        addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="http", protocol="TCP", port=7000)],
        endpoints=[discovery_pb2.Endpoint(addresses=[BACKEND], conditions=discovery_pb2.EndpointConditions(
            ready=True))]))
    return web


async def _restore_floor(iptables: Iptables, text: str) -> float:
    """iptables-restore alone loading `text` (best of three): what writing it costs anyone."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        await asyncio.to_thread(iptables.restore, text)
        best = min(best, time.perf_counter() - t)
    return best


async def _sync(proxier: Proxier, iptables: Iptables, client: Client) -> dict[str, Any]:
    started = time.perf_counter()
    await proxier.sync(full=True)
    full = time.perf_counter() - started
    full_text = proxier.last_rules
    full_floor = await _restore_floor(iptables, full_text)
    es = await client.endpointslices.get("svc-0", "default")
    es.endpoints[0].conditions.ready = False
    await client.endpointslices.update(es)
    while not any(not e.conditions.ready for s in proxier.slices.store.list() if s.metadata.name == "svc-0"
                  for e in s.endpoints):
        await asyncio.sleep(0.01)
    t = time.perf_counter()
    await proxier.sync()
    changed = time.perf_counter() - t
    delta_text = proxier.last_rules
    delta_floor = await _restore_floor(iptables, delta_text)
    await asyncio.to_thread(iptables.restore, full_text)  # back to the full rules for the measures below
    return {"full": {"lines_written": full_text.count("\n"), "sync_ms": round(full * 1e3, 1),
                     "restore_only_ms": round(full_floor * 1e3, 1), "ratio": round(full / full_floor, 2)},
            "one_endpoint_changed": {"lines_written": delta_text.count("\n"), "sync_ms": round(changed * 1e3, 1),
                                     "restore_only_ms": round(delta_floor * 1e3, 1),
                                     "ratio": round(changed / delta_floor, 2)}}


async def _latency(ns: str, cluster_ip: str, requests: int) -> dict[str, Any]:
    via, direct = await in_netns(ns, _LATENCY, cluster_ip, "80", BACKEND, "7000", str(requests))
    via_p50, direct_p50 = statistics.median(via), statistics.median(direct)
    return {"requests": requests,
            "cluster_ip_us": {"p50": round(via_p50, 1), "p99": round(percentile(via, 0.99), 1)},
            "pod_ip_us": {"p50": round(direct_p50, 1), "p99": round(percentile(direct, 0.99), 1)},
            "ratio_p50": round(via_p50 / direct_p50, 3),
            "ratio_p99": round(percentile(via, 0.99) / percentile(direct, 0.99), 3)}


class _Floor(asyncio.DatagramProtocol):
    """Answers every datagram with one prepared reply: Python UDP serving's floor."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.transport is not None:
            self.transport.sendto(data[:2] + self.reply[2:], addr)


async def _dns(ns: str, server: DNSServer, seconds: float, root_ip: str) -> dict[str, Any]:
    served_before = server.queries
    lat = await in_netns(ns, _DNS_LOAD, DNS_IP, "53", str(seconds), "32")
    served = server.queries - served_before
    sample = await server.answer(dns.message.make_query("web.default.svc.cluster.local", "A").to_wire(), udp=True)
    assert sample is not None
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: _Floor(sample), local_addr=(root_ip, 0))
    port = transport.get_extra_info("sockname")[1]
    try:
        floor = await in_netns(ns, _DNS_LOAD, root_ip, str(port), str(seconds), "32")
    finally:
        transport.close()
    qps, floor_qps = len(lat) / seconds, len(floor) / seconds
    return {"seconds": seconds, "in_flight": 32, "answered": len(lat), "served": served, "qps": round(qps, 1),
            "p50_us": round(statistics.median(lat), 1) if lat else None, "p99_us": round(percentile(lat, 0.99), 1),
            "floor_qps": round(floor_qps, 1), "floor_p99_us": round(percentile(floor, 0.99), 1),
            "ratio_qps_to_floor": round(qps / floor_qps, 3) if floor_qps else None}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-services-"))
    ns, veth = f"kbbsvc{os.getpid() % 10000}", f"kbbv{os.getpid() % 10000}"
    root_ip, ns_ip = "172.31.251.1", "172.31.251.2"
    etcd = EtcdServer(data_dir=work / "etcd").start()
    server = APIServer(Config(etcd=etcd.endpoint, listen="127.0.0.1:0", compaction_interval=0,
                              cluster_cidr=CLUSTER_CIDR, service_cluster_ip_range=SERVICE_CIDR))
    procs: list[subprocess.Popen[bytes]] = []
    dns_server: DNSServer | None = None
    proxier: Proxier | None = None
    result: dict[str, Any] = {"services": args.services, "endpoints_per_service": args.endpoints}
    try:
        await server.start()
        run_ip("netns", "add", ns)
        run_ip("-n", ns, "link", "set", "lo", "up")
        run_ip("-n", ns, "link", "add", "pods0", "type", "bridge")
        run_ip("-n", ns, "addr", "add", f"{BACKEND}/32", "dev", "pods0")
        run_ip("-n", ns, "link", "set", "pods0", "up")
        run_ip("link", "add", veth, "type", "veth", "peer", "name", "up0", "netns", ns)
        run_ip("addr", "add", f"{root_ip}/30", "dev", veth)
        run_ip("link", "set", veth, "up")
        run_ip("-n", ns, "addr", "add", f"{ns_ip}/30", "dev", "up0")
        run_ip("-n", ns, "link", "set", "up0", "up")
        run_ip("-n", ns, "route", "add", SERVICE_CIDR, "dev", "pods0")
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", _ECHO, BACKEND, "7000"]))
        client = Client(server.address)
        started = time.perf_counter()
        web = await _populate(client, args.services, args.endpoints)
        result["create_seconds"] = round(time.perf_counter() - started, 1)
        dns_server = DNSServer(Client(server.address), DNSConfig(listen=f"{root_ip}:0"))
        await dns_server.start()
        await publish(client, DNS_IP, root_ip, dns_server.port)
        proxier = Proxier(Client(server.address), ProxyConfig(
            node_names=["node-1"], cluster_cidr=CLUSTER_CIDR, service_cidr=SERVICE_CIDR,
            nodeport_addresses=[BACKEND], min_sync_period=3600, sync_period=3600, netns=f"/run/netns/{ns}"))
        await proxier.start()  # the first sync is part of start; measured again below
        deadline = time.monotonic() + 120
        while len(proxier.services.store.list()) < args.services + 2:  # and web, kube-dns
            if time.monotonic() > deadline:
                raise RuntimeError(f"kube-proxy saw {len(proxier.services.store.list())} Services")
            await asyncio.sleep(0.05)
        result["sync"] = await _sync(proxier, Iptables(f"/run/netns/{ns}"), client)
        result["latency"] = await _latency(ns, web.spec.clusterIP, args.requests)
        result["dns"] = await _dns(ns, dns_server, args.dns_seconds, root_ip)
        result["ingress"] = await ingress_measure(client, ns, root_ip, ns_ip, BACKEND, work, args.requests,
                                                  args.http_seconds)
        result["network_policy"] = await network_policy_measure(client, args.requests)
        await client.close()
    finally:
        if proxier is not None:
            await proxier.stop()
            await proxier.client.close()
        if dns_server is not None:
            await dns_server.stop()
            await dns_server.client.close()
        for proc in procs:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        await server.stop(grace=0)
        etcd.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.services", description=__doc__.split("\n\n")[0])
    p.add_argument("--services", type=int, default=1000)
    p.add_argument("--endpoints", type=int, default=10)
    p.add_argument("--requests", type=int, default=2000, help="sequential connections per latency measure")
    p.add_argument("--dns-seconds", type=float, default=5.0)
    p.add_argument("--http-seconds", type=float, default=5.0, help="seconds of 32-client HTTP load per target")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    report(asyncio.run(main_async(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""kube-proxy against a real apiserver, programming a network namespace of the test's own
(real iptables, real connections): a ClusterIP spread over its ready endpoints, one turned
not ready taken out, a Service without endpoints refused, an address of the service
range that is no Service unreachable, a node port, every rule gone with the Service and
at a clean stop, and a proxy killed and started again keeping an established connection."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2
from proxy.proxier import Iptables, Proxier, ProxyConfig

BACKENDS = ("10.244.1.2", "10.244.1.3")
NODE_IP = "10.244.1.9"

# a client run inside the namespace: each stdin line is one attempt, answered on stdout
_PROBE = """
import socket, sys
for line in sys.stdin:
    host, port = line.split()
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        print("ok", data.split(b"\\r\\n\\r\\n", 1)[-1].decode().strip(), flush=True)
    except OSError as err:
        print("err", __import__("errno").errorcode.get(err.errno, str(err)), flush=True)
    finally:
        s.close()
"""
# an echo client holding one connection: each stdin line is sent, the echo printed
_HOLD = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
for line in sys.stdin:
    s.sendall(line.encode())
    print(s.recv(100).decode().strip(), flush=True)
"""
_ECHO = """
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen()
def serve(conn):
    while data := conn.recv(100):
        conn.sendall(data)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def netns(tmp_path: Path) -> Iterator[str]:
    name = f"kbproxy-{os.getpid()}"
    _ip("netns", "add", name)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "link", "add", "pods0", "type", "bridge")
        for address in (*BACKENDS, NODE_IP):
            _ip("-n", name, "addr", "add", f"{address}/32", "dev", "pods0")
        _ip("-n", name, "link", "set", "pods0", "up")
        _ip("-n", name, "route", "add", "10.96.0.0/16", "dev", "pods0")
        for address in BACKENDS:
            root = tmp_path / address
            root.mkdir()
            (root / "index.html").write_text(address)
            procs.append(subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-m", "http.server", "8080",
                                           "--bind", address, "--directory", str(root)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c", _ECHO, BACKENDS[0],
                                       "7000"]))
        yield name
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)


class Probe:
    """Connections from inside the namespace, one per ask."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def __call__(self, host: str, port: int) -> tuple[str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{host} {port}\n".encode())
        await self.proc.stdin.drain()
        kind, _, detail = (await asyncio.wait_for(self.proc.stdout.readline(), 10)).decode().strip().partition(" ")
        return kind, detail


@pytest.fixture
async def probe(netns: str) -> AsyncIterator[Probe]:
    proc = await asyncio.create_subprocess_exec("ip", "netns", "exec", netns, sys.executable, "-c", _PROBE,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        yield Probe(proc)
    finally:
        proc.kill()
        await proc.wait()


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def _proxier(client: Client, netns: str) -> Proxier:
    return Proxier(Client(client.address), ProxyConfig(
        node_names=["node-1"], cluster_cidr="10.244.0.0/16", service_cidr="10.96.0.0/16",
        nodeport_addresses=[NODE_IP], min_sync_period=0.1, netns=f"/run/netns/{netns}"))


def _slice(name: str, port: int, *ready: tuple[str, bool]) -> discovery_pb2.EndpointSlice:
    return discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels={"kubernetes.io/service-name": name}),
        addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="", protocol="TCP", port=port)],
        endpoints=[discovery_pb2.Endpoint(addresses=[ip], nodeName="node-1",
                                          conditions=discovery_pb2.EndpointConditions(ready=ok))
                   for ip, ok in ready])


async def _service(client: Client, name: str, **spec: object) -> core_pb2.Service:
    return await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
        spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(port=80)], **spec)))  # type: ignore[arg-type]


async def test_cluster_ips_node_ports_and_rejects(client: Client, netns: str, probe: Probe) -> None:
    iptables = Iptables(f"/run/netns/{netns}")
    proxier = _proxier(client, netns)
    await proxier.start()
    try:
        web = await _service(client, "web", type="NodePort")
        await client.endpointslices.create(_slice("web", 8080, (BACKENDS[0], True), (BACKENDS[1], True)))
        ip = web.spec.clusterIP

        async def both() -> bool:
            seen = {(await probe(ip, 80))[1] for _ in range(30)}
            return seen == set(BACKENDS)

        await _until(both, "requests to the ClusterIP spread over both endpoints")
        assert await probe(NODE_IP, web.spec.ports[0].nodePort) in {("ok", b) for b in BACKENDS}

        es = await client.endpointslices.get("web", "default")
        es.endpoints[1].conditions.ready = False
        await client.endpointslices.update(es)

        async def one() -> bool:
            return {(await probe(ip, 80))[1] for _ in range(20)} == {BACKENDS[0]}

        await _until(one, "the not-ready endpoint to get no traffic")

        empty = await _service(client, "empty")
        await _until(lambda: _is(probe(empty.spec.clusterIP, 80), ("err", "ECONNREFUSED")),
                     "a Service without endpoints to refuse connections")
        assert await probe("10.96.255.254", 80) == ("err", "ENETUNREACH")  # no Service there: never leaves

        await client.services.delete("web", "default")
        await client.endpointslices.delete("web", "default")
        await _until(lambda: _is(probe(ip, 80), ("err", "ENETUNREACH")), "the deleted Service's rules to go")
        assert not await asyncio.to_thread(iptables.own_chains)
    finally:
        await proxier.stop()
    saved = subprocess.run(["ip", "netns", "exec", netns, "iptables-save"], capture_output=True, text=True).stdout
    assert "KUBE-" not in saved, saved


async def _is(answer: Awaitable[tuple[str, str]], expected: tuple[str, str]) -> bool:
    return await answer == expected


async def test_a_restarted_proxy_keeps_established_connections(client: Client, netns: str) -> None:
    echo = await _service(client, "echo")
    await client.endpointslices.create(_slice("echo", 7000, (BACKENDS[0], True)))
    proxier = _proxier(client, netns)
    await proxier.start()
    hold = await asyncio.create_subprocess_exec("ip", "netns", "exec", netns, sys.executable, "-c", _HOLD,
                                                echo.spec.clusterIP, "80", stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert hold.stdin is not None and hold.stdout is not None

    async def echoes(word: str) -> str:
        assert hold.stdin is not None and hold.stdout is not None
        hold.stdin.write(f"{word}\n".encode())
        await hold.stdin.drain()
        return (await asyncio.wait_for(hold.stdout.readline(), 10)).decode().strip()

    try:
        assert await echoes("before") == "before"
        chains = await asyncio.to_thread(proxier.iptables.own_chains)
        await proxier.stop(clean=False)  # as if killed: its rules stay
        assert await echoes("while-down") == "while-down"
        proxier = _proxier(client, netns)
        await proxier.start()
        assert await asyncio.to_thread(proxier.iptables.own_chains) == chains  # taken over, not rebuilt
        assert await echoes("after") == "after"
    finally:
        hold.kill()
        await hold.wait()
        await proxier.stop()

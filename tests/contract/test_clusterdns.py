"""The cluster DNS server against a real apiserver, asked with dnspython over UDP and TCP:
the DNS specification's records (A for ClusterIPs, headless Services' ready endpoints and
their hostnames, SRV for named ports, CNAME for ExternalName, PTR, pod records, the schema
version), NXDOMAIN for names that do not exist and NODATA (with the SOA) for names that
do, changes followed, other names refused without an upstream and forwarded with one,
and garbage answered with FORMERR."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import dns.asyncquery
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from clusterdns.addon import publish
from clusterdns.server import DNSConfig, DNSServer
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2
from tests.wait import until


@pytest.fixture
async def server(client: Client) -> AsyncIterator[DNSServer]:
    made = DNSServer(Client(client.address), DNSConfig(rebuild_period=0.01))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()
        await made.client.close()


async def _ask(server: DNSServer, name: str, rdtype: str = "A", tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    if tcp:
        return await dns.asyncquery.tcp(query, "127.0.0.1", port=server.port, timeout=5)
    return await dns.asyncquery.udp(query, "127.0.0.1", port=server.port, timeout=5)


def _texts(reply: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)



async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 10.0) -> None:
    await until(check, what, timeout)


async def _objects(client: Client) -> core_pb2.Service:
    web = await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="web", namespace="default"),
        spec=core_pb2.ServiceSpec(ports=[core_pb2.ServicePort(name="http", port=80)])))
    await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="db", namespace="default"),
        spec=core_pb2.ServiceSpec(clusterIP="None", ports=[core_pb2.ServicePort(name="pg", port=5432)])))
    await client.endpointslices.create(discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name="db-x", namespace="default", labels={"kubernetes.io/service-name": "db"}),
        addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="pg", protocol="TCP", port=5433)],
        endpoints=[discovery_pb2.Endpoint(addresses=["10.244.1.5"], hostname="db-0",
                                          conditions=discovery_pb2.EndpointConditions(ready=True)),
                   discovery_pb2.Endpoint(addresses=["10.244.2.7"],
                                          conditions=discovery_pb2.EndpointConditions(ready=True)),
                   discovery_pb2.Endpoint(addresses=["10.244.3.9"],
                                          conditions=discovery_pb2.EndpointConditions(ready=False))]))
    await client.services.create(core_pb2.Service(
        metadata=meta_pb2.ObjectMeta(name="search", namespace="default"),
        spec=core_pb2.ServiceSpec(type="ExternalName", externalName="search.example.com")))
    return web


async def test_records_of_the_dns_spec(client: Client, server: DNSServer) -> None:
    web = await _objects(client)

    async def seen() -> bool:
        return bool((await _ask(server, "search.default.svc.cluster.local")).answer)

    await _until(seen, "the Services in the DNS view")
    reply = await _ask(server, "web.default.svc.cluster.local")
    assert reply.rcode() == dns.rcode.NOERROR and _texts(reply) == [web.spec.clusterIP]
    assert reply.answer[0].ttl == 5 and reply.flags & dns.flags.AA
    assert _texts(await _ask(server, "WEB.Default.svc.cluster.local.", tcp=True)) == [web.spec.clusterIP]
    nodata = await _ask(server, "web.default.svc.cluster.local", "AAAA")
    assert nodata.rcode() == dns.rcode.NOERROR and not nodata.answer and nodata.authority[0].rdtype == \
        dns.rdatatype.SOA
    for missing in ("nope.default.svc.cluster.local", "web.other.svc.cluster.local", "x.web.default.svc.cluster.local",
                    "cluster.local.example"):
        reply = await _ask(server, missing)
        assert reply.rcode() in (dns.rcode.NXDOMAIN, dns.rcode.REFUSED), missing
    assert (await _ask(server, "nope.default.svc.cluster.local")).rcode() == dns.rcode.NXDOMAIN
    assert (await _ask(server, "default.svc.cluster.local")).rcode() == dns.rcode.NOERROR  # exists, no records

    # headless: the ready endpoints, their names, SRV to each
    assert _texts(await _ask(server, "db.default.svc.cluster.local")) == ["10.244.1.5", "10.244.2.7"]
    assert _texts(await _ask(server, "db-0.db.default.svc.cluster.local")) == ["10.244.1.5"]
    assert _texts(await _ask(server, "10-244-2-7.db.default.svc.cluster.local")) == ["10.244.2.7"]
    assert _texts(await _ask(server, "_pg._tcp.db.default.svc.cluster.local", "SRV")) == [
        "0 100 5433 10-244-2-7.db.default.svc.cluster.local.", "0 100 5433 db-0.db.default.svc.cluster.local."]
    assert _texts(await _ask(server, "_http._tcp.web.default.svc.cluster.local", "SRV")) == [
        "0 100 80 web.default.svc.cluster.local."]
    assert (await _ask(server, "_nope._tcp.web.default.svc.cluster.local", "SRV")).rcode() == dns.rcode.NXDOMAIN
    assert _texts(await _ask(server, "search.default.svc.cluster.local")) == ["search.example.com."]
    ptr = ".".join(reversed(web.spec.clusterIP.split("."))) + ".in-addr.arpa"
    assert _texts(await _ask(server, ptr, "PTR")) == ["web.default.svc.cluster.local."]
    assert _texts(await _ask(server, "5.1.244.10.in-addr.arpa", "PTR")) == ["db-0.db.default.svc.cluster.local."]
    assert _texts(await _ask(server, "10-244-9-9.default.pod.cluster.local")) == ["10.244.9.9"]
    assert _texts(await _ask(server, "dns-version.cluster.local", "TXT")) == ['"1.1.0"']
    assert (await _ask(server, "cluster.local", "SOA")).answer[0].rdtype == dns.rdatatype.SOA

    # changes followed
    await client.services.delete("web", "default")

    async def gone() -> bool:
        return (await _ask(server, "web.default.svc.cluster.local")).rcode() == dns.rcode.NXDOMAIN

    await _until(gone, "a deleted Service's name to go")


async def test_other_names_refused_or_forwarded_and_garbage(client: Client, server: DNSServer) -> None:
    await _objects(client)
    assert (await _ask(server, "example.com")).rcode() == dns.rcode.REFUSED
    upstream = DNSServer(Client(client.address), DNSConfig(zone="example.test"))
    await upstream.start()
    forwarding = DNSServer(Client(client.address), DNSConfig(upstream=f"127.0.0.1:{upstream.port}"))
    await forwarding.start()
    try:
        async def answered() -> bool:
            reply = await _ask(forwarding, "search.default.svc.example.test")
            return _texts(reply) == ["search.example.com."]

        await _until(answered, "a name outside the zone answered by the upstream")
        assert (await _ask(forwarding, "search.default.svc.example.test", tcp=True)).answer
    finally:
        await forwarding.stop()
        await forwarding.client.close()
        await upstream.stop()
        await upstream.client.close()

    def garbage() -> bytes:  # in a thread: the server answers on this event loop
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            sock.sendto(b"\x12\x34\x01\x00" + b"\xff" * 20, ("127.0.0.1", server.port))
            return sock.recvfrom(512)[0]

    data = await asyncio.to_thread(garbage)
    assert data[:2] == b"\x12\x34" and data[3] & 0x0F == dns.rcode.FORMERR


async def test_publish_the_kube_dns_service(client: Client) -> None:
    await publish(client, "10.96.0.10", "172.31.9.1", 5353)
    await publish(client, "10.96.0.10", "172.31.9.1", 5354)  # again: corrected, not duplicated
    svc = await client.services.get("kube-dns", "kube-system")
    assert svc.spec.clusterIP == "10.96.0.10" and [p.targetPort.intVal for p in svc.spec.ports] == [5354, 5354]
    es = await client.endpointslices.get("kube-dns", "kube-system")
    assert [p.port for p in es.ports] == [5354, 5354] and list(es.endpoints[0].addresses) == ["172.31.9.1"]
    assert svc.metadata.labels["kubernetes.io/cluster-service"] == "true"

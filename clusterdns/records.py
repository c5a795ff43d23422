"""The answers Kubernetes' DNS specification (cluster/addons/dns, dns-spec.md schema
1.1.0) asks for, as CoreDNS's kubernetes plugin gives them:

- `<svc>.<ns>.svc.<zone>`: A with the ClusterIP; for a headless Service, one A per ready
  endpoint; for an ExternalName Service, a CNAME.
- `<hostname>.<svc>.<ns>.svc.<zone>`: a headless Service's endpoint (its hostname, or its
  address dashed: 10-244-1-2).
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV for named ports (to the Service's name,
  or to each endpoint's name for a headless Service).
- `<a-b-c-d>.<ns>.pod.<zone>`: A for a pod address (CoreDNS's `pods insecure`).
- PTR for ClusterIPs and headless endpoints; `dns-version.<zone>` TXT.

A name that exists without records of the asked type is NODATA (NOERROR, empty answer,
the zone's SOA as authority); a name that does not exist is NXDOMAIN.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from kubeling.discovery import SERVICE_NAME_LABEL
from protos.kubeling.v1 import core_pb2, discovery_pb2

__all__ = ["ClusterView", "Answer", "resolve", "response", "SCHEMA_VERSION", "TTL"]

SCHEMA_VERSION = "1.1.0"
TTL = 5  # CoreDNS's kubernetes plugin default


@dataclass(frozen=True)
class EndpointRecord:
    ip: str
    hostname: str  # its own (pod hostname + subdomain), else the dashed address
    ports: tuple[tuple[str, str, int], ...]  # (name, protocol, port)


@dataclass
class ClusterView:
    """The Services and their ready endpoints, indexed for lookups; rebuilt by the
    server when its informers change."""

    zone: str
    serial: int = 1  # the SOA's: changes whenever the view is rebuilt
    services: dict[tuple[str, str], core_pb2.Service] = field(default_factory=dict)
    endpoints: dict[tuple[str, str], list[EndpointRecord]] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    reverse: dict[str, str] = field(default_factory=dict)  # IP -> the name a PTR gives

    @classmethod
    def build(cls, zone: str, services: Iterable[core_pb2.Service],
              slices: Iterable[discovery_pb2.EndpointSlice], serial: int = 1) -> ClusterView:
        view = cls(zone.strip(".").lower(), serial)
        for svc in services:
            key = (svc.metadata.namespace, svc.metadata.name)
            view.services[key] = svc
            view.namespaces.add(svc.metadata.namespace)
            ip = svc.spec.clusterIP
            if ip and ip != "None":
                view.reverse[ip] = f"{svc.metadata.name}.{svc.metadata.namespace}.svc.{view.zone}."
        for es in slices:
            owner = es.metadata.labels.get(SERVICE_NAME_LABEL)
            if owner is None or es.addressType not in ("IPv4", "IPv6"):
                continue
            key = (es.metadata.namespace, owner)
            ports = tuple((p.name, p.protocol or "TCP", p.port) for p in es.ports if p.HasField("port"))
            for endpoint in es.endpoints:
                ready = endpoint.conditions.ready if endpoint.conditions.HasField("ready") else True
                owner_svc = view.services.get(key)
                if not ready and not (owner_svc is not None and owner_svc.spec.publishNotReadyAddresses):
                    continue
                for address in endpoint.addresses:
                    host = endpoint.hostname or address.replace(".", "-").replace(":", "-")
                    view.endpoints.setdefault(key, []).append(EndpointRecord(address, host, ports))
                    if owner_svc is not None and owner_svc.spec.clusterIP == "None" and endpoint.hostname:
                        view.reverse[address] = f"{host}.{owner}.{key[0]}.svc.{view.zone}."
        for records in view.endpoints.values():
            records.sort(key=lambda r: ipaddress.ip_address(r.ip))
        return view


RdataType = dns.rdatatype.RdataType
Record = tuple[str, RdataType, str]  # (owner name, type, rdata text)


@dataclass
class Answer:
    rcode: dns.rcode.Rcode = dns.rcode.NOERROR
    records: list[Record] = field(default_factory=list)


def _a_type(ip: str) -> RdataType:
    return dns.rdatatype.A if ipaddress.ip_address(ip).version == 4 else dns.rdatatype.AAAA


def _ip_answers(owner: str, qtype: RdataType, ips: Iterable[str]) -> Answer:
    found = [ip for ip in ips if qtype in (_a_type(ip), dns.rdatatype.ANY)]
    return Answer(records=[(owner, _a_type(ip), ip) for ip in found])  # none: NODATA (the name exists)


class _Lookup:
    def __init__(self, view: ClusterView, qname: str, qtype: RdataType) -> None:
        self.view, self.qname, self.qtype = view, qname, qtype

    def service(self, labels: list[str]) -> Answer | None:
        """labels under svc.<zone>: [svc, ns] or [host, svc, ns] or [_port, _proto, svc, ns]."""
        view, qtype, owner = self.view, self.qtype, self.qname
        if len(labels) == 1:
            return Answer() if labels[0] in view.namespaces else None
        if len(labels) == 2:
            name, namespace = labels
            svc = view.services.get((namespace, name))
            if svc is None:
                return None
            if svc.spec.type == "ExternalName":
                target = svc.spec.externalName.rstrip(".") + "."
                return Answer(records=[(owner, dns.rdatatype.CNAME, target)]) \
                    if qtype in (dns.rdatatype.CNAME, dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.ANY) \
                    else Answer()
            if svc.spec.clusterIP == "None":
                return _ip_answers(owner, qtype, [r.ip for r in view.endpoints.get((namespace, name), [])])
            return _ip_answers(owner, qtype, [svc.spec.clusterIP])
        if len(labels) == 3:
            host, name, namespace = labels
            svc = view.services.get((namespace, name))
            if svc is None or svc.spec.clusterIP != "None":
                return None
            ips = [r.ip for r in view.endpoints.get((namespace, name), []) if r.hostname == host]
            return _ip_answers(owner, qtype, ips) if ips else None
        if len(labels) == 4 and labels[0].startswith("_") and labels[1].startswith("_"):
            return self.srv(labels[0][1:], labels[1][1:], labels[2], labels[3])
        return None

    def srv(self, port_name: str, protocol: str, name: str, namespace: str) -> Answer | None:
        view = self.view
        svc = view.services.get((namespace, name))
        if svc is None or svc.spec.type == "ExternalName":
            return None
        base = f"{name}.{namespace}.svc.{view.zone}."
        records: list[Record] = []
        if svc.spec.clusterIP == "None":
            for record in view.endpoints.get((namespace, name), []):
                for pname, proto, number in record.ports:
                    if pname == port_name and proto.lower() == protocol:
                        records.append((self.qname, dns.rdatatype.SRV, f"0 100 {number} {record.hostname}.{base}"))
        else:
            for port in svc.spec.ports:
                if port.name == port_name and (port.protocol or "TCP").lower() == protocol:
                    records.append((self.qname, dns.rdatatype.SRV, f"0 100 {port.port} {base}"))
        if not records:
            return None
        return Answer(records=records) if self.qtype in (dns.rdatatype.SRV, dns.rdatatype.ANY) else Answer()

    def pod(self, labels: list[str]) -> Answer | None:
        if len(labels) == 1:
            return Answer() if labels[0] in self.view.namespaces else None
        if len(labels) != 2:
            return None
        dashed, _ = labels
        try:
            ip = str(ipaddress.ip_address(dashed.replace("-", ".") if dashed.count("-") == 3
                                          else dashed.replace("-", ":")))
        except ValueError:
            return None
        return _ip_answers(self.qname, self.qtype, [ip])


def _reverse_ip(labels: list[str], suffix: str) -> str | None:
    try:
        if suffix == "in-addr.arpa":
            return str(ipaddress.IPv4Address(".".join(reversed(labels))))
        return str(ipaddress.IPv6Address(":".join("".join(reversed(labels))[i:i + 4] for i in range(0, 32, 4))))
    except ValueError:
        return None


def resolve(view: ClusterView, qname: str, qtype: RdataType) -> Answer | None:
    """The cluster's answer for qname, or None: not a name of the cluster (forward it)."""
    name = qname.lower().rstrip(".")
    zone = view.zone
    for suffix in ("in-addr.arpa", "ip6.arpa"):
        if name.endswith("." + suffix):
            ip = _reverse_ip(name[: -len(suffix) - 1].split("."), suffix)
            target = view.reverse.get(ip) if ip is not None else None
            if target is None:
                return None  # not ours: another zone's PTR (forwarded if forwarding is on)
            return Answer(records=[(qname, dns.rdatatype.PTR, target)]) \
                if qtype in (dns.rdatatype.PTR, dns.rdatatype.ANY) else Answer()
    if name != zone and not name.endswith("." + zone):
        return None
    owner = qname if qname.endswith(".") else qname + "."
    lookup = _Lookup(view, owner, qtype)
    labels = name[: -len(zone)].rstrip(".").split(".") if name != zone else []
    if not labels:  # the zone apex
        if qtype == dns.rdatatype.SOA:
            return Answer(records=[(owner, dns.rdatatype.SOA, soa(zone, view.serial))])
        if qtype == dns.rdatatype.NS:
            return Answer(records=[(owner, dns.rdatatype.NS, f"ns.dns.{zone}.")])
        return Answer()
    if labels == ["dns-version"]:
        return Answer(records=[(owner, dns.rdatatype.TXT, f'"{SCHEMA_VERSION}"')]) \
            if qtype in (dns.rdatatype.TXT, dns.rdatatype.ANY) else Answer()
    kind = labels[-1]
    found: Answer | None = None
    if kind == "svc":
        found = Answer() if len(labels) == 1 else lookup.service(labels[:-1])
    elif kind == "pod":
        found = Answer() if len(labels) == 1 else lookup.pod(labels[:-1])
    return found if found is not None else Answer(rcode=dns.rcode.NXDOMAIN)


def soa(zone: str, serial: int) -> str:
    return f"ns.dns.{zone}. hostmaster.{zone}. {serial} 7200 1800 86400 {TTL}"


def response(query: dns.message.Message, view: ClusterView) -> dns.message.Message | None:
    """The reply to a query the cluster answers; None when it is not the cluster's."""
    reply = dns.message.make_response(query)
    if len(query.question) != 1:
        reply.set_rcode(dns.rcode.FORMERR)
        return reply
    question = query.question[0]
    answer = resolve(view, question.name.to_text(), question.rdtype)
    if answer is None:
        return None
    reply.flags |= dns.flags.AA
    reply.set_rcode(answer.rcode)
    for owner, rdtype, text in answer.records:
        rrset = reply.find_rrset(reply.answer, dns.name.from_text(owner), dns.rdataclass.IN, rdtype, create=True)
        rrset.add(dns.rdata.from_text(dns.rdataclass.IN, rdtype, text), TTL)
    if not answer.records:
        reply.authority.append(dns.rrset.from_text(f"{view.zone}.", TTL, "IN", "SOA", soa(view.zone, view.serial)))
    return reply

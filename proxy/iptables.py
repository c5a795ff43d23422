"""kube-proxy's iptables rules, as upstream's pkg/proxy/iptables proxier writes them: one
iptables-restore input (filter and nat) with every KUBE-* chain kube-proxy owns.

nat: PREROUTING and OUTPUT jump to KUBE-SERVICES; a ClusterIP:port jumps to its
KUBE-SVC-<hash> chain, which picks a KUBE-SEP-<hash> (one per endpoint) with `statistic
--mode random` probabilities 1/n, 1/(n-1), ..., and the SEP DNATs. NodePorts on the
node's addresses go through KUBE-NODEPORTS to KUBE-EXT-<hash>, as do external IPs and a load
balancer's IPs (through KUBE-FW-<hash> when it has source ranges). Traffic is marked for
masquerading only when it needs it: from outside the cluster CIDR to a ClusterIP, to a
node port, a pod reaching itself (hairpin), or to an endpoint outside the cluster CIDR
(the apiserver and DNS of kubeling, which do not route back to pods). KUBE-POSTROUTING
masquerades marked packets.

filter: a Service port without usable endpoints is rejected (`REJECT`, upstream's
"has no endpoints"), and, kubeling's own guard, anything still addressed to the service
range after DNAT: no packet to an unallocated ClusterIP ever leaves the machine.

Rules are rendered per chain; a sync writes only the chains that changed since the last
(upstream's MinimizeIPTablesRestore: with `--noflush` the others stay as they are), and
a full sync now and then writes them all.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
import socket
from dataclasses import dataclass

from proxy.serviceinfo import Endpoint, ServicePort

__all__ = ["ProxyRules", "RuleSet", "render", "svc_chain", "sep_chain", "ext_chain", "svl_chain", "fw_chain", "JUMPS",
           "MASQ_MARK", "OWN_PREFIXES"]

MASQ_BIT = 14  # upstream's --iptables-masquerade-bit default
MASQ_MARK = f"{1 << MASQ_BIT:#x}"
# Chains only kube-proxy writes: anything else with these names is its own stale state.
OWN_PREFIXES = ("KUBE-SVC-", "KUBE-SEP-", "KUBE-EXT-", "KUBE-SVL-", "KUBE-FW-")
# (table, built-in chain, jump rule arguments): how traffic enters kube-proxy's chains.
JUMPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("filter", "INPUT", ("-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                         "kubernetes externally-visible service portals", "-j", "KUBE-EXTERNAL-SERVICES")),
    ("filter", "FORWARD", ("-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD")),
    ("filter", "FORWARD", ("-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                           "kubernetes service portals", "-j", "KUBE-SERVICES")),
    ("filter", "FORWARD", ("-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                           "kubernetes externally-visible service portals", "-j", "KUBE-EXTERNAL-SERVICES")),
    ("filter", "OUTPUT", ("-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                          "kubernetes service portals", "-j", "KUBE-SERVICES")),
    ("nat", "PREROUTING", ("-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")),
    ("nat", "OUTPUT", ("-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")),
    ("nat", "POSTROUTING", ("-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")),
)
FILTER_CHAINS = ("KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD")
NAT_CHAINS = ("KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ")


@functools.lru_cache(maxsize=1 << 16)  # the same names every sync: hashed once
def _hash(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:16]


def svc_chain(sp: ServicePort) -> str:
    return "KUBE-SVC-" + _hash(sp.id + sp.protocol.lower())


def svl_chain(sp: ServicePort) -> str:
    return "KUBE-SVL-" + _hash(sp.id + sp.protocol.lower())


def ext_chain(sp: ServicePort) -> str:
    return "KUBE-EXT-" + _hash(sp.id + sp.protocol.lower())


def fw_chain(sp: ServicePort) -> str:
    return "KUBE-FW-" + _hash(sp.id + sp.protocol.lower())


def sep_chain(sp: ServicePort, endpoint: Endpoint) -> str:
    return "KUBE-SEP-" + _hash(sp.id + sp.protocol.lower() + endpoint.address)


@dataclass(frozen=True)
class ProxyRules:
    cluster_cidr: str  # "" : unknown, every pod-sourced packet is then masqueraded (upstream's masqueradeAll)
    service_cidr: str
    node_addresses: tuple[str, ...]  # where node ports answer
    local_nodes: frozenset[str]  # the nodes whose pods are local to this proxy
    masquerade_all: bool = False


def _comment(text: str) -> str:
    return f'-m comment --comment "{text}"'


def _proto(sp: ServicePort) -> str:
    p = sp.protocol.lower()
    return f"-p {p} -m {p}"


class _Writer:
    """One table's chains, each with its rules in order."""

    def __init__(self) -> None:
        self.chains: dict[str, list[str]] = {}

    def chain(self, name: str) -> None:
        self.chains.setdefault(name, [])

    def add(self, chain: str, *parts: str) -> None:
        self.chains.setdefault(chain, []).append(f"-A {chain} " + " ".join(p for p in parts if p))


@dataclass(frozen=True)
class RuleSet:
    """What kube-proxy wants in the filter and nat tables, chain by chain."""

    filter: dict[str, list[str]]
    nat: dict[str, list[str]]

    @property
    def own_chains(self) -> set[str]:
        """The per-service chains (the ones that come and go with Services)."""
        return {c for c in self.nat if c.startswith(OWN_PREFIXES)}

    @property
    def lines(self) -> int:
        return sum(len(r) for table in (self.filter, self.nat) for r in table.values())

    def restore_input(self, previous: RuleSet | None, stale: frozenset[str] | set[str] = frozenset()) -> str:
        """iptables-restore --noflush input: every chain (no previous), else only those that
        differ from `previous`; per-service chains no longer wanted (of `previous`, or
        `stale`: found in the table) flushed and deleted."""
        out: list[str] = []
        for table, chains, before in (("filter", self.filter, previous.filter if previous else None),
                                      ("nat", self.nat, previous.nat if previous else None)):
            write = [c for c, rules in chains.items() if before is None or before.get(c) != rules]
            gone: list[str] = []
            if table == "nat":
                known = set(stale) | (previous.own_chains if previous else set())
                gone = sorted(known - set(chains))
            if not write and not gone:
                continue
            out.append(f"*{table}")
            out += [f":{c} - [0:0]" for c in [*write, *gone]]  # declaring flushes: deleted chains must be empty
            for c in write:
                out += chains[c]
            out += [f"-X {c}" for c in gone]
            out.append("COMMIT")
        return "\n".join(out) + "\n" if out else ""


@functools.lru_cache(maxsize=16)
def _network(cidr: str) -> tuple[int, int]:
    net = ipaddress.IPv4Network(cidr)
    return int(net.network_address), int(net.netmask)


def _in_cidr(ip: str, cidr: str) -> bool:
    base, mask = _network(cidr)
    return int.from_bytes(socket.inet_aton(ip), "big") & mask == base


def _endpoint_chains(nat: _Writer, sp: ServicePort, endpoints: list[Endpoint], chain: str,
                     cfg: ProxyRules, written: set[str]) -> None:
    """chain -> one SEP per endpoint (random with equal odds), and each SEP's DNAT."""
    seps = [sep_chain(sp, e) for e in endpoints]
    if sp.affinity_seconds:
        for sep, e in zip(seps, endpoints, strict=True):
            nat.add(chain, _comment(f"{sp.id} -> {e.address}"), f"-m recent --name {sep} --rcheck "
                    f"--seconds {sp.affinity_seconds} --reap", f"-j {sep}")
    for i, (sep, e) in enumerate(zip(seps, endpoints, strict=True)):
        left = len(seps) - i
        odds = f"-m statistic --mode random --probability {1 / left:.10f}" if left > 1 else ""
        nat.add(chain, _comment(f"{sp.id} -> {e.address}"), odds, f"-j {sep}")
    for sep, e in zip(seps, endpoints, strict=True):
        if sep in written:
            continue
        written.add(sep)
        nat.chain(sep)
        nat.add(sep, _comment(sp.id), f"-s {e.ip}/32", "-j KUBE-MARK-MASQ")  # hairpin
        if cfg.cluster_cidr and not _in_cidr(e.ip, cfg.cluster_cidr):
            # an endpoint off the pod network (the apiserver, the DNS server) cannot route back to pods
            nat.add(sep, _comment(f"{sp.id} off the pod network"), "-j KUBE-MARK-MASQ")
        recent = f"-m recent --name {sep} --set" if sp.affinity_seconds else ""
        nat.add(sep, _comment(sp.id), _proto(sp), recent, f"-j DNAT --to-destination {e.address}")


def _external_chains(nat: _Writer, sp: ServicePort, cluster: list[Endpoint], external: list[Endpoint],
                     cfg: ProxyRules, written: set[str]) -> None:
    """Traffic from outside (node port, external and load balancer IPs) enters KUBE-EXT-<hash>
    (through KUBE-FW-<hash> when the load balancer admits only some sources). Cluster
    policy: masqueraded, then any endpoint. Local: the client's address kept, this node's
    endpoints only; pods and the node itself still reach every endpoint (upstream's
    short-circuit), the node's own traffic masqueraded."""
    ext = ext_chain(sp)
    nat.chain(ext)
    match = f"{_proto(sp)} --dport {sp.port}"
    for address in sp.external_ips:
        nat.add("KUBE-SERVICES", _comment(f"{sp.id} external IP"), f"-d {address}/32", match, f"-j {ext}")
    entry = ext
    if sp.source_ranges and sp.load_balancer_ips:
        entry = fw_chain(sp)
        nat.chain(entry)
        for source in (*sp.source_ranges, *(f"{a}/32" for a in sp.load_balancer_ips)):
            nat.add(entry, _comment(f"{sp.id} loadbalancer IP"), f"-s {source}", f"-j {ext}")
        # no translation for anyone else: the filter table drops what keeps this destination
        nat.add(entry, _comment(f"{sp.id} other sources"), "-j ACCEPT")
    for address in sp.load_balancer_ips:
        nat.add("KUBE-SERVICES", _comment(f"{sp.id} loadbalancer IP"), f"-d {address}/32", match, f"-j {entry}")
    if sp.node_port:
        nat.add("KUBE-NODEPORTS", _comment(sp.id), _proto(sp), f"--dport {sp.node_port}", f"-j {ext}")
    if not sp.external_local:
        nat.add(ext, _comment(f"masquerade traffic for {sp.id} external destinations"), "-j KUBE-MARK-MASQ")
        nat.add(ext, f"-j {svc_chain(sp)}")
        return
    if cfg.cluster_cidr and not cfg.masquerade_all:
        nat.add(ext, _comment(f"pod traffic for {sp.id} external destinations"), f"-s {cfg.cluster_cidr}",
                f"-j {svc_chain(sp)}")
    nat.add(ext, _comment(f"masquerade LOCAL traffic for {sp.id} external destinations"),
            "-m addrtype --src-type LOCAL", "-j KUBE-MARK-MASQ")
    nat.add(ext, _comment(f"route LOCAL traffic for {sp.id} external destinations"),
            "-m addrtype --src-type LOCAL", f"-j {svc_chain(sp)}")
    if external:
        local = svl_chain(sp)
        nat.chain(local)
        nat.add(ext, f"-j {local}")
        _endpoint_chains(nat, sp, external, local, cfg, written)


def render(ports: list[ServicePort], cfg: ProxyRules) -> RuleSet:
    """The rules `ports` call for."""
    flt, nat = _Writer(), _Writer()
    for name in FILTER_CHAINS:
        flt.chain(name)
    for name in NAT_CHAINS:
        nat.chain(name)
    flt.add("KUBE-FORWARD", "-m conntrack --ctstate INVALID", "-j DROP")
    flt.add("KUBE-FORWARD", _comment("kubernetes forwarding rules"), f"-m mark --mark {MASQ_MARK}/{MASQ_MARK}",
            "-j ACCEPT")
    flt.add("KUBE-FORWARD", _comment("kubernetes forwarding conntrack rule"),
            "-m conntrack --ctstate RELATED,ESTABLISHED", "-j ACCEPT")
    nat.add("KUBE-POSTROUTING", f"-m mark ! --mark {MASQ_MARK}/{MASQ_MARK}", "-j RETURN")
    nat.add("KUBE-POSTROUTING", f"-j MARK --xor-mark {MASQ_MARK}")
    nat.add("KUBE-POSTROUTING", _comment("kubernetes service traffic requiring SNAT"), "-j MASQUERADE --random-fully")
    nat.add("KUBE-MARK-MASQ", f"-j MARK --or-mark {MASQ_MARK}")

    written_seps: set[str] = set()
    for sp in ports:
        dest = f"-d {sp.cluster_ip}/32 {_proto(sp)} --dport {sp.port}"
        cluster = sp.usable(cfg.local_nodes if sp.internal_local else None)
        if not cluster:
            flt.add("KUBE-SERVICES", _comment(f"{sp.id} has no endpoints"), dest,
                    "-j REJECT --reject-with icmp-port-unreachable")
        else:
            chain = svc_chain(sp)
            nat.chain(chain)
            nat.add("KUBE-SERVICES", _comment(f"{sp.id} cluster IP"), dest, f"-j {chain}")
            if cfg.masquerade_all or not cfg.cluster_cidr:
                nat.add(chain, _comment(f"{sp.id} cluster IP"), dest, "-j KUBE-MARK-MASQ")
            else:
                nat.add(chain, _comment(f"{sp.id} cluster IP"), f"! -s {cfg.cluster_cidr}", dest,
                        "-j KUBE-MARK-MASQ")
            _endpoint_chains(nat, sp, cluster, chain, cfg, written_seps)
        if not sp.external:
            continue
        external = sp.usable(cfg.local_nodes if sp.external_local else None)
        if cluster:
            _external_chains(nat, sp, cluster, external, cfg, written_seps)
        # What nat did not translate still has its external destination in the filter table:
        # no endpoints at all is refused, none for outside traffic (or a source outside the
        # load balancer's ranges) dropped, as upstream's firewall chains do.
        target = "-j DROP" if cluster else "-j REJECT --reject-with icmp-port-unreachable"
        why = f"{sp.id} has no endpoints" if not cluster else f"{sp.id} has no local endpoints"
        if not external:
            for address in sp.external_ips + sp.load_balancer_ips:
                flt.add("KUBE-EXTERNAL-SERVICES", _comment(why), f"-d {address}/32", _proto(sp), f"--dport {sp.port}",
                        target)
            for address in cfg.node_addresses if sp.node_port else ():
                flt.add("KUBE-EXTERNAL-SERVICES", _comment(why), f"-d {address}/32", _proto(sp),
                        f"--dport {sp.node_port}", target)
        elif sp.source_ranges:
            for address in sp.load_balancer_ips:
                flt.add("KUBE-EXTERNAL-SERVICES", _comment(f"{sp.id} traffic not accepted by {fw_chain(sp)}"),
                        f"-d {address}/32", _proto(sp), f"--dport {sp.port}", "-j DROP")
    for address in cfg.node_addresses:
        nat.add("KUBE-SERVICES", _comment("kubernetes service nodeports; NOTE: this must be the last rule in "
                                          "this chain"), f"-d {address}/32", "-j KUBE-NODEPORTS")
    if cfg.service_cidr:
        flt.add("KUBE-SERVICES", _comment("kubeling: the service range is not routed anywhere"),
                f"-d {cfg.service_cidr}", "-j REJECT --reject-with icmp-net-unreachable")
    return RuleSet(flt.chains, nat.chains)

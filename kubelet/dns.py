"""A pod's resolv.conf, as upstream's pkg/kubelet/network/dns: dnsPolicy ClusterFirst (the
default) asks the cluster DNS with the namespace's search path and ndots:5;
ClusterFirstWithHostNet does so for host-network pods too (ClusterFirst ones get the
node's); Default takes the node's resolv.conf; None only what dnsConfig says; dnsConfig's
nameservers, searches and options are then merged in (at most 3 nameservers and 32
search domains, as upstream)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from protos.kubeling.v1 import core_pb2
from protos.runtime.v1 import api_pb2

__all__ = ["DNSSettings", "pod_dns_config", "parse_resolv_conf", "MAX_NAMESERVERS", "MAX_SEARCHES"]

log = logging.getLogger(__name__)

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
NDOTS = "ndots:5"


@dataclass(frozen=True)
class HostDNS:
    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


def parse_resolv_conf(text: str) -> HostDNS:
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            servers.append(words[1])
        elif words[0] in ("search", "domain"):
            searches = words[1:]  # the last one wins, as the resolver reads it
        elif words[0] == "options":
            options.extend(words[1:])
    return HostDNS(tuple(servers), tuple(searches), tuple(options))


@dataclass
class DNSSettings:
    cluster_dns: list[str] = field(default_factory=list)  # --cluster-dns
    cluster_domain: str = "cluster.local"
    resolv_conf: Path = Path("/etc/resolv.conf")  # the node's (--resolv-conf)

    def host(self) -> HostDNS:
        try:
            return parse_resolv_conf(self.resolv_conf.read_text())
        except OSError:
            return HostDNS()


def _merge_options(base: list[str], extra: list[core_pb2.PodDNSConfigOption]) -> list[str]:
    merged: dict[str, str] = {}
    for option in base:
        name, _, value = option.partition(":")
        merged[name] = option
    for opt in extra:
        merged[opt.name] = f"{opt.name}:{opt.value}" if opt.HasField("value") else opt.name
    return list(merged.values())


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def pod_dns_config(pod: core_pb2.Pod, settings: DNSSettings) -> api_pb2.DNSConfig:
    policy = pod.spec.dnsPolicy or "ClusterFirst"
    cluster = policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not pod.spec.hostNetwork)
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    if policy == "None":
        pass
    elif cluster and settings.cluster_dns:
        domain = settings.cluster_domain
        host = settings.host()
        servers = list(settings.cluster_dns)
        searches = [f"{pod.metadata.namespace}.svc.{domain}", f"svc.{domain}", domain, *host.searches]
        options = [NDOTS]
    else:
        if cluster:
            log.warning("pod %s/%s: no --cluster-dns configured, dnsPolicy %s falls back to the node's resolv.conf",
                        pod.metadata.namespace, pod.metadata.name, policy)
        host = settings.host()
        servers, searches, options = list(host.servers), list(host.searches), list(host.options)
    extra = pod.spec.dnsConfig
    servers = _dedupe([*servers, *extra.nameservers])[:MAX_NAMESERVERS]
    searches = _dedupe([*searches, *extra.searches])[:MAX_SEARCHES]
    options = _merge_options(options, list(extra.options))
    return api_pb2.DNSConfig(servers=servers, searches=searches, options=options)

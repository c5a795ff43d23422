"""A pod's hostname and its kubelet-managed /etc/hosts (upstream's kubelet_pods.go:
GeneratePodHostNameAndDomain, truncatePodHostnameIfNeeded, managedHostsFileContent).

The hostname is the pod's name, or `spec.hostname`, cut to 63 characters without a
trailing `-` or `.`; with `spec.subdomain` the pod also has the domain
`<subdomain>.<namespace>.svc.<cluster domain>`, which /etc/hosts names next to the
pod's IPs. Host-network pods get a copy of the node's /etc/hosts instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from kubeling.atomicfile import replace_file
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["HOSTNAME_MAX", "HostnameError", "pod_hostname_and_domain", "hosts_file_content", "write_hosts_file",
           "host_aliases_content"]

HOSTNAME_MAX = 63
MANAGED_HEADER = "# Kubernetes-managed hosts file.\n"
MANAGED_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class HostnameError(ValueError):
    """The pod's hostname or subdomain is not a DNS label (the pod cannot be configured)."""


def _check_label(value: str, field: str) -> None:
    if len(value) > HOSTNAME_MAX or not _DNS1123_LABEL.match(value):
        raise HostnameError(f"pod {field} {value!r} is not a valid DNS label: a lowercase RFC 1123 label must "
                            f"consist of lower case alphanumeric characters or '-', start and end with an "
                            f"alphanumeric character, and be at most {HOSTNAME_MAX} characters")


def pod_hostname_and_domain(pod: Pod, cluster_domain: str) -> tuple[str, str]:
    hostname = pod.metadata.name
    if pod.spec.hostname:
        _check_label(pod.spec.hostname, "hostname")
        hostname = pod.spec.hostname
    if len(hostname) > HOSTNAME_MAX:
        hostname = hostname[:HOSTNAME_MAX].rstrip("-.")  # a hostname does not end with - or .
        if not hostname:
            raise HostnameError(f"hostname for pod {pod.metadata.name!r} was invalid: {pod.metadata.name!r}")
    domain = ""
    if pod.spec.subdomain:
        _check_label(pod.spec.subdomain, "subdomain")
        domain = f"{pod.spec.subdomain}.{pod.metadata.namespace}.svc.{cluster_domain}"
    return hostname, domain


def hosts_file_content(ips: list[str], hostname: str, domain: str) -> str:
    lines = [MANAGED_HEADER, "127.0.0.1\tlocalhost\n", "::1\tlocalhost ip6-localhost ip6-loopback\n",
             "fe00::0\tip6-localnet\n", "fe00::0\tip6-mcastprefix\n", "fe00::1\tip6-allnodes\n",
             "fe00::2\tip6-allrouters\n"]
    for ip in ips:
        lines.append(f"{ip}\t{hostname}.{domain}\t{hostname}\n" if domain else f"{ip}\t{hostname}\n")
    return "".join(lines)


def host_aliases_content(aliases: Iterable[core_pb2.HostAlias]) -> str:
    """The pod's hostAliases, one line per IP, after the managed entries (upstream's
    hostsEntriesFromHostAliases)."""
    aliases = list(aliases)
    if not aliases:
        return ""
    lines = ["\n", "# Entries added by HostAliases.\n"]
    lines += [f"{alias.ip}\t" + "\t".join(alias.hostnames) + "\n" for alias in aliases]
    return "".join(lines)


def write_hosts_file(path: Path, ips: list[str], hostname: str, domain: str, host_network: bool,
                     node_hosts: Path = Path("/etc/hosts"), aliases: Iterable[core_pb2.HostAlias] = ()) -> None:
    """Write (atomically) what the pod's containers see as /etc/hosts."""
    if host_network:
        try:
            content = MANAGED_HEADER_HOST_NETWORK + node_hosts.read_text()
        except OSError:
            content = MANAGED_HEADER_HOST_NETWORK
    else:
        content = hosts_file_content(ips, hostname, domain)
    replace_file(path, (content + host_aliases_content(aliases)).encode(), 0o644)

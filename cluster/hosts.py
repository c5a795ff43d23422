"""`kubeling up --hosts`: each kubelet on a "host" of its own — a network namespace on an
underlay bridge, with its own address out of a private /24 that exists only on that
bridge (no route leads anywhere else) — as separate machines on one switch. The control
plane listens on the bridge's address (the hosts' gateway); each host routes the other
nodes' pod CIDRs through their underlay addresses (the kubelet's --pod-routes, flannel's
host-gw). `kubeling down` removes the namespaces and the bridge."""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from pathlib import Path

__all__ = ["choose_subnet", "netns_name", "bridge_of", "host_ip", "create", "destroy"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def choose_subnet() -> str:
    """A 172.31.K.0/24 no address or route of this machine touches."""
    used = [ipaddress.ip_network(word, strict=False)
            for line in (_ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout).splitlines()
            for word in line.split() if "/" in word and word[0].isdigit()]
    for k in range(16, 250):
        subnet = ipaddress.ip_network(f"172.31.{k}.0/24")
        if not any(subnet.overlaps(u) for u in used):
            return str(subnet)
    raise RuntimeError("no free 172.31.K.0/24 for the hosts' underlay")


def bridge_of(state_dir: str) -> str:
    return "kbu-" + hashlib.sha256(state_dir.encode()).hexdigest()[:8]


def netns_name(node: str, cluster: str = "kubeling") -> str:
    """The host's network namespace: `kbh-<node>` for the cluster called kubeling (as before
    clusters had names), `kbh-<cluster>-<node>` for another, so that two clusters with the
    same node names never share one."""
    return f"kbh-{node}" if cluster == "kubeling" else f"kbh-{cluster}-{node}"


def host_ip(subnet: str, index: int) -> str:
    """The gateway (the control plane) is .1; host i (from 1) is .10+i."""
    return str(ipaddress.ip_network(subnet)[1 if index == 0 else 10 + index])


def create(state_dir: str, subnet: str, namespaces: list[str]) -> None:
    """The underlay bridge and a host (network namespace) on it per name in namespaces."""
    bridge, prefix = bridge_of(state_dir), ipaddress.ip_network(subnet).prefixlen
    destroy(state_dir, namespaces)  # what a killed supervisor may have left
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{host_ip(subnet, 0)}/{prefix}", "dev", bridge)
    _ip("link", "set", bridge, "up")
    for i, ns in enumerate(namespaces, 1):
        outer = f"{bridge}-{i}"[:15]
        _ip("netns", "add", ns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", outer, "master", bridge, "up")
        _ip("-n", ns, "addr", "add", f"{host_ip(subnet, i)}/{prefix}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        # a host forwards between its pods' bridge and the underlay (its own netns' sysctl)
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)


def destroy(state_dir: str, namespaces: list[str]) -> None:
    for ns in namespaces:
        if Path(f"/run/netns/{ns}").exists():
            _ip("netns", "del", ns, check=False)
    _ip("link", "del", bridge_of(state_dir), check=False)

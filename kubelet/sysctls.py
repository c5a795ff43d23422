"""The kubelet's sysctl admission (pkg/kubelet/sysctl): a pod may set the safe,
namespaced sysctls, and the unsafe ones the node allows (`--allowed-unsafe-sysctls`,
names or `prefix*` patterns); any other is refused before the pod runs, the pod
Failed with reason SysctlForbidden, as upstream's kubelet rejects it."""

from __future__ import annotations

from collections.abc import Iterable

from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["SAFE_SYSCTLS", "forbidden_sysctl", "FORBIDDEN_REASON"]

FORBIDDEN_REASON = "SysctlForbidden"
# upstream's SafeSysctlAllowlist (v1.32+): namespaced, and harmless to the node.
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
})


def _allowed(name: str, unsafe: Iterable[str]) -> bool:
    if name in SAFE_SYSCTLS:
        return True
    return any(name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern for pattern in unsafe)


def forbidden_sysctl(pod: Pod, unsafe: Iterable[str]) -> str:
    """The rejection message for the pod's first sysctl this node does not allow, or ""."""
    allowed = list(unsafe)
    for sysctl in pod.spec.securityContext.sysctls:
        name = sysctl.name.replace("/", ".")  # the slash form names the same sysctl
        if not _allowed(name, allowed):
            return f'forbidden sysctl: "{sysctl.name}" not allowlisted'
    return ""

"""Hold host ports: the kubelet opens a pod's host ports itself before a portmap rule exists,
so a port that another process uses is refused instead of taken over (portmap's OUTPUT
rule would otherwise steal that port's local traffic; see MACHINE-FACTS)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

__all__ = ["PortMapping", "HostPortInUse", "HostPortHolder"]


@dataclass(frozen=True)
class PortMapping:
    host_port: int
    container_port: int
    protocol: str = "tcp"  # tcp, udp, sctp (lower case, as portmap's runtimeConfig wants)
    host_ip: str = ""

    def to_runtime(self) -> dict[str, object]:
        out: dict[str, object] = {"hostPort": self.host_port, "containerPort": self.container_port,
                                  "protocol": self.protocol}
        if self.host_ip:
            out["hostIP"] = self.host_ip
        return out


class HostPortInUse(Exception):
    pass


@dataclass
class HostPortHolder:
    _held: dict[str, list[socket.socket]] = field(default_factory=dict)

    def hold(self, owner: str, mappings: list[PortMapping]) -> None:
        """Open every mapping's port for `owner`; all or nothing."""
        sockets: list[socket.socket] = []
        try:
            for m in mappings:
                if m.protocol == "sctp":
                    continue  # no portable SCTP socket to hold: trust the rule
                kind = socket.SOCK_DGRAM if m.protocol == "udp" else socket.SOCK_STREAM
                family = socket.AF_INET6 if ":" in m.host_ip else socket.AF_INET
                s = socket.socket(family, kind)
                try:
                    s.bind((m.host_ip or ("::" if family == socket.AF_INET6 else "0.0.0.0"), m.host_port))
                except OSError as err:
                    s.close()
                    raise HostPortInUse(f"host port {m.host_port}/{m.protocol.upper()}"
                                        f"{' on ' + m.host_ip if m.host_ip else ''} is already in use: "
                                        f"{err.strerror}") from None
                if kind == socket.SOCK_STREAM:
                    s.listen(1)
                sockets.append(s)
        except BaseException:
            for s in sockets:
                s.close()
            raise
        self.release(owner)
        self._held[owner] = sockets

    def release(self, owner: str) -> None:
        for s in self._held.pop(owner, []):
            s.close()

    def held(self, owner: str) -> int:
        return len(self._held.get(owner, []))

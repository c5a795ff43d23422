"""NodePorts: a host port (address, protocol, port) is used by one pod per node."""

from __future__ import annotations

from scheduler.plugins.nodeports.node_ports import NodePorts

__all__ = ["NodePorts"]

"""NodeUnschedulable: no pods on a cordoned node, unless they tolerate its taint."""

from __future__ import annotations

from scheduler.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable

__all__ = ["NodeUnschedulable"]

"""NodeName: a pod that names a node fits only there."""

from __future__ import annotations

from scheduler.plugins.nodename.node_name import NodeName

__all__ = ["NodeName"]

"""NodeVolumeLimits: no more CSI volumes on a node than its drivers allow (CSINode)."""

from __future__ import annotations

from scheduler.plugins.nodevolumelimits.csi import NodeVolumeLimits

__all__ = ["NodeVolumeLimits"]

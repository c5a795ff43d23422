"""VolumeBinding: a pod's claims bound, or bindable on the node (delayed binding)."""

from __future__ import annotations

from scheduler.plugins.volumebinding.volume_binding import VolumeBinding

__all__ = ["VolumeBinding"]

"""SchedulingGates: a pod with gates waits outside the active queue until they are removed."""

from __future__ import annotations

from scheduler.plugins.schedulinggates.scheduling_gates import SchedulingGates

__all__ = ["SchedulingGates"]

"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule ones"""

from __future__ import annotations

from scheduler.plugins.tainttoleration.taint_toleration import TaintToleration

__all__ = ["TaintToleration"]

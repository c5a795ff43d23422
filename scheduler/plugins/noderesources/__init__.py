"""The node-resources plugins: NodeResourcesFit (Filter + Score) and
NodeResourcesBalancedAllocation (Score), as upstream's noderesources package."""

from __future__ import annotations

from scheduler.plugins.noderesources.balanced_allocation import BalancedAllocation
from scheduler.plugins.noderesources.fit import ConfigError, Fit

__all__ = ["BalancedAllocation", "ConfigError", "Fit"]

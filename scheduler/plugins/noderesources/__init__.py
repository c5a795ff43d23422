"""The node-resources plugins, as upstream's noderesources package: NodeResourcesFit (Filter
+ Score), NodeResourcesBalancedAllocation (Score), and the per-strategy Score plugins a
Policy's priorities become (NodeResourcesLeastAllocated, NodeResourcesMostAllocated,
RequestedToCapacityRatio)."""

from __future__ import annotations

from scheduler.plugins.noderesources.allocation_scoring import LeastAllocated, MostAllocated, RequestedToCapacityRatio
from scheduler.plugins.noderesources.balanced_allocation import BalancedAllocation
from scheduler.plugins.noderesources.fit import ConfigError, Fit

__all__ = ["BalancedAllocation", "ConfigError", "Fit", "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]

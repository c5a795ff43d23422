"""In-tree plugins: the registry that maps plugin names to factories."""

from __future__ import annotations

from scheduler.framework.runtime import PluginFactory
from scheduler.plugins.defaultbinder import DefaultBinder
from scheduler.plugins.imagelocality import ImageLocality
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.nodename import NodeName
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.noderesources import BalancedAllocation, Fit
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.plugins.queuesort import PrioritySort
from scheduler.plugins.schedulinggates import SchedulingGates
from scheduler.plugins.tainttoleration import TaintToleration

__all__ = ["in_tree_registry"]

_PLUGINS = (PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, NodePorts, Fit, BalancedAllocation,
            NodeAffinity, TaintToleration, ImageLocality, DefaultBinder)


def in_tree_registry() -> dict[str, PluginFactory]:
    return {cls.name: cls for cls in _PLUGINS}

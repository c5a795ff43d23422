"""The plugin registry: in-tree plugins, plus out-of-tree ones from Python entry points
(group `kubeling.scheduler.plugins`: `Name = package.module:Factory`)."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from kubeling.options import ConfigError
from scheduler.framework.runtime import PluginFactory
from scheduler.plugins.defaultbinder import DefaultBinder
from scheduler.plugins.defaultpreemption import DefaultPreemption
from scheduler.plugins.imagelocality import ImageLocality
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.nodelabel import NodeLabel
from scheduler.plugins.nodename import NodeName
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.nodepreferavoidpods import NodePreferAvoidPods
from scheduler.plugins.noderesources import (
    BalancedAllocation,
    Fit,
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
)
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.plugins.nodevolumelimits import NodeVolumeLimits
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.queuesort import PrioritySort
from scheduler.plugins.schedulinggates import SchedulingGates
from scheduler.plugins.selectorspread import SelectorSpread
from scheduler.plugins.serviceaffinity import ServiceAffinity
from scheduler.plugins.tainttoleration import TaintToleration
from scheduler.plugins.volumebinding import VolumeBinding
from scheduler.plugins.volumerestrictions import VolumeRestrictions

__all__ = ["in_tree_registry", "registry", "ENTRY_POINT_GROUP", "PluginLoadError"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kubeling.scheduler.plugins"


class PluginLoadError(ConfigError):
    """A plugin the configuration names cannot be loaded (the scheduler exits 2)."""

_PLUGINS = (PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, NodePorts, Fit, BalancedAllocation,
            NodeAffinity, TaintToleration, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, PodTopologySpread,
            InterPodAffinity, ImageLocality, DefaultPreemption, DefaultBinder,
            # the plugins only a Policy's predicates and priorities (upstream 1.19-1.22) turn into
            SelectorSpread, ServiceAffinity, NodeLabel, NodePreferAvoidPods, LeastAllocated, MostAllocated,
            RequestedToCapacityRatio)


def in_tree_registry() -> dict[str, PluginFactory]:
    return {cls.name: cls for cls in _PLUGINS}


def registry() -> dict[str, PluginFactory]:
    """In-tree plugins and every installed out-of-tree plugin; a name may not be taken twice."""
    out = in_tree_registry()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in out:
            raise PluginLoadError(f"out-of-tree plugin {ep.name!r} ({ep.value}) clashes with a plugin of that name")
        try:
            factory = ep.load()
        except Exception as err:
            raise PluginLoadError(f"cannot load out-of-tree plugin {ep.name!r} from {ep.value}: {err}") from err
        if getattr(factory, "name", ep.name) != ep.name:
            raise PluginLoadError(f"out-of-tree plugin {ep.value} is registered as {ep.name!r} "
                                  f"but calls itself {factory.name!r}")
        out[ep.name] = factory
        log.info("loaded out-of-tree scheduler plugin %s from %s", ep.name, ep.value)
    return out

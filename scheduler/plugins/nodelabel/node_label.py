"""NodeLabel (Filter + Score), upstream's plugin of 1.18-1.22 that a Policy's
CheckNodeLabelPresence predicate (`labelsPresence`) and NodeLabelPriority (`labelPreference`)
become.

args: `presentLabels` / `absentLabels` (Filter: the node must have every one of the first and
none of the second, whatever their values); `presentLabelsPreference` /
`absentLabelsPreference` (Score: 100 for each label as preferred, averaged over them).
"""

from __future__ import annotations

from typing import Any

from scheduler.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    Resource,
    ScorePlugin,
)
from scheduler.framework.status import SUCCESS, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo
from scheduler.plugins.helper import label_list

__all__ = ["NodeLabel", "ERR_PRESENCE_VIOLATED"]

ERR_PRESENCE_VIOLATED = "node(s) didn't have the requested labels"


def _no_conflict(present: list[str], absent: list[str], present_path: str, absent_path: str) -> None:
    """A label cannot be both wanted and unwanted (upstream validateNoConflict's message)."""
    index = {label: i for i, label in enumerate(present)}
    for i, label in enumerate(absent):
        if label in index:
            raise ConfigError(f"{present_path}[{index[label]}]: Invalid value: {label!r}: "
                              f"has conflict with {absent_path}[{i}]")


class NodeLabel(FilterPlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeLabel"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        where = "pluginConfig[NodeLabel].args"
        self.present = label_list(self.args, "presentLabels", where)
        self.absent = label_list(self.args, "absentLabels", where)
        self.present_preference = label_list(self.args, "presentLabelsPreference", where)
        self.absent_preference = label_list(self.args, "absentLabelsPreference", where)
        _no_conflict(self.present, self.absent, f"{where}.presentLabels", f"{where}.absentLabels")
        _no_conflict(self.present_preference, self.absent_preference, f"{where}.presentLabelsPreference",
                     f"{where}.absentLabelsPreference")

    def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
        n = node.node
        if n is None:
            return Status.as_error("node not found")
        labels = n.metadata.labels
        if all(k in labels for k in self.present) and not any(k in labels for k in self.absent):
            return SUCCESS
        return Status.unresolvable(ERR_PRESENCE_VIOLATED)

    def score(self, state: CycleState, pod: Any, node: NodeInfo) -> tuple[int, Status]:
        n = node.node
        if n is None:
            return 0, Status.as_error("node not found")
        labels = n.metadata.labels
        preferences = len(self.present_preference) + len(self.absent_preference)
        if not preferences:
            return 0, SUCCESS
        score = MAX_NODE_SCORE * (sum(1 for k in self.present_preference if k in labels)
                                  + sum(1 for k in self.absent_preference if k not in labels))
        return score // preferences, SUCCESS

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(Resource.NODE, Action.ADD), ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL)]

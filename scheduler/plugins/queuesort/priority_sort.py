"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

from scheduler.framework.interface import QueueSortPlugin
from scheduler.framework.types import QueuedPodInfo

__all__ = ["PrioritySort"]


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.spec.priority, b.pod.spec.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[float, ...]:
        return -qpi.pod.spec.priority, qpi.timestamp

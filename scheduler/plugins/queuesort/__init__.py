"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

from scheduler.plugins.queuesort.priority_sort import PrioritySort

__all__ = ["PrioritySort"]

"""SelectorSpread: spread the pods of a Service, ReplicaSet, ... over nodes and zones."""

from __future__ import annotations

from scheduler.plugins.selectorspread.selector_spread import SelectorSpread

__all__ = ["SelectorSpread"]

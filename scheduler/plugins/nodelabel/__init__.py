"""NodeLabel: nodes with (or without) some labels, required or preferred."""

from __future__ import annotations

from scheduler.plugins.nodelabel.node_label import NodeLabel

__all__ = ["NodeLabel"]

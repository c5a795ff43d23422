"""DefaultPreemption (PostFilter): make room for a pod by evicting lower-priority pods."""

from __future__ import annotations

from scheduler.plugins.defaultpreemption.default_preemption import DefaultPreemption, split_by_pdb_violation

__all__ = ["DefaultPreemption", "split_by_pdb_violation"]

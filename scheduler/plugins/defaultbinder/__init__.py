"""DefaultBinder: Bind through the apiserver"s Pods.Bind (with the attempt"s recorded"""

from __future__ import annotations

from scheduler.plugins.defaultbinder.default_binder import DefaultBinder

__all__ = ["DefaultBinder"]

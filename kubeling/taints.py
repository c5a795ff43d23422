"""Taints and tolerations, as upstream's core/v1 helpers (Toleration.ToleratesTaint):
shared by the scheduler's plugins and the controllers' NoExecute eviction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["tolerates", "find_untolerated"]


def tolerates(toleration: Any, taint: Any) -> bool:
    """Upstream Toleration.ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    # an empty key with Exists tolerates everything
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return bool(toleration.value == taint.value)
    return False


def find_untolerated(taints: Iterable[Any], tolerations: Iterable[Any], effects: tuple[str, ...]) -> Any | None:
    """The first taint with one of these effects that no toleration tolerates, or None."""
    tols = list(tolerations)
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(tolerates(t, taint) for t in tols):
            return taint
    return None

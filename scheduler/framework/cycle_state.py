"""CycleState: data plugins share within one scheduling cycle (PreFilter → Filter, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.framework.results import CycleResults
    from scheduler.framework.types import PodInfo

__all__ = ["CycleState"]


class CycleState:
    """A per-cycle key/value store; `clone` is used when Filter runs with nominated pods added."""

    __slots__ = ("_data", "skip_filter", "skip_score", "pod_info", "results")

    def __init__(self, pod_info: PodInfo | None = None) -> None:
        self._data: dict[str, Any] = {}
        # The pod being scheduled, as the queue derived it once (requests, ports, affinity):
        # plugins read it instead of deriving it again.
        self.pod_info = pod_info
        self.skip_filter: set[str] = set()  # plugins whose PreFilter returned Skip
        self.skip_score: set[str] = set()   # plugins whose PreScore returned Skip
        # This attempt's plugin answers when it is recorded (scheduler.framework.results), else None.
        self.results: CycleResults | None = None

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value, or KeyError (a plugin whose PreFilter did not run)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def clone(self) -> CycleState:
        c = CycleState(self.pod_info)
        c._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c  # not the results: what a clone judges (preemption's dry runs) is not this attempt's

"""Run the scheduler in process: a binder plugin that records and feeds the bound pod back
as the informer would (a stand-in for the apiserver, for unit tests only)."""

from __future__ import annotations

from typing import Any

from scheduler.config import parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import BindPlugin
from scheduler.framework.results import on_pod
from scheduler.framework.status import SUCCESS, Status
from scheduler.legacy.policy import Policy
from scheduler.legacy.registry import FeatureGates
from scheduler.plugins import in_tree_registry
from scheduler.scheduler import Scheduler


class RecordingBinder(BindPlugin):
    name = "RecordingBinder"
    fail: set[str] = set()

    async def bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
        sched = self.handle
        assert isinstance(sched, Scheduler)
        if pod.metadata.name in self.fail:
            return Status.as_error(f"bind of {pod.metadata.name} refused (test)")
        bound = type(pod)()
        bound.CopyFrom(pod)
        bound.spec.nodeName = node_name
        sched.bindings[pod.metadata.name] = node_name  # type: ignore[attr-defined]
        sched.recorded[pod.metadata.name] = on_pod(state.results)  # type: ignore[attr-defined]
        old = type(pod)()
        old.CopyFrom(pod)
        old.spec.nodeName = ""
        sched.on_pod_update(old, bound)  # the informer's view of the bind
        return SUCCESS


def make_scheduler(config: dict[str, Any] | None = None, *, policy: Policy | None = None,
                   gates: FeatureGates | None = None, **kw: Any) -> Scheduler:
    """A scheduler of `config` (and `policy`, when the config names one), binding through
    RecordingBinder instead of the API."""
    registry = in_tree_registry()
    registry["RecordingBinder"] = RecordingBinder
    data = config or {}
    if policy is not None:
        data.setdefault("algorithmSource", {"policy": {"file": {"path": "policy.json"}}})
    else:
        data.setdefault("profiles", [{"schedulerName": "default-scheduler"}])
        for p in data["profiles"]:
            plugins = p.setdefault("plugins", {})
            plugins.setdefault("bind", {"disabled": [{"name": "*"}], "enabled": [{"name": "RecordingBinder"}]})
    parsed = parse_config(data, registry, policy=policy, gates=gates)
    for profile in parsed.profiles:  # a Policy's profile too binds through the binder a test watches
        profile.points.enabled["bind"] = ["RecordingBinder"]
    evicted: list[str] = []

    async def evict(pod: Any, message: str) -> None:  # the victim goes at once (no kubelet here)
        evicted.append(pod.metadata.name)
        sched.on_pod_delete(pod)

    kw.setdefault("evictor", evict)
    sched = Scheduler(parsed, registry, **kw)
    sched.bindings = {}  # type: ignore[attr-defined]
    sched.recorded = {}  # type: ignore[attr-defined]  # what DefaultBinder would send with the Binding
    sched.evicted = evicted  # type: ignore[attr-defined]
    return sched


async def drain(sched: Scheduler) -> None:
    """Schedule until activeQ is empty (after flushing completed backoffs) and every binding finished."""
    while True:
        sched.queue.flush_backoff_completed()
        if not len(sched.queue.active):
            break
        await sched.schedule_one()
    await sched.wait_for_bindings()

"""The framework of one profile: its plugins at each extension point, run in order.

As upstream's frameworkImpl: plugins are built once from the registry, each extension
point runs its enabled plugins in configured order, scores are normalized to 0..100 and
weighted, Permit can park a pod (WaitingPod) until allowed, rejected or timed out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    BindPlugin,
    FilterPlugin,
    Handle,
    NodeScore,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.results import verdict
from scheduler.framework.status import SUCCESS, Code, Status, merge
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, PodInfo, QueuedPodInfo

__all__ = ["Framework", "PluginFactory", "ExtensionPoints", "WaitingPod", "EXTENSION_POINTS"]

log = logging.getLogger(__name__)

PluginFactory = Callable[[dict[str, Any], Handle | None], Plugin]
MAX_PERMIT_TIMEOUT = 15 * 60.0

# extension point name (as in KubeSchedulerConfiguration) -> the base class it needs
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin, "queueSort": QueueSortPlugin, "preFilter": PreFilterPlugin,
    "filter": FilterPlugin, "postFilter": PostFilterPlugin, "preScore": PreScorePlugin,
    "score": ScorePlugin, "reserve": ReservePlugin, "permit": PermitPlugin,
    "preBind": PreBindPlugin, "bind": BindPlugin, "postBind": PostBindPlugin,
}


@dataclass
class ExtensionPoints:
    """Enabled plugin names per extension point, in order; score weights by plugin."""

    enabled: dict[str, list[str]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    args: dict[str, dict[str, Any]] = field(default_factory=dict)


class WaitingPod:
    """A pod parked by Permit: it proceeds when every waiting plugin allowed it
    (interface.WaitingPod, what plugins reach through the handle)."""

    def __init__(self, pod: Pod, timeouts: dict[str, float]) -> None:
        self._pod = pod
        self.pending = dict(timeouts)
        self._result: asyncio.Future[Status] = asyncio.get_running_loop().create_future()
        self._timers = [asyncio.get_running_loop().call_later(
                            t, self.reject, name, f"rejected due to timeout after waiting {t:g}s at plugin {name}")
                        for name, t in timeouts.items()]

    @property
    def pod(self) -> Pod:
        return self._pod

    def pending_plugins(self) -> list[str]:
        return list(self.pending)

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending and not self._result.done():
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        if not self._result.done():
            self._finish(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def _finish(self, status: Status) -> None:
        for t in self._timers:
            t.cancel()
        self._result.set_result(status)

    async def wait(self) -> Status:
        return await self._result


class Framework:
    def __init__(self, scheduler_name: str, points: ExtensionPoints,
                 registry: dict[str, PluginFactory], handle: Handle | None = None, *,
                 run_all_filters: bool = False) -> None:
        """`run_all_filters`: a node's every filter runs even after one rejected it, and the
        rejections are merged (upstream's WithRunAllFilters, a Policy's alwaysCheckAllPredicates)."""
        self.scheduler_name = scheduler_name
        self.points = points
        self.handle = handle
        self.run_all_filters = run_all_filters
        self.plugins: dict[str, Plugin] = {}
        for point, names in points.enabled.items():
            base = EXTENSION_POINTS.get(point)
            if base is None:
                raise ValueError(f"unknown extension point {point!r}")
            for name in names:
                plugin = self.plugins.get(name)
                if plugin is None:
                    factory = registry.get(name)
                    if factory is None:
                        raise ValueError(f"plugin {name!r} is not registered")
                    plugin = factory(points.args.get(name, {}), handle)
                    self.plugins[name] = plugin
                if not isinstance(plugin, base):
                    raise ValueError(f"plugin {name!r} does not extend {point}")
        self.waiting: dict[str, WaitingPod] = {}

        def at(point: str) -> list[Any]:
            return [self.plugins[n] for n in points.enabled.get(point, [])]

        sorts = at("queueSort")
        if len(sorts) != 1:
            raise ValueError(f"profile {scheduler_name!r}: exactly one queueSort plugin is needed, got {len(sorts)}")
        if not at("bind"):
            raise ValueError(f"profile {scheduler_name!r}: at least one bind plugin is needed")
        self.queue_sort: QueueSortPlugin = sorts[0]
        self.pre_enqueue: list[PreEnqueuePlugin] = at("preEnqueue")
        self.pre_filter: list[PreFilterPlugin] = at("preFilter")
        self.filter: list[FilterPlugin] = at("filter")
        self.post_filter: list[PostFilterPlugin] = at("postFilter")
        self.pre_score: list[PreScorePlugin] = at("preScore")
        self.score: list[ScorePlugin] = at("score")
        self.reserve: list[ReservePlugin] = at("reserve")
        self.permit: list[PermitPlugin] = at("permit")
        self.pre_bind: list[PreBindPlugin] = at("preBind")
        self.bind: list[BindPlugin] = at("bind")
        self.post_bind: list[PostBindPlugin] = at("postBind")
        self.weights = {p.name: max(1, points.weights.get(p.name, 1)) for p in self.score}

    # ------------------------------------------------------------ queue side

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort.less(a, b)

    @property
    def sort_key(self) -> Callable[[QueuedPodInfo], tuple[float, ...]] | None:
        """The QueueSort plugin's key, when it has one (see QueueSortPlugin.sort_key)."""
        if type(self.queue_sort).sort_key is QueueSortPlugin.sort_key:
            return None
        return self.queue_sort.sort_key

    def run_pre_enqueue(self, pod: Pod) -> Status:
        for p in self.pre_enqueue:
            s = p.pre_enqueue(pod)
            if not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    # ------------------------------------------------------------ filtering

    def run_pre_filter(self, state: CycleState, pod: Pod,
                       nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status]:
        result: PreFilterResult | None = None
        record = state.results
        for p in self.pre_filter:
            r, s = p.pre_filter(state, pod, nodes)
            if record is not None:
                record.pre_filter[p.name] = "skip" if s.is_skip else verdict(s) if r is None or r.node_names is None \
                    or not s.ok else {"nodes": sorted(r.node_names)}
            if s.is_skip:
                state.skip_filter.add(p.name)
                continue
            if not s.ok:
                return None, s.with_plugin(p.name)
            if r is not None and r.node_names is not None:
                result = (result or PreFilterResult()).merge(r)
                if not result.node_names:
                    return result, Status.unresolvable(
                        f"node(s) didn't satisfy plugin(s) [{p.name}] simultaneously").with_plugin(p.name)
        return result, SUCCESS

    def run_filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        skip = state.skip_filter
        if self.run_all_filters:
            return self._run_all(state, pod, node, [p for p in self.filter if p.name not in skip])
        for p in self.filter:
            if p.name in skip:
                continue
            s = p.filter(state, pod, node)
            if s is not SUCCESS and not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    @staticmethod
    def _run_all(state: CycleState, pod: Pod, node: NodeInfo, plugins: Sequence[FilterPlugin]) -> Status:
        """Every plugin, the rejections merged; an error still ends the run (upstream too)."""
        rejected: list[Status] = []
        for p in plugins:
            s = p.filter(state, pod, node)
            if s is not SUCCESS and not s.ok:
                s = s.with_plugin(p.name)
                if s.code is Code.ERROR:
                    return s
                rejected.append(s)
        return merge(rejected) if rejected else SUCCESS

    def run_filter_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                         nodes: Sequence[NodeInfo]) -> tuple[np.ndarray, list[FilterPlugin]]:
        """The filter plugins that can judge all `rows` at once (their combined mask), and
        the ones that must still run per node, in order."""
        mask = np.ones(len(rows), dtype=bool)
        per_node: list[FilterPlugin] = []
        for p in self.filter:
            if p.name in state.skip_filter:
                continue
            m = p.filter_batch(state, pod, table, rows, nodes)
            if m is None:
                per_node.append(p)
            else:
                mask &= m
        return mask, per_node

    def run_filter_plugins(self, plugins: Sequence[FilterPlugin], state: CycleState, pod: Pod,
                           node: NodeInfo) -> Status:
        if self.run_all_filters:
            return self._run_all(state, pod, node, plugins)
        for p in plugins:
            s = p.filter(state, pod, node)
            if s is not SUCCESS and not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    def run_score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                        nodes: Sequence[NodeInfo]) -> tuple[np.ndarray, Status]:
        """run_score over the nodes at `rows`, with each plugin's batch path when it has one."""
        totals = np.zeros(len(rows), dtype=np.int64)
        for p in self.score:
            if p.name in state.skip_score:
                continue
            values = p.score_batch(state, pod, table, rows, nodes)
            if values is None:
                raw_list = []
                for r in rows:
                    v, s = p.score(state, pod, nodes[r])
                    if s is not SUCCESS and not s.ok:
                        return totals, s.with_plugin(p.name)
                    raw_list.append(v)
                values = np.array(raw_list, dtype=np.int64)
            raw = values
            if type(p).normalize_score is not ScorePlugin.normalize_score:
                normalized = p.normalize_batch(state, pod, values)
                if normalized is None:
                    ns, s = p.normalize_score(state, pod, [NodeScore(nodes[r].name, int(v))
                                                           for r, v in zip(rows, values, strict=True)])
                    if not s.ok:
                        return totals, s.with_plugin(p.name)
                    normalized = np.array([x.score for x in ns], dtype=np.int64)
                values = normalized
            if values.size and (values.min() < 0 or values.max() > MAX_NODE_SCORE):
                bad = int(np.flatnonzero((values < 0) | (values > MAX_NODE_SCORE))[0])
                return totals, Status.as_error(f"plugin {p.name!r} returned an invalid score {int(values[bad])} "
                                               f"for node {nodes[rows[bad]].name!r}")
            if state.results is not None:
                state.results.record_scores(p.name, rows, raw, values, self.weights[p.name])
            totals += values * self.weights[p.name]
        return totals, SUCCESS

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo,
                                       nominated: Sequence[PodInfo]) -> Status:
        """Filter as if the nominated pods of equal or higher priority were already on the
        node, and, if they were, also without them (upstream runs it twice: a pod must fit
        both with them, for their sake, and without them, for inter-pod affinity's)."""
        priority = pod.spec.priority
        relevant = [pi for pi in nominated if pi.pod.spec.priority >= priority and pi.uid != pod.metadata.uid]
        if not relevant:
            return self.run_filter(state, pod, node)
        with_nominated, info = state.clone(), node.clone()
        for pi in relevant:
            info.add_pod(pi)
            for p in self.pre_filter:
                if p.name not in with_nominated.skip_filter:
                    s = p.add_pod(with_nominated, pod, pi, info)
                    if not s.ok:
                        return s.with_plugin(p.name)
        status = self.run_filter(with_nominated, pod, info)
        if not status.ok:
            return status
        return self.run_filter(state, pod, node)

    async def run_post_filter(self, state: CycleState, pod: Pod,
                              statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        last = Status.unschedulable("no postFilter plugin")
        for p in self.post_filter:
            r, s = await p.post_filter(state, pod, statuses)
            if s.ok or s.code is Code.ERROR:
                return r, s.with_plugin(p.name)
            last = s.with_plugin(p.name)
        return None, last

    # ------------------------------------------------------------ scoring

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        for p in self.pre_score:
            s = p.pre_score(state, pod, nodes)
            if s.is_skip:
                state.skip_score.add(p.name)
            elif not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    # ------------------------------------------------------------ reserve .. bind

    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        for p in self.reserve:
            s = p.reserve(state, pod, node)
            if not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in reversed(self.reserve):
            try:
                p.unreserve(state, pod, node)
            except Exception:
                log.exception("unreserve of plugin %s failed for pod %s", p.name, pod.metadata.name)

    def run_permit(self, state: CycleState, pod: Pod, node: str) -> Status:
        timeouts: dict[str, float] = {}
        for p in self.permit:
            s, timeout = p.permit(state, pod, node)
            if state.results is not None:
                state.results.permit[p.name] = "Wait" if s.code is Code.WAIT else verdict(s)
            if s.code is Code.WAIT:
                timeouts[p.name] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
            elif not s.ok:
                return s.with_plugin(p.name)
        if timeouts:
            self.waiting[str(pod.metadata.uid)] = WaitingPod(pod, timeouts)
            return Status(Code.WAIT, ("waiting on permit",))
        return SUCCESS

    async def wait_on_permit(self, pod: Pod) -> Status:
        w = self.waiting.get(str(pod.metadata.uid))
        if w is None:
            return SUCCESS
        try:
            return await w.wait()
        finally:
            self.waiting.pop(str(pod.metadata.uid), None)

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    async def run_pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        for p in self.pre_bind:
            s = await p.pre_bind(state, pod, node)
            if not s.ok:
                return s.with_plugin(p.name)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        for p in self.bind:
            s = await p.bind(state, pod, node)
            if s.is_skip:
                continue
            return s.with_plugin(p.name)
        return Status.as_error("no bind plugin bound the pod")

    def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in self.post_bind:
            try:
                p.post_bind(state, pod, node)
            except Exception:
                log.exception("postBind of plugin %s failed for pod %s", p.name, pod.metadata.name)


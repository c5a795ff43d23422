"""The scheduling loop (upstream schedule_one.go): one pod per cycle, binding in the background.

The Scheduler is independent of the apiserver: informer events come in through the
`on_*` methods, and what must reach the API (binding is a plugin; events and pod
status updates are `Recorder` calls) goes out through the handle and the recorder, so
tests and benchmarks can run it in process.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from opentelemetry import trace

from kubeling.telemetry import pod_attributes, pod_context, tracer
from scheduler.cache import Cache, Snapshot
from scheduler.config import SchedulerConfig
from scheduler.extender import MAX_EXTENDER_PRIORITY, ExtenderError, HTTPExtender
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action, ClusterEvent, EnqueueExtensions, NodeScore, PreFilterResult, Resource,
)
from scheduler.framework.runtime import Framework, PluginFactory
from scheduler.framework.status import Code, Status
from scheduler.framework.types import MAX_NODE_SCORE, NodeInfo, PodInfo, QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.queue import SchedulingQueue

__all__ = ["Scheduler", "Recorder", "FitError", "ScheduleResult", "num_feasible_nodes_to_find"]

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)

Pod = Any
Node = Any
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES = "NoNodesAvailable"  # pseudo plugin: waits for a node to be added


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes are enough (upstream's adaptive default: 50 - nodes/125 %)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Recorder(Protocol):
    """Where the scheduler reports to the API (Events, pod status)."""

    def scheduled(self, pod: Pod, node: str) -> None: ...
    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None) -> None: ...


class _NullRecorder:
    def scheduled(self, pod: Pod, node: str) -> None:
        pass

    def failed(self, pod: Pod, reason: str, message: str, nominated_node: str | None) -> None:
        pass


@dataclass
class ScheduleResult:
    node: str
    evaluated: int
    feasible: int


@dataclass
class FitError(Exception):
    """No node fits: a per-node diagnosis, summarised as kube-scheduler does."""

    pod: Pod
    num_all_nodes: int
    statuses: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def __str__(self) -> str:
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            counts: dict[str, int] = {}
            for s in self.statuses.values():
                for r in s.reasons:
                    counts[r] = counts.get(r, 0) + 1
            parts = sorted(f"{n} {r}" for r, n in counts.items())
            if parts:
                msg += f" {', '.join(parts)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}."
        return msg


class Scheduler:
    def __init__(self, config: SchedulerConfig, registry: dict[str, PluginFactory], *,
                 client: Any = None, recorder: Recorder | None = None, assumed_ttl: float = 30.0,
                 rng: random.Random | None = None, metrics: SchedulerMetrics | None = None,
                 evictor: Callable[[Pod, str], Awaitable[None]] | None = None) -> None:
        self.config = config
        self.evictor = evictor  # how preemption removes victims (default: delete through the API)
        self.metrics = metrics or SchedulerMetrics()
        self.client = client
        self.recorder: Recorder = recorder or _NullRecorder()
        self.cache = Cache(ttl=assumed_ttl)
        self.snapshot = Snapshot()
        self.rng = rng or random.Random()
        self.frameworks: dict[str, Framework] = {
            p.scheduler_name: Framework(p.scheduler_name, p.points, registry, self) for p in config.profiles}
        self.percentages = {p.scheduler_name: (p.percentage_of_nodes_to_score
                                               if p.percentage_of_nodes_to_score is not None
                                               else config.percentage_of_nodes_to_score)
                            for p in config.profiles}
        first = next(iter(self.frameworks.values()))
        events: dict[str, list[ClusterEvent]] = {NO_NODES: [ClusterEvent(Resource.NODE, Action.ADD)]}
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                if isinstance(plugin, EnqueueExtensions):
                    events[name] = plugin.events_to_register()
        self.queue = SchedulingQueue(
            first.less, pre_enqueue=self._pre_enqueue, plugin_events=events,
            initial_backoff=config.pod_initial_backoff_seconds, max_backoff=config.pod_max_backoff_seconds,
            max_unschedulable=config.pod_max_in_unschedulable_pods_duration)
        self.extenders = [HTTPExtender(c) for c in config.extenders]
        self.next_start_node_index = 0
        self._binding_tasks: set[asyncio.Task[None]] = set()
        self.bound = 0  # pods bound by this scheduler (for tests and benchmarks)
        self.metrics.track_pending(self.queue.stats)

    # ------------------------------------------------------------ Handle (for plugins)

    def node_infos(self) -> Sequence[NodeInfo]:
        return self.snapshot.node_infos()

    def node_info(self, name: str) -> NodeInfo | None:
        return self.snapshot.get(name)

    def node_table(self) -> Any:
        return self.snapshot.table

    def framework_for(self, pod: Pod) -> Framework:
        return self.frameworks[pod.spec.schedulerName]

    def nominated_for_node(self, node: str) -> list[PodInfo]:
        return self.queue.nominated_for_node(node)

    async def evict(self, pod: Pod, message: str) -> None:
        """Remove a preemption victim: graceful delete through the API (its kubelet stops it)."""
        log.info("preempting pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, message)
        if self.evictor is not None:
            await self.evictor(pod, message)
            return
        if self.client is None:
            raise RuntimeError("no apiserver client to evict preemption victims with")
        from kubeling import errors
        try:
            await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except errors.NotFound:
            return
        preempted = getattr(self.recorder, "preempted", None)
        if preempted is not None:
            preempted(pod, message)

    def clear_lower_nominations(self, pod: Pod, node: str) -> None:
        """Pods of lower priority nominated to `node` lose the nomination (upstream too)."""
        for pi in self.queue.nominated_for_node(node):
            if pi.pod.spec.priority < pod.spec.priority:
                self.queue.delete_nominated(pi.pod)

    def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.frameworks.get(pod.spec.schedulerName)
        return fwk.run_pre_enqueue(pod) if fwk is not None else Status()

    # ------------------------------------------------------------ informer events

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.schedulerName in self.frameworks

    def on_pod_add(self, pod: Pod) -> None:
        if pod.spec.nodeName:
            self.cache.add_pod(pod)
            self.queue.delete_nominated(pod)
        elif self.responsible_for(pod) and not pod.metadata.HasField("deletionTimestamp"):
            self.queue.add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if new.spec.nodeName:
            if not old.spec.nodeName:
                self.queue.delete(old)  # it was bound (by us or another scheduler)
                self.cache.add_pod(new)
            else:
                self.cache.update_pod(old, new)
            return
        if not self.responsible_for(new):
            return
        if new.metadata.HasField("deletionTimestamp"):
            self.queue.delete(new)
            return
        if old.spec.schedulingGates and not new.spec.schedulingGates:
            self.queue.update(old, new)
            self.queue.move_all_on_event(ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES))
            return
        self.queue.update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        if pod.spec.nodeName:
            self.cache.remove_pod(pod)
            self.queue.move_all_on_event(ClusterEvent(Resource.POD, Action.DELETE))
        else:
            self.queue.delete(pod)

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_on_event(ClusterEvent(Resource.NODE, Action.ADD))

    def on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(new)
        for event in _node_changes(old, new):
            self.queue.move_all_on_event(event)

    def on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node)

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        while True:
            if not await self.schedule_one():
                return
            # pop() does not suspend while activeQ has pods: yield, so that binding cycles,
            # informer events and timers run between scheduling cycles.
            await asyncio.sleep(0)

    async def schedule_one(self) -> bool:
        """One scheduling cycle; the binding cycle continues in the background."""
        qpi = await self.queue.pop()
        if qpi is None:
            return False
        # In the pod's own trace (started by its Create); the binding cycle's task and
        # its Bind call inherit this span as their parent.
        with _TRACER.start_as_current_span("scheduling cycle", context=pod_context(qpi.pod.metadata.annotations),
                                           attributes=pod_attributes(qpi.pod)):
            return await self._schedule_one(qpi)

    async def _schedule_one(self, qpi: QueuedPodInfo) -> bool:
        pod = qpi.pod
        fwk = self.frameworks.get(pod.spec.schedulerName)
        if fwk is None or pod.metadata.HasField("deletionTimestamp") or self.cache.is_assumed(str(pod.metadata.uid)):
            return True
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        started = time.perf_counter()
        try:
            result = await self.schedule_pod(fwk, state, pod)
        except FitError as fit:
            self._observe(fwk, "unschedulable", started)
            nominated = None
            if fwk.post_filter and fit.statuses:
                t = time.perf_counter()
                r, s = await fwk.run_post_filter(state, pod, fit.statuses)
                self._phase(fwk, "PostFilter", _status_label(s), t)
                if s.ok and r is not None and r.nominated_node_name:
                    nominated = r.nominated_node_name
                    self.queue.add_nominated(qpi.pod_info, nominated)
                elif not s.ok:
                    fit.post_filter_msg = s.message
            qpi.unschedulable_plugins = fit.unschedulable_plugins
            self._failure(qpi, cycle, "Unschedulable", str(fit), nominated)
            return True
        except _SchedulingError as err:
            self._observe(fwk, "error", started)
            self._failure(qpi, cycle, "SchedulerError", str(err), None, error=True)
            return True

        # Assume: the next cycle sees the pod on its node before the binding lands.
        assumed = _with_node(pod, result.node)
        assumed_info = PodInfo.of(assumed)
        self.cache.assume_pod(assumed_info, result.node)
        t = time.perf_counter()
        s = fwk.run_reserve(state, assumed, result.node)
        self._phase(fwk, "Reserve", _status_label(s), t)
        if not s.ok:
            fwk.run_unreserve(state, assumed, result.node)
            self.cache.forget_pod(assumed_info.uid)
            self._failure(qpi, cycle, "SchedulerError" if s.code is Code.ERROR else "Unschedulable",
                          s.message, None, error=s.code is Code.ERROR)
            return True
        t = time.perf_counter()
        s = fwk.run_permit(state, assumed, result.node)
        self._phase(fwk, "Permit", _status_label(s), t)
        if not s.ok and s.code is not Code.WAIT:
            fwk.run_unreserve(state, assumed, result.node)
            self.cache.forget_pod(assumed_info.uid)
            self._failure(qpi, cycle, "SchedulerError" if s.code is Code.ERROR else "Unschedulable",
                          s.message, None, error=s.code is Code.ERROR)
            return True
        trace.get_current_span().set_attribute("k8s.node.name", result.node)
        task = asyncio.create_task(self._binding_cycle(fwk, state, qpi, assumed, result.node, cycle, started))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)
        return True

    def _phase(self, fwk: Framework, point: str, status: str, started: float, *,
               span: trace.Span | None = None) -> None:
        """Record one extension point: its duration metric and, inside a recorded trace, its
        span: `span` when the caller opened one, else one made after the fact (so that the
        untraced path costs only this check)."""
        elapsed = time.perf_counter() - started
        self.metrics.extension_point.labels(point, status, fwk.scheduler_name).observe(elapsed)
        attributes = {"scheduler.status": status, "scheduler.profile": fwk.scheduler_name}
        if span is not None:
            span.set_attributes(attributes)
        elif trace.get_current_span().is_recording():
            end = time.time_ns()
            _TRACER.start_span(point, start_time=end - int(elapsed * 1e9), attributes=attributes).end(end_time=end)

    async def schedule_pod(self, fwk: Framework, state: CycleState, pod: Pod) -> ScheduleResult:
        self.cache.update_snapshot(self.snapshot)
        nodes = self.snapshot.node_infos()
        if not nodes:
            raise FitError(pod, 0, unschedulable_plugins={NO_NODES}, pre_filter_msg="no nodes available to schedule pods")
        fit = FitError(pod, len(nodes))
        t = time.perf_counter()
        pre, s = fwk.run_pre_filter(state, pod, nodes)
        self._phase(fwk, "PreFilter", _status_label(s), t)
        if not s.ok:
            if not s.is_rejected:
                raise _SchedulingError(f"running PreFilter plugin {s.plugin!r}: {s.message}")
            fit.statuses = {n.name: s for n in nodes}
            fit.pre_filter_msg = s.message
            fit.unschedulable_plugins.add(s.plugin)
            raise fit
        t = time.perf_counter()
        feasible = self._find_nodes_that_fit(fwk, state, pod, nodes, pre, fit)
        feasible = await self._extenders_filter(pod, feasible, fit)
        self._phase(fwk, "Filter", "Success" if feasible else "Unschedulable", t)
        if not feasible:
            raise fit
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, 1 + len(fit.statuses), 1)
        t = time.perf_counter()
        s = fwk.run_pre_score(state, pod, feasible)
        self._phase(fwk, "PreScore", _status_label(s), t)
        if not s.ok:
            raise _SchedulingError(f"running PreScore plugin {s.plugin!r}: {s.message}")
        t = time.perf_counter()
        index = self.snapshot.index
        rows = np.fromiter((index[n.name] for n in feasible), dtype=np.int64, count=len(feasible))
        totals, s = fwk.run_score_batch(state, pod, self.snapshot.table, rows, nodes)
        self._phase(fwk, "Score", _status_label(s), t)
        if not s.ok:
            raise _SchedulingError(f"running Score plugin {s.plugin!r}: {s.message}")
        if self.extenders:
            scores = await self._extenders_prioritize(
                pod, feasible, [NodeScore(n.name, int(v)) for n, v in zip(feasible, totals)])
            totals = np.array([ns.score for ns in scores], dtype=np.int64)
        top = np.flatnonzero(totals == totals.max())
        chosen = feasible[int(top[self.rng.randrange(len(top))])]
        return ScheduleResult(chosen.name, len(feasible) + len(fit.statuses), len(feasible))

    async def _extenders_filter(self, pod: Pod, feasible: list[NodeInfo], fit: FitError) -> list[NodeInfo]:
        """Each interested extender narrows the feasible nodes (upstream findNodesThatPassExtenders)."""
        for ext in self.extenders:
            if not feasible:
                break
            if not ext.is_interested(pod):
                continue
            try:
                passed, failed, unresolvable = await ext.filter(pod, feasible)
            except ExtenderError as err:
                if ext.ignorable:
                    log.info("ignorable extender %s failed: %s", ext.name, err)
                    continue
                raise _SchedulingError(str(err)) from None
            for node, reason in unresolvable.items():
                previous = fit.statuses.get(node)
                fit.statuses[node] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                            (*(previous.reasons if previous else ()), reason), ext.name)
            for node, reason in failed.items():
                if node in unresolvable:
                    continue
                previous = fit.statuses.get(node)
                fit.statuses[node] = Status(Code.UNSCHEDULABLE, (*(previous.reasons if previous else ()), reason), ext.name)
            fit.unschedulable_plugins.add(ext.name)
            feasible = passed
        return feasible

    async def _extenders_prioritize(self, pod: Pod, nodes: list[NodeInfo], scores: list[NodeScore]) -> list[NodeScore]:
        totals = {ns.name: ns.score for ns in scores}
        for ext in self.extenders:
            if not ext.config.prioritize_verb or not ext.is_interested(pod):
                continue
            try:
                extra = await ext.prioritize(pod, nodes)
            except ExtenderError as err:  # upstream ignores prioritize errors: others still rank
                log.info("extender %s prioritize failed: %s", ext.name, err)
                continue
            for node, score in extra.items():
                if node in totals:
                    totals[node] += score * ext.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return [NodeScore(ns.name, totals[ns.name]) for ns in scores]

    async def close(self) -> None:
        for ext in self.extenders:
            await ext.close()

    def _find_nodes_that_fit(self, fwk: Framework, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                             pre: PreFilterResult | None, fit: FitError) -> list[NodeInfo]:
        """The feasible nodes (at most numFeasibleNodesToFind); the others' reasons go to `fit`."""
        # A pod nominated by preemption tries its nominated node first.
        nominated = pod.status.nominatedNodeName
        if nominated:
            info = self.snapshot.get(nominated)
            if info is not None and info.node is not None:
                status = fwk.run_filter_with_nominated_pods(state, pod, info, self.queue.nominated_for_node(nominated))
                if status.ok:
                    return [info]
        if self.queue.has_nominations():
            return self._find_per_node(fwk, state, pod, nodes, pre, fit)
        index = self.snapshot.index
        if pre is not None and pre.node_names is not None:
            rows = np.array(sorted(index[n] for n in pre.node_names if n in index), dtype=np.int64)
        else:
            rows = np.arange(len(nodes), dtype=np.int64)
        total = len(rows)
        if total == 0:
            return []
        to_find = num_feasible_nodes_to_find(self.percentages[fwk.scheduler_name], total)
        start = self.next_start_node_index % total
        order = np.concatenate((rows[start:], rows[:start]))  # rotate: fairness across cycles
        mask, per_node = fwk.run_filter_batch(state, pod, self.snapshot.table, order, nodes)
        feasible: list[NodeInfo] = []
        processed = total
        for pos in np.flatnonzero(mask):
            info = nodes[order[pos]]
            if per_node:
                status = fwk.run_filter_plugins(per_node, state, pod, info)
                if status.code is Code.ERROR:
                    raise _SchedulingError(f"running Filter plugin {status.plugin!r} on node {info.name!r}: {status.message}")
                if not status.ok:
                    continue
            feasible.append(info)
            if len(feasible) >= to_find:
                processed = int(pos) + 1
                break
        self.next_start_node_index = (start + processed) % total
        if not feasible:
            # Nothing fits: the per-node path gives every node's reasons for the diagnosis.
            for r in order:
                status = fwk.run_filter(state, pod, nodes[r])
                if status.code is Code.ERROR:
                    raise _SchedulingError(f"running Filter plugin {status.plugin!r} on node {nodes[r].name!r}: {status.message}")
                if not status.ok:
                    fit.statuses[nodes[r].name] = status
                    fit.unschedulable_plugins.add(status.plugin)
        return feasible

    def _find_per_node(self, fwk: Framework, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                       pre: PreFilterResult | None, fit: FitError) -> list[NodeInfo]:
        """Node by node, with nominated pods added (used while preemption nominations exist)."""
        candidates = list(nodes)
        if pre is not None and pre.node_names is not None:
            candidates = [n for n in nodes if n.name in pre.node_names]
        total = len(candidates)
        if total == 0:
            return []
        to_find = num_feasible_nodes_to_find(self.percentages[fwk.scheduler_name], total)
        feasible: list[NodeInfo] = []
        start = self.next_start_node_index % total
        processed = 0
        for i in range(total):
            info = candidates[(start + i) % total]
            processed += 1
            status = fwk.run_filter_with_nominated_pods(state, pod, info, self.queue.nominated_for_node(info.name))
            if status.ok:
                feasible.append(info)
                if len(feasible) >= to_find:
                    break
            elif status.code is Code.ERROR:
                raise _SchedulingError(f"running Filter plugin {status.plugin!r} on node {info.name!r}: {status.message}")
            else:
                fit.statuses[info.name] = status
                fit.unschedulable_plugins.add(status.plugin)
        self.next_start_node_index = (start + processed) % total
        return feasible

    def _observe(self, fwk: Framework, result: str, started: float) -> None:
        self.metrics.attempts.labels(result, fwk.scheduler_name).inc()
        self.metrics.attempt_duration.labels(result, fwk.scheduler_name).observe(time.perf_counter() - started)

    async def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo,
                             assumed: Pod, node: str, cycle: int, started: float) -> None:
        uid = str(assumed.metadata.uid)
        with _TRACER.start_as_current_span("binding cycle", attributes=pod_attributes(assumed, node)):
            s = await self._bind(fwk, state, qpi, assumed, node)
        if not s.ok:
            self._observe(fwk, "error" if s.code is Code.ERROR else "unschedulable", started)
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget_pod(uid)
            # The space it held is free again: pods waiting for room may fit now.
            self.queue.move_all_on_event(ClusterEvent(Resource.POD, Action.DELETE))
            if s.code is not Code.ERROR and s.plugin:
                qpi.unschedulable_plugins = {s.plugin}
            self._failure(qpi, cycle, "SchedulerError" if s.code is Code.ERROR else "Unschedulable",
                          s.message or "binding rejected", None, error=s.code is Code.ERROR)
            return
        self.cache.finish_binding(uid)
        self.bound += 1
        self._observe(fwk, "scheduled", started)
        self.metrics.pod_attempts.observe(qpi.attempts)
        log.info("bound pod %s to node %s (attempts %d)", qpi.key, node, qpi.attempts)
        fwk.run_post_bind(state, assumed, node)
        self.recorder.scheduled(assumed, node)

    async def _bind(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: Pod, node: str) -> Status:
        """Permit wait, PreBind, then Bind (an extender's or the framework's)."""
        try:
            s = await fwk.wait_on_permit(assumed)
            if s.ok:
                # Real spans here (not after the fact): these points make API calls, whose
                # spans belong under them.
                with _TRACER.start_as_current_span("PreBind") as span:
                    t = time.perf_counter()
                    s = await fwk.run_pre_bind(state, assumed, node)
                    self._phase(fwk, "PreBind", _status_label(s), t, span=span)
            if s.ok:
                with _TRACER.start_as_current_span("Bind") as span:
                    t = time.perf_counter()
                    binder = next((e for e in self.extenders if e.is_binder() and e.is_interested(assumed)), None)
                    if binder is not None:
                        try:
                            await binder.bind(assumed, node)
                        except ExtenderError as err:
                            s = Status.as_error(err)
                    else:
                        s = await fwk.run_bind(state, assumed, node)
                    self._phase(fwk, "Bind", _status_label(s), t, span=span)
        except Exception as err:  # a plugin raised: treat as a binding error
            log.exception("binding pod %s to %s failed", qpi.key, node)
            s = Status.as_error(err)
        return s

    def _failure(self, qpi: QueuedPodInfo, cycle: int, reason: str, message: str,
                 nominated: str | None, *, error: bool = False) -> None:
        log.info("pod %s not scheduled (%s): %s", qpi.key, reason, message)
        if error:
            qpi.unschedulable_plugins = set()
        self.queue.add_unschedulable(qpi, cycle, error=error)
        self.recorder.failed(qpi.pod, reason, message, nominated)

    async def wait_for_bindings(self) -> None:
        while self._binding_tasks:
            await asyncio.gather(*list(self._binding_tasks), return_exceptions=True)

    async def housekeeping(self, interval: float = 1.0) -> None:
        """Periodic work: expire assumed pods, flush backoffQ and long-unschedulable pods."""
        last_leftover = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            self.cache.cleanup_expired()
            self.queue.flush_backoff_completed()
            if time.monotonic() - last_leftover >= 30:
                self.queue.flush_unschedulable_leftover()
                last_leftover = time.monotonic()


class _SchedulingError(Exception):
    pass


def _status_label(s: Status) -> str:
    """A status code as the extension point metric labels it (Success, Unschedulable, ...)."""
    return "".join(word.title() for word in s.code.name.split("_"))


def _with_node(pod: Pod, node: str) -> Pod:
    assumed = type(pod)()
    assumed.CopyFrom(pod)
    assumed.spec.nodeName = node
    return assumed


def _node_changes(old: Node, new: Node) -> list[ClusterEvent]:
    """Which scheduling-relevant properties of a node changed (upstream nodeSchedulingPropertiesChange)."""
    events = []
    if dict(old.status.allocatable) != dict(new.status.allocatable):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE))
    if dict(old.metadata.labels) != dict(new.metadata.labels):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL))
    if (old.spec.unschedulable != new.spec.unschedulable
            or [t.SerializeToString() for t in old.spec.taints] != [t.SerializeToString() for t in new.spec.taints]):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT))
    return events


"""One pod's way through the framework (upstream schedule_one.go).

The scheduling cycle runs one pod at a time: PreFilter, Filter (the plugins that can judge
every node at once as arrays, the others node by node), the extenders, PreScore, Score,
then Reserve and Permit on the chosen node, which the pod is assumed to be on from then
on. The binding cycle (Permit's wait, PreBind, Bind, PostBind) continues in a task of its
own, so the next pod's cycle does not wait for the API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
from opentelemetry import trace

from kubeling.telemetry import pod_attributes, pod_context, span_if_tracing, tracer
from protos.kubeling.v1.core_pb2 import Pod
from scheduler.cache import Cache, Snapshot
from scheduler.extender import (
    ExtenderError,
    HTTPExtender,
    binder_for,
    find_nodes_that_pass_extenders,
    prioritize_with_extenders,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    Action,
    ClusterEvent,
    FilterPlugin,
    NodeScore,
    PreFilterResult,
    Recorder,
    Resource,
)
from scheduler.framework.results import CycleResults, RecordOptions, on_pod, verdict, wants_record
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NodeInfo, QueuedPodInfo
from scheduler.metrics import SchedulerMetrics
from scheduler.queue import SchedulingQueue

__all__ = ["FitError", "NO_NODES", "ScheduleOne", "ScheduleResult", "SchedulingError", "num_feasible_nodes_to_find"]

log = logging.getLogger("scheduler.scheduler")
_TRACER = tracer("scheduler.scheduler")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES = "NoNodesAvailable"  # pseudo plugin: waits for a node to be added
_MIN_CHUNK = 256  # nodes the array filters judge at a time, at least


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes are enough (upstream's adaptive default: 50 - nodes/125 %)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


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


class NodeRows(Sequence[NodeInfo]):
    """The snapshot's nodes at `rows`, as a sequence made on demand: the feasible nodes of a
    cycle are row numbers in the numpy columns; plugins that look at NodeInfos get them
    one by one, and most never do."""

    __slots__ = ("_nodes", "_rows")

    def __init__(self, nodes: Sequence[NodeInfo], rows: np.ndarray) -> None:
        self._nodes = nodes
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[NodeInfo]: ...

    def __getitem__(self, index: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(index, slice):
            return NodeRows(self._nodes, self._rows[index])
        return self._nodes[int(self._rows[index])]

    def __iter__(self) -> Iterator[NodeInfo]:
        nodes = self._nodes
        return (nodes[r] for r in self._rows.tolist())


class SchedulingError(Exception):
    """A plugin or an extender failed (not "unschedulable"): the pod is retried with back-off."""


class ScheduleOne:
    """The Scheduler's cycles (a mixin: the Scheduler owns the state below)."""

    frameworks: dict[str, Framework]
    percentages: dict[str, int]
    record_options: dict[str, RecordOptions]
    cache: Cache
    snapshot: Snapshot
    queue: SchedulingQueue
    extenders: list[HTTPExtender]
    metrics: SchedulerMetrics
    _recorder: Recorder
    rng: random.Random
    next_start_node_index: int
    bound: int
    _binding_tasks: set[asyncio.Task[None]]

    async def schedule_one(self) -> bool:
        """One scheduling cycle; the binding cycle continues in the background."""
        qpi = await self.queue.pop()
        if qpi is None:
            return False
        # In the pod's own trace (started by its Create); the binding cycle's task and
        # its Bind call inherit this span as their parent.
        with span_if_tracing(_TRACER, "scheduling cycle", parent=lambda: pod_context(qpi.pod.metadata.annotations),
                             attributes=lambda: pod_attributes(qpi.pod)):
            await self._scheduling_cycle(qpi)
        return True

    async def _scheduling_cycle(self, qpi: QueuedPodInfo) -> None:
        pod = qpi.pod
        fwk = self.frameworks.get(pod.spec.schedulerName)
        if fwk is None or pod.metadata.HasField("deletionTimestamp") or self.cache.is_assumed(str(pod.metadata.uid)):
            return
        cycle = self.queue.scheduling_cycle
        state = CycleState(qpi.pod_info)
        # Recorded when the profile or the pod asks (on the pod), or for the trace (span events).
        options = self.record_options.get(fwk.scheduler_name) or RecordOptions()
        asked = wants_record(options, pod)
        if asked or trace.get_current_span().is_recording():
            state.results = CycleResults(qpi.attempts, options, on_pod=asked)
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
                if state.results is not None:
                    state.results.post_filter.update(nominatedNode=nominated or "", status=verdict(s))
            qpi.unschedulable_plugins = fit.unschedulable_plugins
            self._failure(qpi, cycle, "Unschedulable", str(fit), nominated, results=state.results)
            return
        except SchedulingError as err:
            self._observe(fwk, "error", started)
            self._failure(qpi, cycle, "SchedulerError", str(err), None, error=True, results=state.results)
            return
        if state.results is not None:
            state.results.selected = result.node
            state.results.selected_row = self.snapshot.index.get(result.node, -1)

        # Assume: the next cycle sees the pod on its node before the binding lands.
        assumed = _with_node(pod, result.node)
        assumed_info = dataclasses.replace(qpi.pod_info, pod=assumed)  # all it derived holds: only nodeName moved
        self.cache.assume_pod(assumed_info, result.node)
        for point, run in (("Reserve", fwk.run_reserve), ("Permit", fwk.run_permit)):
            t = time.perf_counter()
            s = run(state, assumed, result.node)
            self._phase(fwk, point, _status_label(s), t)
            if not s.ok and not (point == "Permit" and s.code is Code.WAIT):
                fwk.run_unreserve(state, assumed, result.node)
                self.cache.forget_pod(assumed_info.uid)
                if state.results is not None:
                    state.results.selected, state.results.selected_row = "", -1
                self._failure(qpi, cycle, "SchedulerError" if s.code is Code.ERROR else "Unschedulable",
                              s.message, None, error=s.code is Code.ERROR, results=state.results)
                return
        span = trace.get_current_span()
        span.set_attribute("k8s.node.name", result.node)
        _span_events(span, state.results)
        task = asyncio.create_task(self._binding_cycle(fwk, state, qpi, assumed, result.node, cycle, started))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    async def schedule_pod(self, fwk: Framework, state: CycleState, pod: Pod) -> ScheduleResult:
        """The node for `pod` (FitError when none fits, SchedulingError when a plugin failed)."""
        self.cache.update_snapshot(self.snapshot)
        nodes = self.snapshot.node_infos()
        if not nodes:
            raise FitError(pod, 0, unschedulable_plugins={NO_NODES},
                           pre_filter_msg="no nodes available to schedule pods")
        fit = FitError(pod, len(nodes))
        t = time.perf_counter()
        pre, s = fwk.run_pre_filter(state, pod, nodes)
        self._phase(fwk, "PreFilter", _status_label(s), t)
        if state.results is not None:
            state.results.filter_order = [p.name for p in fwk.filter if p.name not in state.skip_filter]
        if not s.ok:
            if not s.is_rejected:
                raise SchedulingError(f"running PreFilter plugin {s.plugin!r}: {s.message}")
            fit.statuses = {n.name: s for n in nodes}
            fit.pre_filter_msg = s.message
            fit.unschedulable_plugins.add(s.plugin)
            raise fit
        t = time.perf_counter()
        rows = self._find_nodes_that_fit(fwk, state, pod, nodes, pre, fit)
        feasible: Sequence[NodeInfo] = NodeRows(nodes, rows)
        if self.extenders and len(rows):
            try:
                passed = await find_nodes_that_pass_extenders(self.extenders, pod, list(feasible), fit.statuses,
                                                              fit.unschedulable_plugins)
            except ExtenderError as err:
                raise SchedulingError(str(err)) from None
            index = self.snapshot.index
            rows = np.fromiter((index[n.name] for n in passed), dtype=np.int64, count=len(passed))
            feasible = NodeRows(nodes, rows)
            if state.results is not None:  # what the extenders turned down
                kept = {n.name for n in passed}
                state.results.passed = rows
                for name, status in fit.statuses.items():
                    if name not in kept:
                        state.results.rejected[name] = status
        self._phase(fwk, "Filter", "Success" if len(rows) else "Unschedulable", t)
        if not len(rows):
            raise fit
        if len(rows) == 1:
            return ScheduleResult(feasible[0].name, 1 + len(fit.statuses), 1)
        t = time.perf_counter()
        s = fwk.run_pre_score(state, pod, feasible)
        self._phase(fwk, "PreScore", _status_label(s), t)
        if not s.ok:
            raise SchedulingError(f"running PreScore plugin {s.plugin!r}: {s.message}")
        t = time.perf_counter()
        totals, s = fwk.run_score_batch(state, pod, self.snapshot.table, rows, nodes)
        self._phase(fwk, "Score", _status_label(s), t)
        if not s.ok:
            raise SchedulingError(f"running Score plugin {s.plugin!r}: {s.message}")
        if self.extenders:
            plugin_scores = [NodeScore(n.name, int(v)) for n, v in zip(feasible, totals, strict=True)]
            scores = await prioritize_with_extenders(self.extenders, pod, list(feasible), plugin_scores)
            totals = np.array([ns.score for ns in scores], dtype=np.int64)
        if state.results is not None:
            state.results.totals = totals
        top = np.flatnonzero(totals == totals.max())
        chosen = feasible[int(top[self.rng.randrange(len(top))])]
        return ScheduleResult(chosen.name, len(rows) + len(fit.statuses), len(rows))

    def _find_nodes_that_fit(self, fwk: Framework, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                             pre: PreFilterResult | None, fit: FitError) -> np.ndarray:
        """The rows (in the snapshot's node list) of the feasible nodes: at most
        numFeasibleNodesToFind, from where the last cycle stopped; when none is, every
        node's reasons go to `fit`.

        One path: the filter plugins that can judge all nodes as arrays do so first; the
        others run node by node on the nodes that passed, and a node with nominated pods
        is judged as if they were on it (and without them), as upstream's
        RunFilterPluginsWithNominatedPods."""
        # A pod nominated by preemption tries its nominated node first.
        nominated = pod.status.nominatedNodeName
        if nominated:
            info = self.snapshot.get(nominated)
            if info is not None and info.node is not None:
                status = fwk.run_filter_with_nominated_pods(state, pod, info, self.queue.nominated_for_node(nominated))
                if status.ok:
                    only = np.array([self.snapshot.index[nominated]], dtype=np.int64)
                    if state.results is not None:
                        state.results.nodes, state.results.passed = self.snapshot.node_list, only
                    return only
        index = self.snapshot.index
        if pre is not None and pre.node_names is not None:
            rows = np.array(sorted(index[n] for n in pre.node_names if n in index), dtype=np.int64)
        else:
            rows = np.arange(len(nodes), dtype=np.int64)
        total = len(rows)
        if total == 0:
            return rows
        to_find = num_feasible_nodes_to_find(self.percentages[fwk.scheduler_name], total)
        start = self.next_start_node_index % total
        order = np.concatenate((rows[start:], rows[:start]))  # rotate: fairness across cycles
        nominations = self.queue.has_nominations()
        # The array filters run over chunks of the rotated order, a little more than what is
        # still wanted each time: the search stops, as upstream's, once to_find nodes passed.
        kept: list[np.ndarray] = []
        found, processed, offset = 0, total, 0
        while offset < total and found < to_find:
            chunk = order[offset:offset + max(2 * (to_find - found), _MIN_CHUNK)]
            mask, per_node = fwk.run_filter_batch(state, pod, self.snapshot.table, chunk, nodes)  # skips left out
            passed = np.flatnonzero(mask)
            if per_node or nominations:
                ok: list[int] = []
                for pos in passed.tolist():
                    if self._filter_node(fwk, state, pod, nodes[chunk[pos]], per_node, nominations).ok:
                        ok.append(pos)
                        if found + len(ok) >= to_find:
                            break
                passed = np.array(ok, dtype=np.int64)
            passed = passed[:to_find - found] + offset
            kept.append(passed)
            found += len(passed)
            if found >= to_find:
                processed = int(passed[-1]) + 1
            offset += len(chunk)
        chosen = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
        self.next_start_node_index = (start + processed) % total
        feasible = order[chosen]
        plugins = [p for p in fwk.filter if p.name not in state.skip_filter]
        if not len(feasible):
            # Nothing fits: every node's reasons (all its filters, one by one) for the diagnosis.
            for r in order:
                status = self._filter_node(fwk, state, pod, nodes[r], plugins, nominations)
                if not status.ok:
                    fit.statuses[nodes[r].name] = status
                    fit.unschedulable_plugins.update(status.failed_plugins)
        results = state.results
        if results is not None:
            # Every node the search looked at: the ones that passed, and the others as the
            # per-node chain judges them (the batch masks say only that a node failed, the
            # chain says which plugin and why).
            results.nodes, results.passed = nodes, feasible
            looked = order[:processed]
            failed = np.setdiff1d(looked, feasible, assume_unique=True) if len(looked) > len(feasible) else ()
            for r in failed:
                name = nodes[int(r)].name
                results.rejected[name] = fit.statuses.get(name) or self._filter_node(
                    fwk, state, pod, nodes[int(r)], plugins, nominations)
        return feasible

    def _filter_node(self, fwk: Framework, state: CycleState, pod: Pod, info: NodeInfo,
                     plugins: Sequence[FilterPlugin], nominations: bool) -> Status:
        """`plugins` on one node; every filter plugin, with and without them, when pods are
        nominated to it. SchedulingError when a plugin fails."""
        nominated = self.queue.nominated_for_node(info.name) if nominations else []
        if nominated:
            status = fwk.run_filter_with_nominated_pods(state, pod, info, nominated)
        else:
            status = fwk.run_filter_plugins(plugins, state, pod, info)
        if status.code is Code.ERROR:
            raise SchedulingError(f"running Filter plugin {status.plugin!r} on node {info.name!r}: {status.message}")
        return status

    async def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo,
                             assumed: Pod, node: str, cycle: int, started: float) -> None:
        uid = str(assumed.metadata.uid)
        with span_if_tracing(_TRACER, "binding cycle", attributes=lambda: pod_attributes(assumed, node)):
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
        self._recorder.scheduled(assumed, node)

    async def _bind(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: Pod, node: str) -> Status:
        """Permit wait, PreBind, then Bind (an extender's or the framework's)."""
        try:
            s = await fwk.wait_on_permit(assumed)
            if s.ok:
                # Real spans here (not after the fact): these points make API calls, whose
                # spans belong under them.
                with span_if_tracing(_TRACER, "PreBind") as span:
                    t = time.perf_counter()
                    s = await fwk.run_pre_bind(state, assumed, node)
                    self._phase(fwk, "PreBind", _status_label(s), t, span=span)
            if s.ok:
                with span_if_tracing(_TRACER, "Bind") as span:
                    t = time.perf_counter()
                    binder = binder_for(self.extenders, assumed)
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
                 nominated: str | None, *, error: bool = False, results: CycleResults | None = None) -> None:
        log.info("pod %s not scheduled (%s): %s", qpi.key, reason, message)
        if error:
            qpi.unschedulable_plugins = set()
        self.queue.add_unschedulable(qpi, cycle, error=error)
        _span_events(trace.get_current_span(), results)
        self._recorder.failed(qpi.pod, reason, message, nominated, on_pod(results))

    def _phase(self, fwk: Framework, point: str, status: str, started: float, *,
               span: trace.Span | None = None) -> None:
        """Record one extension point: its duration metric and, inside a recorded trace, its
        span: `span` when the caller opened one, else one made after the fact (so that the
        untraced path costs only this check)."""
        elapsed = time.perf_counter() - started
        self.metrics.observe_extension_point(point, status, fwk.scheduler_name, elapsed)
        if span is not None:
            span.set_attributes({"scheduler.status": status, "scheduler.profile": fwk.scheduler_name})
        elif trace.get_current_span().is_recording():
            end = time.time_ns()
            _TRACER.start_span(point, start_time=end - int(elapsed * 1e9), attributes={
                "scheduler.status": status, "scheduler.profile": fwk.scheduler_name}).end(end_time=end)

    def _observe(self, fwk: Framework, result: str, started: float) -> None:
        self.metrics.observe_attempt(result, fwk.scheduler_name, time.perf_counter() - started)


# A status code as the extension point metric labels it (Success, Unschedulable, ...).
_STATUS_LABELS = {code: "".join(word.title() for word in code.name.split("_")) for code in Code}


def _status_label(s: Status) -> str:
    return _STATUS_LABELS[s.code]


def _span_events(span: trace.Span, results: CycleResults | None) -> None:
    """The attempt's results as events of the scheduling-cycle span (one per result kind)."""
    if results is not None and span.is_recording():
        for key, value in results.annotations().items():
            span.add_event(key, {"value": value})


def _with_node(pod: Pod, node: str) -> Pod:
    assumed = Pod()
    assumed.CopyFrom(pod)
    assumed.spec.nodeName = node
    return assumed

"""The HorizontalPodAutoscaler controller, as upstream's pkg/controller/podautoscaler: every
sync period (15 s) each HPA reads its target's scale subresource (a built-in resource's,
or a custom resource's by its definition: controllers/scaletargets.py); a target out of
min/maxReplicas is brought into range first; then the pods its selector
picks and their metrics (the apiserver's metrics.k8s.io PodMetrics, from the kubelets),
proposes a replica count per metric (the largest wins), stabilizes and rate-limits it by
the HPA's behavior (upstream's defaults when it has none), clamps it to min/maxReplicas,
and writes it through the scale subresource. Status: current and desired replicas,
currentMetrics, lastScaleTime, and the AbleToScale, ScalingActive and ScalingLimited
conditions with upstream's reasons and messages; events SuccessfulRescale,
FailedGetScale, FailedGetResourceMetric, FailedComputeMetricsReplicas.

Resource and ContainerResource metrics are computed; Pods, Object and External ones need
a custom or external metrics API, which kubeling does not serve: they make the HPA
ScalingActive False (FailedGetPodsMetric and the like), as upstream without an adapter."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from controllers.replicacalculator import (
    TOLERANCE,
    MetricError,
    Scaler,
    Usage,
    default_rules,
    millis,
    resource_replicas,
)
from controllers.scaletargets import ScaleTarget, resolve
from kubeling import errors
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING, EventRecorder
from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from kubeling.quantity import Quantity, QuantityError, parse_quantity
from kubeling.scheme import Scheme
from kubeling.selectors import LabelSelector, SelectorError
from kubeling.timestamps import now as _now
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import autoscaling_pb2 as pb
from protos.kubeling.v1 import core_pb2

__all__ = ["HorizontalController", "SYNC_PERIOD"]

log = logging.getLogger(__name__)

API_VERSION, KIND = "autoscaling/v2", "HorizontalPodAutoscaler"
SYNC_PERIOD = 15.0  # upstream's --horizontal-pod-autoscaler-sync-period
_CUSTOM_METRICS = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric",
                   "External": "FailedGetExternalMetric"}


@dataclass
class _Proposal:
    replicas: int
    metric: str  # what upstream names it in events: "cpu resource utilization (percentage of request)"
    status: pb.MetricStatus


def _tolerance(behavior: pb.HorizontalPodAutoscalerBehavior) -> tuple[float, float]:
    """(down, up): the behavior's tolerances (upstream's HPAConfigurableTolerance), else 0.1."""
    out = []
    for rules in (behavior.scaleDown, behavior.scaleUp):
        try:
            out.append(float(parse_quantity(rules.tolerance).value) if rules.HasField("tolerance") else TOLERANCE)
        except QuantityError:
            out.append(TOLERANCE)
    return out[0], out[1]


def _describe(metric: pb.MetricSpec) -> str:
    source = metric.resource if metric.type == "Resource" else metric.containerResource
    what = f"{source.name} resource" if metric.type == "Resource" else \
        f"{source.name} container resource"
    return f"{what} utilization (percentage of request)" if source.target.type == "Utilization" else what


class HorizontalController:
    def __init__(self, client: Client, hpas: Informer[pb.HorizontalPodAutoscaler], pods: Informer[core_pb2.Pod],
                 recorder: EventRecorder, *, sync_period: float = SYNC_PERIOD, workers: int = 2,
                 scheme: Scheme | None = None) -> None:
        self.client = client
        self.hpas = hpas
        self.pods = pods
        self.recorder = recorder
        self.sync_period = sync_period
        self.scheme = scheme or Scheme.builtin()
        self.scalers: dict[str, Scaler] = {}
        self.now: Callable[[], float] = time.time  # a test may move the clock
        self.queue = WorkQueue("horizontalpodautoscaler")
        self.workers = Workers(self.queue, self.sync, workers)
        hpas.add_handler(on_add=self._enqueue, on_update=self._updated, on_delete=self._enqueue)

    def _enqueue(self, hpa: pb.HorizontalPodAutoscaler) -> None:
        self.queue.add(object_key(hpa))

    def _updated(self, old: pb.HorizontalPodAutoscaler, new: pb.HorizontalPodAutoscaler) -> None:
        # its spec changed; a status write (ours) waits for the next period, as upstream's resync
        if old.metadata.generation != new.metadata.generation:
            self._enqueue(new)

    def _event(self, hpa: pb.HorizontalPodAutoscaler, kind: str, reason: str, message: str) -> None:
        self.recorder.object_event(hpa, API_VERSION, KIND, kind, reason, message)

    # ---------------------------------------------------------------- sync

    async def sync(self, key: str) -> None:
        hpa = self.hpas.store.get(key)
        if hpa is None:
            self.scalers.pop(key, None)
            return
        try:
            await self._reconcile(key, hpa)
        finally:
            if self.hpas.store.get(key) is not None:
                self.queue.add_after(key, self.sync_period)  # upstream resyncs every HPA each period

    async def _reconcile(self, key: str, hpa: pb.HorizontalPodAutoscaler) -> None:
        status = pb.HorizontalPodAutoscalerStatus()
        status.CopyFrom(hpa.status)
        status.observedGeneration = hpa.metadata.generation
        ref = hpa.spec.scaleTargetRef
        found = await self._scale(hpa, status)
        if found is None:
            await self._write(hpa, status)
            return
        target, scale = found, found.scale
        current = scale.spec.replicas
        status.currentReplicas = current
        spec = hpa.spec
        low = spec.minReplicas if spec.HasField("minReplicas") else 1
        now = self.now()
        self._condition(status, "AbleToScale", "True", "SucceededGetScale",
                        "the HPA controller was able to get the target's current scale")
        behavior = spec.behavior if spec.HasField("behavior") else None
        up = behavior.scaleUp if behavior is not None and behavior.HasField("scaleUp") else default_rules(True)
        down = behavior.scaleDown if behavior is not None and behavior.HasField("scaleDown") else default_rules(False)
        scaler = self.scalers.setdefault(key, Scaler())
        if current == 0 and low != 0:
            desired, reason = 0, ""
            self._condition(status, "ScalingActive", "False", "ScalingDisabled",
                            "scaling is disabled since the replica count of the target is zero")
            del status.currentMetrics[:]
        elif current > spec.maxReplicas:  # upstream: brought into range before any metric
            desired, reason = spec.maxReplicas, "Current number of replicas above Spec.MaxReplicas"
        elif current < low:
            desired, reason = low, "Current number of replicas below Spec.MinReplicas"
        else:
            proposal = await self._propose(hpa, scale, current, status)
            if proposal is None:
                await self._write(hpa, status)
                return
            stabilized = scaler.stabilize(current, proposal.replicas, up, down, now)
            desired, limited = scaler.limit(current, stabilized, low, spec.maxReplicas, up, down, now)
            self._condition(status, "ScalingLimited", limited.status, limited.reason, limited.message)
            reason = f"{proposal.metric} above target" if desired > current else "All metrics below target"
        if desired != current:
            try:
                await target.write(desired)
            except errors.ApiError as err:
                self._condition(status, "AbleToScale", "False", "FailedUpdateScale",
                                f"the HPA controller was unable to update the target scale: {err.message}")
                self._event(hpa, WARNING, "FailedRescale", f"New size: {desired}; reason: {reason}; error: "
                                                           f"{err.message}")
                await self._write(hpa, status)
                return
            keep = max((p.periodSeconds for p in (*up.policies, *down.policies)), default=0)
            scaler.record(desired - current, now, keep)
            status.lastScaleTime.CopyFrom(_now())
            self._condition(status, "AbleToScale", "True", "SucceededRescale",
                            f"the HPA controller was able to update the target scale to {desired}")
            self._event(hpa, NORMAL, "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
            log.info("hpa %s: scaled %s/%s from %d to %d (%s)", key, ref.kind, ref.name, current, desired, reason)
        elif current != 0:
            self._condition(status, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
        status.desiredReplicas = desired
        await self._write(hpa, status)

    async def _scale(self, hpa: pb.HorizontalPodAutoscaler, status: pb.HorizontalPodAutoscalerStatus) -> \
            ScaleTarget | None:
        """The target's scale (None: the condition and event say why not)."""
        try:
            return await resolve(self.client, self.scheme, hpa.spec.scaleTargetRef, hpa.metadata.namespace)
        except errors.ApiError as err:
            message = f"the HPA controller was unable to get the target's current scale: {err.message}"
            self._condition(status, "AbleToScale", "False", "FailedGetScale", message)
            self._event(hpa, WARNING, "FailedGetScale", err.message)
            return None

    async def _propose(self, hpa: pb.HorizontalPodAutoscaler, scale: pb.Scale, current: int,
                       status: pb.HorizontalPodAutoscalerStatus) -> _Proposal | None:
        """Every metric's proposal; the largest (upstream: a metric that fails makes the HPA
        ScalingActive False, unless another one proposes scaling up)."""
        try:
            selector = LabelSelector.parse(scale.status.selector)
        except SelectorError as err:
            self._condition(status, "ScalingActive", "False", "InvalidSelector", str(err))
            return None
        if not scale.status.selector:
            message = "selector is required"
            self._condition(status, "ScalingActive", "False", "InvalidSelector", message)
            self._event(hpa, WARNING, "SelectorRequired", message)
            return None
        namespace = hpa.metadata.namespace
        pods = [p for p in self.pods.store.by_index(INDEX_NAMESPACE, namespace) if selector.matches(p.metadata.labels)]
        usage: dict[tuple[str, str], dict[str, Usage]] = {}
        best: _Proposal | None = None
        failure: tuple[str, str] | None = None
        statuses = []
        for metric in hpa.spec.metrics:
            if metric.type in _CUSTOM_METRICS:
                reason = _CUSTOM_METRICS[metric.type]
                failure = (reason, f"the HPA was unable to compute the replica count: unable to get metric: no "
                                   f"{metric.type.lower()} metrics API is served here")
                self._event(hpa, WARNING, reason, failure[1])
                continue
            source = metric.resource if metric.type == "Resource" else metric.containerResource
            container = metric.containerResource.container if metric.type == "ContainerResource" else ""
            try:
                measured = usage.get((source.name, container))
                if measured is None:
                    measured = usage[(source.name, container)] = await self._usage(namespace, selector, source.name,
                                                                                   container)
                replicas, utilization, raw = resource_replicas(current, pods, measured, source.target, source.name,
                                                               container, now=self.now(),
                                                               tolerance=_tolerance(hpa.spec.behavior))
            except (MetricError, errors.ApiError) as err:
                text = str(err) if isinstance(err, MetricError) else err.message
                reason = "FailedGetResourceMetric" if metric.type == "Resource" else \
                    "FailedGetContainerResourceMetric"
                failure = (reason, f"the HPA was unable to compute the replica count: failed to get {source.name} "
                                   f"utilization: {text}")
                self._event(hpa, WARNING, reason, failure[1])
                continue
            value = pb.MetricValueStatus(averageValue=str(Quantity.from_milli(raw)))  # upstream: NewMilliQuantity
            if utilization is not None:
                value.averageUtilization = utilization
            if metric.type == "Resource":
                shown = pb.MetricStatus(type="Resource", resource=pb.ResourceMetricStatus(name=source.name,
                                                                                            current=value))
            else:
                shown = pb.MetricStatus(type="ContainerResource", containerResource=pb.ContainerResourceMetricStatus(
                    name=source.name, container=container, current=value))
            statuses.append(shown)
            if best is None or replicas > best.replicas:
                best = _Proposal(replicas, _describe(metric), shown)
        del status.currentMetrics[:]
        status.currentMetrics.extend(statuses)
        if best is None or (failure is not None and best.replicas <= current):
            reason, message = failure or ("FailedGetResourceMetric", "no metrics")
            self._condition(status, "ScalingActive", "False", reason, message)
            return None
        self._condition(status, "ScalingActive", "True", "ValidMetricFound",
                        f"the HPA was able to successfully calculate a replica count from {best.metric}")
        return best

    async def _usage(self, namespace: str, selector: LabelSelector, resource: str, container: str) -> \
            dict[str, Usage]:
        """Each pod's usage of the resource (milli-units), summed over its containers or the
        one named (upstream's GetResourceMetric)."""
        out: dict[str, Usage] = {}
        try:
            items = await self.client.pod_metrics(namespace, label_selector=str(selector))
        except errors.ApiError as err:  # no metrics server behind the aggregator, or it failed
            raise MetricError(f"unable to get metrics for resource {resource}: unable to fetch metrics from resource "
                              f"metrics API: {err.message}") from None
        for item in items:
            containers = [c for c in item.containers if not container or c.name == container]
            if container and not containers:
                continue
            try:
                total = sum(millis(c.usage.get(resource, "0")) for c in containers)
            except MetricError:
                continue
            window = float(item.window.rstrip("s") or 0) if item.window.endswith("s") else 0.0
            out[item.metadata.name] = Usage(total, item.timestamp.seconds, window)
        if not out:
            raise MetricError(f"unable to get metrics for resource {resource}: no metrics returned from resource "
                              "metrics API")
        return out

    @staticmethod
    def _condition(status: pb.HorizontalPodAutoscalerStatus, kind: str, state: str, reason: str,
                   message: str) -> None:
        cond = next((c for c in status.conditions if c.type == kind), None)
        if cond is None:
            cond = status.conditions.add(type=kind)
        if cond.status != state:
            cond.lastTransitionTime.CopyFrom(_now())
        cond.status, cond.reason, cond.message = state, reason, message

    async def _write(self, hpa: pb.HorizontalPodAutoscaler, status: pb.HorizontalPodAutoscalerStatus) -> None:
        if status == hpa.status:
            return
        updated = pb.HorizontalPodAutoscaler()
        updated.CopyFrom(hpa)
        updated.status.CopyFrom(status)
        try:
            await self.client.horizontalpodautoscalers.update_status(updated)
        except (errors.NotFound, errors.Conflict):
            pass  # gone, or changed: the next sync writes it

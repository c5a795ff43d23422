"""The pod status the kubelet reports (kubelet_pods.go's generateAPIPodStatus, getPhase,
the status package's condition generators) and the status manager that writes it to
the apiserver only when it changed, retrying on conflicts."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.timestamp_pb2 import Timestamp

from kubelet.actions import is_sidecar
from kubelet.podconfig import ephemeral_as_container
from kubelet.qos import qos_class
from kubelet.runtime import CREATED, EXITED, RUNNING, ContainerInfo, PodRuntimeStatus
from kubelet.termination import limit_messages
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["StatusInputs", "generate_pod_status", "StatusManager", "TERMINAL", "qos_class"]

log = logging.getLogger(__name__)

TERMINAL = ("Succeeded", "Failed")


@dataclass
class StatusInputs:
    """What the status needs besides the runtime's containers."""

    node_ip: str
    runtime_name: str = "kubeling"
    ready: dict[str, bool] = field(default_factory=dict)  # container id -> readiness probe verdict
    started: dict[str, bool] = field(default_factory=dict)  # container id -> startup probe verdict
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)  # container name -> (reason, message)
    terminal: bool = False  # the pod was stopped for good (deleted, or done): phase from what is left
    resize: tuple[str, str, str] | None = None  # a resize condition (type, reason, message), when one holds


def _ts(ns: int) -> Timestamp:
    t = Timestamp()
    if ns:
        t.FromNanoseconds(ns - ns % 1_000_000_000)  # the API's times are whole seconds
    return t


def _now() -> Timestamp:
    return _ts(time.time_ns())


def _terminated(info: ContainerInfo, runtime_name: str) -> core_pb2.ContainerStateTerminated:
    reason = info.reason or ("Completed" if info.exit_code == 0 else "Error")
    return core_pb2.ContainerStateTerminated(
        exitCode=info.exit_code, reason=reason, message=info.message, startedAt=_ts(info.started_at),
        finishedAt=_ts(info.finished_at), containerID=f"{runtime_name}://{info.id}")


def _container_status(pod: Pod, container: core_pb2.Container, runtime: PodRuntimeStatus, inputs: StatusInputs,
                      init: bool, old: core_pb2.ContainerStatus | None,
                      default_waiting: str) -> core_pb2.ContainerStatus:
    instances = runtime.by_name(container.name, init)
    status = core_pb2.ContainerStatus(name=container.name, image=container.image, ready=False, started=False)
    latest = instances[0] if instances else None
    previous = next((i for i in instances[1:] if i.state == EXITED), None)
    if latest is None:
        if old is not None and old.state.HasField("terminated") and inputs.terminal:
            return old  # removed from the runtime since: keep what was last known
        status.state.waiting.reason = default_waiting
        if old is not None:
            status.restartCount = old.restartCount
            status.lastState.CopyFrom(old.lastState)
    else:
        status.containerID = f"{inputs.runtime_name}://{latest.id}"
        status.imageID = latest.image_ref
        status.restartCount = latest.restart_count
        if previous is not None:
            status.lastState.terminated.CopyFrom(_terminated(previous, inputs.runtime_name))
        if latest.state == RUNNING:
            status.state.running.startedAt.CopyFrom(_ts(latest.started_at))
            # what the node admitted and the runtime applies (in-place resize): the spec's,
            # unless a resize is pending, when the last reported stay
            if inputs.resize is None or old is None:
                status.allocatedResources.update(container.resources.requests)
                status.resources.CopyFrom(container.resources)
            else:
                status.allocatedResources.update(old.allocatedResources)
                status.resources.CopyFrom(old.resources)
            status.started = inputs.started.get(latest.id, not container.HasField("startupProbe"))
            has_readiness = container.HasField("readinessProbe")
            status.ready = bool(status.started) and inputs.ready.get(latest.id, not has_readiness)
        elif latest.state == EXITED:
            status.state.terminated.CopyFrom(_terminated(latest, inputs.runtime_name))
        elif latest.state == CREATED:
            status.state.waiting.reason = "ContainerCreating"
        else:
            status.state.waiting.reason = "ContainerStatusUnknown"
    reason = inputs.waiting.get(container.name)
    if reason is not None and not status.state.HasField("running") and not inputs.terminal:
        # A restart being held back (CrashLoopBackOff) or a start that failed: the last
        # run, if any, becomes lastState.
        if status.state.HasField("terminated"):
            status.lastState.terminated.CopyFrom(status.state.terminated)
        status.state.ClearField("terminated")
        status.state.waiting.reason, status.state.waiting.message = reason
    return status


def _phase(pod: Pod, inits: list[core_pb2.ContainerStatus], apps: list[core_pb2.ContainerStatus],
           terminal: bool) -> str:
    spec = pod.spec
    pending_init = failed_init = 0
    sidecar = {c.name for c in spec.initContainers if is_sidecar(c)}
    for s in inits:
        if s.name in sidecar:  # a sidecar never fails the pod; it holds it Pending until started
            pending_init += not (s.state.HasField("running") and s.started)
        elif s.state.HasField("running"):
            pending_init += 1
        elif s.state.HasField("terminated"):
            failed_init += s.state.terminated.exitCode != 0
        elif s.lastState.HasField("terminated"):
            failed_init += s.lastState.terminated.exitCode != 0
        else:
            pending_init += 1
    unknown = running = waiting = stopped = succeeded = 0
    any_started = False
    for s in apps:
        if s.state.HasField("running"):
            running += 1
            any_started = True
        elif s.state.HasField("terminated"):
            stopped += 1
            succeeded += s.state.terminated.exitCode == 0
            any_started = True
        elif s.state.HasField("waiting"):
            if s.lastState.HasField("terminated"):
                stopped += 1
                any_started = True
            else:
                waiting += 1
        else:
            unknown += 1
    if failed_init and spec.restartPolicy == "Never":
        return "Failed"
    if (pending_init and not any_started) or waiting:
        return "Pending"
    if running and not unknown:
        return "Running"
    if not running and stopped and not unknown:
        if terminal:
            return "Succeeded" if stopped == succeeded else "Failed"
        if spec.restartPolicy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if spec.restartPolicy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _init_done(s: core_pb2.ContainerStatus, sidecar: bool) -> bool:
    """An init container's part of initialization is done: completed, or (a sidecar) running and started."""
    if sidecar:
        return s.state.HasField("running") and s.started
    return s.state.HasField("terminated") and s.state.terminated.exitCode == 0


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> core_pb2.PodCondition:
    return core_pb2.PodCondition(type=kind, status="True" if ok else "False",
                                 reason="" if ok else reason, message="" if ok else message)


_KUBELET_CONDITIONS = frozenset({"PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady",
                                 "Ready", "PodResizePending", "PodResizeInProgress"})


def _ready_condition(pod: Pod, unready: list[core_pb2.ContainerStatus], done: bool) -> core_pb2.PodCondition:
    """Ready: the containers are, and every readiness gate's condition is True
    (upstream's GeneratePodReadyCondition)."""
    if done:
        return _condition("Ready", False, "PodCompleted")
    if unready:
        return _condition("Ready", False, "ContainersNotReady", f"containers with unready status: {_names(unready)}")
    conditions = {c.type: c for c in pod.status.conditions}
    problems = []
    for gate in pod.spec.readinessGates:
        found = conditions.get(gate.conditionType)
        if found is None:
            problems.append(f'corresponding condition of pod readiness gate "{gate.conditionType}" does not exist.')
        elif found.status != "True":
            problems.append(f'the status of pod readiness gate "{gate.conditionType}" is not "True", '
                            f"but {found.status}")
    if problems:
        return _condition("Ready", False, "ReadinessGatesNotReady", ", ".join(problems))
    return _condition("Ready", True)


def _names(statuses: Iterable[core_pb2.ContainerStatus]) -> str:
    return "[" + " ".join(s.name for s in statuses) + "]"


def generate_pod_status(pod: Pod, runtime: PodRuntimeStatus, inputs: StatusInputs,
                        old: core_pb2.PodStatus | None = None) -> core_pb2.PodStatus:
    """`old`: the status last written (the status manager's copy is newer than the pod's
    while the watch has not brought it back yet)."""
    old = old if old is not None else pod.status
    old_inits = {s.name: s for s in old.initContainerStatuses}
    old_apps = {s.name: s for s in old.containerStatuses}
    status = core_pb2.PodStatus()
    inits = [_container_status(pod, c, runtime, inputs, True, old_inits.get(c.name), "PodInitializing"
                               if i else "ContainerCreating") for i, c in enumerate(pod.spec.initContainers)]
    sidecar = {c.name for c in pod.spec.initContainers if is_sidecar(c)}
    initialized_now = all(_init_done(s, s.name in sidecar) for s in inits)
    apps = [_container_status(pod, c, runtime, inputs, False, old_apps.get(c.name),
                              "ContainerCreating" if initialized_now else "PodInitializing")
            for c in pod.spec.containers]
    status.initContainerStatuses.extend(inits)
    status.containerStatuses.extend(apps)
    old_ephemeral = {s.name: s for s in old.ephemeralContainerStatuses}
    status.ephemeralContainerStatuses.extend(
        _container_status(pod, ephemeral_as_container(c), runtime, inputs, False, old_ephemeral.get(c.name),
                          "ContainerCreating") for c in pod.spec.ephemeralContainers)
    phase = _phase(pod, inits, apps, inputs.terminal)
    if old.phase in TERMINAL:
        phase = old.phase  # terminal phases never change back
    status.phase = phase

    sandbox = runtime.ready_sandbox
    started_any = any(s.state.HasField("running") or s.state.HasField("terminated") or s.lastState.HasField(
        "terminated") for s in apps)
    unfinished = [s for s in inits if not _init_done(s, s.name in sidecar)]
    initialized = not unfinished or started_any
    # sidecars count for the pod's readiness as its app containers do (upstream's ContainersReady)
    unready = [s for s in apps if not s.ready] + [s for s in inits if s.name in sidecar and not s.ready]
    done = phase in TERMINAL
    conditions = [
        _condition("PodReadyToStartContainers", sandbox is not None and (bool(sandbox.ip) or pod.spec.hostNetwork)),
        _condition("Initialized", initialized, "ContainersNotInitialized",
                   f"containers with incomplete status: {_names(unfinished)}"),
        _condition("ContainersReady", not unready and not done, "PodCompleted" if done else "ContainersNotReady",
                   "" if done else f"containers with unready status: {_names(unready)}"),
        _ready_condition(pod, unready, done),
    ]
    previous = {c.type: c for c in old.conditions}
    scheduled = {c.type: c for c in pod.status.conditions}.get("PodScheduled") or previous.get("PodScheduled")
    if scheduled is not None:
        status.conditions.append(scheduled)  # the scheduler's
    # Conditions others own (a readiness gate's, DisruptionTarget) stay as the API has them.
    status.conditions.extend(c for c in pod.status.conditions if c.type not in _KUBELET_CONDITIONS)
    if inputs.resize is not None:
        kind, reason, message = inputs.resize
        before = previous.get(kind)
        status.conditions.add(type=kind, status="True", reason=reason, message=message,
                              lastTransitionTime=before.lastTransitionTime if before is not None else _now())
    for condition in conditions:
        before = previous.get(condition.type)
        if before is not None and before.status == condition.status:
            condition.lastTransitionTime.CopyFrom(before.lastTransitionTime)
        else:
            condition.lastTransitionTime.CopyFrom(_now())
        status.conditions.append(condition)

    if sandbox is not None and sandbox.ip:
        status.podIP = sandbox.ip
        status.podIPs.extend(core_pb2.PodIP(ip=ip) for ip in sandbox.ips)
    elif old.podIP and (done or inputs.terminal):
        status.podIP = old.podIP
        status.podIPs.extend(old.podIPs)
    if pod.spec.hostNetwork:
        status.podIP = inputs.node_ip
        del status.podIPs[:]
        status.podIPs.append(core_pb2.PodIP(ip=inputs.node_ip))
    status.hostIP = inputs.node_ip
    status.hostIPs.append(core_pb2.HostIP(ip=inputs.node_ip))
    status.startTime.CopyFrom(old.startTime if old.HasField("startTime") else _now())
    status.qosClass = old.qosClass or qos_class(pod)
    status.nominatedNodeName = old.nominatedNodeName
    status.observedGeneration = pod.metadata.generation
    if done and not status.reason:
        status.reason, status.message = old.reason, old.message
    limit_messages(pod.spec, status)
    return status


@dataclass
class StatusManager:
    """Writes pod statuses; remembers the last one written per pod UID so that an
    unchanged status costs nothing."""

    client: Client
    node_name: str
    _sent: dict[str, bytes] = field(default_factory=dict)
    _last: dict[str, core_pb2.PodStatus] = field(default_factory=dict)

    def last(self, uid: str) -> core_pb2.PodStatus | None:
        return self._last.get(uid)

    async def set_status(self, pod: Pod, status: core_pb2.PodStatus) -> Pod | None:
        """Write `status` unless it is what the pod already has; return the updated pod
        (None when the pod is gone or now belongs to someone else)."""
        uid = pod.metadata.uid
        encoded = status.SerializeToString(deterministic=True)
        if self._sent.get(uid) == encoded:
            return pod  # written already (the pod in hand may predate that write)
        current = pod
        for _ in range(5):
            if current.status.SerializeToString(deterministic=True) == encoded:
                self._sent[uid] = encoded
                self._last[uid] = status
                return current
            update = type(current)()
            update.CopyFrom(current)
            update.status.CopyFrom(status)
            try:
                written = await self.client.pods.update_status(update)
            except errors.Conflict:
                try:
                    current = await self.client.pods.get(pod.metadata.name, pod.metadata.namespace)
                except errors.NotFound:
                    return None
                if current.metadata.uid != uid:
                    return None
                continue
            except errors.NotFound:
                return None
            self._sent[uid] = encoded
            self._last[uid] = status
            log.debug("pod %s/%s: status %s", pod.metadata.namespace, pod.metadata.name, status.phase)
            return written
        log.warning("pod %s/%s: status not written after repeated conflicts", pod.metadata.namespace,
                    pod.metadata.name)
        return None

    def forget(self, uid: str) -> None:
        self._sent.pop(uid, None)
        self._last.pop(uid, None)

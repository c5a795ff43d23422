"""What SyncPod must do to make the runtime match the pod: upstream's computePodActions
(kuberuntime_manager.go) with podSandboxChanged, findNextInitContainerToRun and
ShouldContainerBeRestarted, as a pure function of the pod, the runtime state and the
probes' verdicts, so that it is testable without a runtime."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from kubelet.podconfig import container_hash
from kubelet.runtime import EXITED, RUNNING, UNKNOWN, ContainerInfo, PodRuntimeStatus
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod

__all__ = ["PodActions", "KillInfo", "compute_pod_actions", "should_restart", "next_init_container",
           "restart_on_failure", "is_sidecar"]


@dataclass
class KillInfo:
    name: str
    message: str
    reason: str = ""  # "" or Unhealthy (a probe failed)
    init: bool = False
    grace: int | None = None  # a failed probe's own terminationGracePeriodSeconds, over the pod's


@dataclass
class PodActions:
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""  # the sandbox to use (or the old one being replaced)
    attempt: int = 0
    next_init_container: str = ""
    containers_to_start: list[str] = field(default_factory=list)
    containers_to_kill: dict[str, KillInfo] = field(default_factory=dict)  # container id -> why
    ephemeral_to_start: list[str] = field(default_factory=list)  # started once, never restarted
    sidecars_to_start: list[str] = field(default_factory=list)  # exited sidecars (restartPolicy Always) to restart

    @property
    def nothing(self) -> bool:
        return not (self.kill_pod or self.create_sandbox or self.next_init_container or self.containers_to_start
                    or self.containers_to_kill or self.ephemeral_to_start or self.sidecars_to_start)


def is_sidecar(container: core_pb2.Container) -> bool:
    """An init container with restartPolicy Always (a native sidecar)."""
    return container.HasField("restartPolicy") and container.restartPolicy == "Always"


def restart_on_failure(pod: Pod) -> bool:
    return pod.spec.restartPolicy != "Never"


def _init_failed(status: ContainerInfo) -> bool:
    return (status.state == EXITED and status.exit_code != 0) or status.state == UNKNOWN


def should_restart(pod: Pod, name: str, runtime: PodRuntimeStatus) -> bool:
    """ShouldContainerBeRestarted: whether a container that is not running gets (re)started."""
    if pod.metadata.HasField("deletionTimestamp"):
        return False
    status = runtime.latest(name)
    if status is None:
        return True
    if status.state == RUNNING:
        return False
    if status.state != EXITED:  # created but never started, or unknown
        return True
    if pod.spec.restartPolicy == "Never":
        return False
    if pod.spec.restartPolicy == "OnFailure":
        return status.exit_code != 0
    return True


def next_init_container(pod: Pod, runtime: PodRuntimeStatus) -> tuple[ContainerInfo | None, str, bool]:
    """(last failed init status, next init container to run, initialization done)."""
    inits = list(pod.spec.initContainers)
    if not inits:
        return None, "", True
    if any((s := runtime.latest(c.name)) is not None and s.state == RUNNING for c in pod.spec.containers):
        return None, "", True  # app containers run: initialization happened
    for container in reversed(inits):
        status = runtime.latest(container.name, init=True)
        if status is not None and _init_failed(status):
            return status, container.name, False
    for index in range(len(inits) - 1, -1, -1):
        status = runtime.latest(inits[index].name, init=True)
        if status is None:
            continue
        if status.state == RUNNING:
            return None, "", False
        if status.state == EXITED:
            if index == len(inits) - 1:
                return None, "", True
            return None, inits[index + 1].name, False
    return None, inits[0].name, False


def _succeeded(name: str, runtime: PodRuntimeStatus) -> bool:
    status = runtime.latest(name)
    return status is not None and status.state == EXITED and status.exit_code == 0


def _sandbox_changed(pod: Pod, runtime: PodRuntimeStatus) -> tuple[bool, int, str]:
    if not runtime.sandboxes:
        return True, 0, ""
    latest = runtime.sandboxes[0]
    if sum(1 for s in runtime.sandboxes if s.ready) > 1 or not latest.ready:
        return True, latest.attempt + 1, latest.id
    if not pod.spec.hostNetwork and not latest.ip:
        return True, latest.attempt + 1, latest.id
    return False, latest.attempt, latest.id


def _probe_grace(probe: core_pb2.Probe) -> int | None:
    return max(0, probe.terminationGracePeriodSeconds) if probe.HasField("terminationGracePeriodSeconds") else None


def _sidecar_init_actions(pod: Pod, runtime: PodRuntimeStatus, actions: PodActions, started: AbstractSet[str],
                          liveness_failed: AbstractSet[str], startup_failed: AbstractSet[str]) -> bool:
    """Init containers with sidecars among them (upstream's computeInitContainerActions):
    in order, a regular one must complete, a sidecar must run and be started (its
    startup probe passed) before the next; a sidecar that exited is restarted whatever
    the pod's restartPolicy, during initialization and after. True: initialization is
    done, the app containers follow."""
    app_started = any(runtime.latest(c.name) is not None for c in pod.spec.containers)
    for container in pod.spec.initContainers:
        status = runtime.latest(container.name, init=True)
        if is_sidecar(container):
            if status is None or status.state not in (RUNNING, EXITED):
                if status is not None and status.state == UNKNOWN:
                    actions.containers_to_kill[status.id] = KillInfo(container.name, "unknown state", init=True)
                if app_started:
                    actions.sidecars_to_start.append(container.name)
                    continue
                actions.next_init_container = container.name
                return False
            if status.state == EXITED:
                # it ran: restarted, and the next init container need not wait for it again
                actions.sidecars_to_start.append(container.name)
                continue
            probe = container.livenessProbe if status.id in liveness_failed else \
                container.startupProbe if status.id in startup_failed else None
            if probe is not None:
                which = "liveness" if status.id in liveness_failed else "startup"
                actions.containers_to_kill[status.id] = KillInfo(
                    container.name, f"Init container {container.name} failed {which} probe, will be restarted",
                    "Unhealthy", init=True, grace=_probe_grace(probe))
                actions.sidecars_to_start.append(container.name)
            if not app_started and container.HasField("startupProbe") and status.id not in started:
                return False  # the next waits until this one is started
            continue
        if app_started:
            continue  # initialization happened: regular init containers are done with
        if status is None:
            actions.next_init_container = container.name
            return False
        if status.state == RUNNING:
            return False
        if status.state == EXITED and status.exit_code == 0:
            continue
        if _init_failed(status) and not restart_on_failure(pod):
            actions.kill_pod = True
            return False
        if status.state == UNKNOWN:
            actions.containers_to_kill[status.id] = KillInfo(container.name, "unknown state", init=True)
        actions.next_init_container = container.name
        return False
    return True


def compute_pod_actions(pod: Pod, runtime: PodRuntimeStatus, *, liveness_failed: AbstractSet[str] = frozenset(),
                        startup_failed: AbstractSet[str] = frozenset(),
                        started: AbstractSet[str] = frozenset()) -> PodActions:
    """`liveness_failed`/`startup_failed`: ids of running containers whose probe says so;
    `started`: ids whose startup probe passed (a sidecar's, before the next init container)."""
    create, attempt, sandbox_id = _sandbox_changed(pod, runtime)
    actions = PodActions(kill_pod=create, create_sandbox=create, sandbox_id=sandbox_id, attempt=attempt)
    if create:
        if not restart_on_failure(pod) and attempt != 0 and runtime.containers:
            # The sandbox died under restartPolicy Never: nothing is started again.
            actions.create_sandbox = False
            return actions
        to_start = [c.name for c in pod.spec.containers
                    if not (pod.spec.restartPolicy == "OnFailure" and _succeeded(c.name, runtime))]
        if not to_start and next_init_container(pod, runtime)[2]:
            actions.create_sandbox = False
            return actions
        if pod.spec.initContainers:
            actions.next_init_container = pod.spec.initContainers[0].name
            return actions
        actions.containers_to_start = to_start
        return actions

    if any(is_sidecar(c) for c in pod.spec.initContainers):
        if not _sidecar_init_actions(pod, runtime, actions, started, liveness_failed, startup_failed):
            return actions
    else:
        last_init, next_init, done = next_init_container(pod, runtime)
        if not done:
            if next_init:
                if last_init is not None and _init_failed(last_init) and not restart_on_failure(pod):
                    actions.kill_pod = True
                else:
                    if last_init is not None and last_init.state == UNKNOWN:
                        actions.containers_to_kill[last_init.id] = KillInfo(last_init.name, "unknown state",
                                                                            init=True)
                    actions.next_init_container = next_init
            return actions

    keep = 0
    for container in pod.spec.containers:
        status = runtime.latest(container.name)
        if status is None or status.state != RUNNING:
            if should_restart(pod, container.name, runtime):
                actions.containers_to_start.append(container.name)
                if status is not None and status.state == UNKNOWN:
                    actions.containers_to_kill[status.id] = KillInfo(container.name, "unknown state")
            continue
        restart = restart_on_failure(pod)
        if status.hash and status.hash != container_hash(container):
            info = KillInfo(container.name, f"Container {container.name} definition changed")
            restart = True
        elif status.id in liveness_failed:
            info = KillInfo(container.name, f"Container {container.name} failed liveness probe", "Unhealthy",
                            grace=_probe_grace(container.livenessProbe))
        elif status.id in startup_failed:
            info = KillInfo(container.name, f"Container {container.name} failed startup probe", "Unhealthy",
                            grace=_probe_grace(container.startupProbe))
        else:
            keep += 1
            continue
        if restart:
            info.message += ", will be restarted"
            actions.containers_to_start.append(container.name)
        actions.containers_to_kill[status.id] = info
    if keep == 0 and not actions.containers_to_start:
        actions.kill_pod = True
        return actions
    if not pod.metadata.HasField("deletionTimestamp"):
        # Ephemeral containers (kubectl debug): into the running sandbox once, never again.
        actions.ephemeral_to_start = [c.name for c in pod.spec.ephemeralContainers if runtime.latest(c.name) is None]
    return actions

"""SyncPod over CRI (kuberuntime_manager.go): compute the actions, then kill what must
go, create the sandbox, start the next init container or the containers — with
image pulls, CrashLoopBackOff and the Events users read in `describe pod`."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubelet.actions import PodActions, compute_pod_actions, is_sidecar
from kubelet.backoff import Backoff
from kubelet.dns import DNSSettings, pod_dns_config
from kubelet.hooks import HookError, HookRunner
from kubelet.podconfig import (
    ConfigError,
    PodPaths,
    container_config,
    container_hash,
    container_resources,
    ephemeral_as_container,
    grace_period,
    needs_env_sources,
    sandbox_config,
)
from kubelet.probes import LIVENESS, STARTUP, ProbeManager
from kubelet.runtime import EXITED, RUNNING, CRICallError, PodRuntimeStatus, Runtime
from kubeling import errors
from kubeling.events import NORMAL, WARNING, EventRecorder
from protos.kubeling.v1 import core_pb2
from protos.kubeling.v1.core_pb2 import Pod
from protos.runtime.v1 import api_pb2

__all__ = ["PodSyncer", "SyncResult"]

log = logging.getLogger(__name__)


@dataclass
class SyncResult:
    runtime: PodRuntimeStatus  # after the sync's actions
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)  # container -> (reason, message)
    retry_after: float | None = None  # seconds until a back-off ends: sync again then
    actions: PodActions | None = None
    before: PodRuntimeStatus | None = None  # what the sync acted on
    resize: tuple[str, str, str] | None = None  # a resize condition: (type, reason, message)

    def ended_meanwhile(self) -> bool:
        """A container exited during the sync (one it started and that ended at once):
        the PLEG will not report it, the sync's own last look already saw it."""
        exited = {c.id for c in (self.before.containers if self.before else []) if c.state == EXITED}
        return any(c.state == EXITED and c.id not in exited for c in self.runtime.containers)

    def hold(self, seconds: float) -> None:
        self.retry_after = seconds if self.retry_after is None else min(self.retry_after, seconds)


def _pod_name(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


_MIN_GRACE_AFTER_HOOK = 2  # seconds the stop signal always gets after a preStop hook (upstream's minimum)


def _spec(pod: Pod, name: str, init: bool) -> core_pb2.Container | None:
    for c in pod.spec.initContainers if init else pod.spec.containers:
        if c.name == name:
            return c
    if not init:
        for e in pod.spec.ephemeralContainers:
            if e.name == name:
                return ephemeral_as_container(e)
    return None


def _pod_ip(pod: Pod, status: PodRuntimeStatus, node_ip: str) -> str:
    """Where a hook's httpGet goes by default."""
    if pod.spec.hostNetwork:
        return node_ip
    sandbox = status.ready_sandbox
    return sandbox.ip if sandbox is not None else ""


def _limits(r: api_pb2.LinuxContainerResources) -> tuple[int, int, int, int]:
    return r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_in_bytes


def _differing(wanted: api_pb2.LinuxContainerResources, applied: api_pb2.LinuxContainerResources) -> set[str]:
    """The resources (cpu, memory) whose runtime settings differ."""
    out = set()
    if (wanted.cpu_shares, wanted.cpu_quota, wanted.cpu_period) != (applied.cpu_shares, applied.cpu_quota,
                                                                    applied.cpu_period):
        out.add("cpu")
    if wanted.memory_limit_in_bytes != applied.memory_limit_in_bytes:
        out.add("memory")
    return out


def _field(container: str, init: bool) -> str:
    return f"spec.{'initContainers' if init else 'containers'}{{{container}}}"


@dataclass
class PodSyncer:
    runtime: Runtime
    paths: PodPaths
    node_ip: str
    recorder: EventRecorder
    probes: ProbeManager
    backoff: Backoff
    pull_backoff: Backoff
    cluster_domain: str = "cluster.local"
    cgroup_parent: str = ""  # the pods' cgroups go under it ("": the runtime's default)
    # The ConfigMaps and Secrets a container's env names (kubelet.volumes.PodVolumes.env_sources).
    env_sources: Callable[[Pod], Awaitable[Mapping[tuple[str, str], Mapping[str, str] | None]]] | None = None
    # The Service environment variables for a pod's containers (kubelet.envvars).
    service_env: Callable[[Pod], Mapping[str, str]] | None = None
    dns: DNSSettings = field(default_factory=DNSSettings)
    # The host paths of a pod's persistentVolumeClaim volumes (kubelet.volumemanager).
    claim_paths: Callable[[Pod], Mapping[str, Path]] | None = None
    # A RuntimeClass's handler by the class's name (from the apiserver), for RunPodSandbox.
    runtime_handler: Callable[[str], Awaitable[str]] | None = None
    allocatable: Mapping[str, str] | None = None  # the node's
    # None when the node can take the pod's (resized) requests, else (reason, message)
    fits: Callable[[Pod], tuple[str, str] | None] | None = None
    oom_floor: int = -1000  # the lowest OOM score adjustment this kubelet can give (kubelet.qos)
    hooks: HookRunner = field(init=False)

    def __post_init__(self) -> None:
        self.hooks = HookRunner(self.runtime)

    async def close(self) -> None:
        await self.hooks.close()

    async def _handler(self, pod: Pod) -> str:
        """The CRI runtime handler of the pod's RuntimeClass ("": the runtime's default)."""
        if not pod.spec.HasField("runtimeClassName") or self.runtime_handler is None:
            return ""
        return await self.runtime_handler(pod.spec.runtimeClassName)

    # ---- SyncPod ----

    async def sync(self, pod: Pod) -> SyncResult:
        uid = pod.metadata.uid
        status = await self.runtime.pod_status(uid)
        running = [c.id for c in status.containers if c.state == RUNNING]
        actions = compute_pod_actions(pod, status, liveness_failed=self.probes.failed(LIVENESS, running),
                                      startup_failed=self.probes.failed(STARTUP, running),
                                      started={cid for cid, ok in self.probes.verdicts(STARTUP).items() if ok})
        result = SyncResult(status, actions=actions, before=status)
        if not actions.kill_pod and not actions.create_sandbox and not pod.metadata.HasField("deletionTimestamp"):
            if await self._resize(pod, status, result):
                result.runtime = status = await self.runtime.pod_status(uid)
        if actions.nothing:
            return result
        log.debug("pod %s: actions %s", _pod_name(pod), actions)
        if actions.kill_pod:
            await self.kill_pod(pod, status, grace_period(pod) if not actions.create_sandbox else 0)
            if not actions.create_sandbox:
                result.runtime = await self.runtime.pod_status(uid)
                return result
        else:
            ip = _pod_ip(pod, status, self.node_ip)
            await asyncio.gather(*(self._kill_container(pod, cid, _spec(pod, info.name, info.init),
                                                        info.grace if info.grace is not None else grace_period(pod),
                                                        info.message, init=info.init, pod_ip=ip, name=info.name)
                                   for cid, info in actions.containers_to_kill.items()))
        if not actions.create_sandbox:
            await self._prune_init_containers(pod, status)

        sandbox_id, pod_ip = actions.sandbox_id, ""
        try:
            config = sandbox_config(pod, self.paths, actions.attempt, self.cgroup_parent,
                                    pod_dns_config(pod, self.dns))
        except ConfigError as exc:
            message = f"Failed to generate sandbox config for pod {_pod_name(pod)!r}: {exc}"
            log.warning("pod %s: %s", _pod_name(pod), message)
            self.recorder.pod_event(pod, WARNING, "FailedCreatePodSandBox", message)
            result.hold(self.backoff.next(f"sandbox/{uid}"))
            return result
        if actions.create_sandbox:
            left = self.backoff.left(f"sandbox/{uid}")
            if left > 0:  # the last attempt failed: whatever woke us, wait out its back-off
                result.hold(left)
                return result
            try:
                handler = await self._handler(pod)
            except errors.ApiError as exc:  # upstream's words: the class is gone, or cannot be read
                message = f'Failed to create pod sandbox: RuntimeHandler "{pod.spec.runtimeClassName}": {exc.message}'
                self.recorder.pod_event(pod, WARNING, "FailedCreatePodSandBox", message)
                result.hold(self.backoff.next(f"sandbox/{uid}"))
                return result
            try:
                self.paths.log_dir(pod).mkdir(parents=True, exist_ok=True)
                sandbox_id = await self.runtime.run_sandbox(config, handler)
                network = (await self.runtime.sandbox_status(sandbox_id)).network
                pod_ip = network.ip
            except CRICallError as exc:
                message = f"Failed to create pod sandbox: {exc.details or exc}"
                log.warning("pod %s: %s", _pod_name(pod), message)
                self.recorder.pod_event(pod, WARNING, "FailedCreatePodSandBox", message)
                result.runtime = await self.runtime.pod_status(uid)
                result.hold(self.backoff.next(f"sandbox/{uid}"))
                return result
            self.backoff.forget(f"sandbox/{uid}")
            log.info("pod %s: sandbox %s ready (ip %s)", _pod_name(pod), sandbox_id[:13], pod_ip or "host")
        elif status.ready_sandbox is not None:
            pod_ip = status.ready_sandbox.ip
        if pod.spec.hostNetwork:
            pod_ip = self.node_ip

        inits = {c.name: c for c in pod.spec.initContainers}
        for name in actions.sidecars_to_start:  # restarted, whatever the pod's restartPolicy
            await self._start(pod, inits[name], True, status, sandbox_id, config, pod_ip, result)
        if actions.next_init_container:
            spec = inits[actions.next_init_container]
            await self._start(pod, spec, True, status, sandbox_id, config, pod_ip, result)
        else:
            specs = {c.name: c for c in pod.spec.containers}
            for name in actions.containers_to_start:
                await self._start(pod, specs[name], False, status, sandbox_id, config, pod_ip, result)
            ephemeral = {c.name: c for c in pod.spec.ephemeralContainers}
            for name in actions.ephemeral_to_start:
                target = status.latest(ephemeral[name].targetContainerName) \
                    if ephemeral[name].targetContainerName else None
                await self._start(pod, ephemeral_as_container(ephemeral[name]), False, status, sandbox_id, config,
                                  pod_ip, result, target_id=target.id if target is not None and target.state == RUNNING
                                  else "")
        result.runtime = await self.runtime.pod_status(uid)
        return result

    async def _start(self, pod: Pod, spec: core_pb2.Container, init: bool, status: PodRuntimeStatus,
                     sandbox_id: str, config: api_pb2.PodSandboxConfig, pod_ip: str, result: SyncResult,
                     target_id: str = "") -> bool:
        name = spec.name
        where = _field(name, init)
        latest = status.latest(name, init)
        key = f"{pod.metadata.uid}/{name}/{container_hash(spec)}"
        if latest is not None and latest.state == EXITED:
            remaining = self.backoff.remaining(key, latest.finished_at / 1e9)
            if remaining > 0:
                delay = self.backoff.delay(key)
                message = (f"back-off {delay:g}s restarting failed container={name} "
                           f"pod={pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid})")
                result.waiting[name] = ("CrashLoopBackOff", message)
                result.hold(remaining)
                self.recorder.pod_event(pod, WARNING, "BackOff", f"Back-off restarting failed container {name} in "
                                        f"pod {pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid})",
                                        field_path=where)
                return False
            self.backoff.next(key, latest.finished_at / 1e9)
        if not await self._ensure_image(pod, spec, where, config, result):
            return False
        restart_count = latest.restart_count + 1 if latest is not None else 0  # continues across sandboxes
        try:
            sources = await self.env_sources(pod) if self.env_sources is not None and needs_env_sources(spec) \
                else None
            container_cfg = container_config(pod, spec, init=init, restart_count=restart_count, paths=self.paths,
                                             pod_ip=pod_ip, host_ip=self.node_ip, cluster_domain=self.cluster_domain,
                                             env_sources=sources, target_id=target_id,
                                             service_env=self.service_env(pod) if self.service_env else None,
                                             claims=self.claim_paths(pod) if self.claim_paths else None,
                                             allocatable=self.allocatable, oom_floor=self.oom_floor)
        except (ConfigError, OSError) as exc:
            result.waiting[name] = ("CreateContainerConfigError", str(exc))
            self.recorder.pod_event(pod, WARNING, "Failed", f"Error: {exc}", field_path=where)
            return False
        try:
            container_id = await self.runtime.create_container(sandbox_id, container_cfg, config)
        except CRICallError as exc:
            result.waiting[name] = ("CreateContainerError", exc.details or str(exc))
            self.recorder.pod_event(pod, WARNING, "Failed", f"Error: {exc.details or exc}", field_path=where)
            return False
        self.recorder.pod_event(pod, NORMAL, "Created", f"Created container {name}", field_path=where)
        try:
            await self.runtime.start_container(container_id)
        except CRICallError as exc:
            result.waiting[name] = ("RunContainerError", exc.details or str(exc))
            self.recorder.pod_event(pod, WARNING, "Failed", f"Error: {exc.details or exc}", field_path=where)
            return False
        self.recorder.pod_event(pod, NORMAL, "Started", f"Started container {name}", field_path=where)
        log.info("pod %s: container %s started (%s, restart %d)", _pod_name(pod), name, container_id[:13],
                 restart_count)
        if spec.lifecycle.HasField("postStart"):
            try:
                await self.hooks.run(pod, spec, container_id, spec.lifecycle.postStart, pod_ip)
            except HookError as exc:
                # As upstream: the event, then the container is killed (its preStop runs) and
                # restarted as its restart policy says, with the back-off of a failed start.
                log.warning("pod %s: container %s: postStart hook failed: %s", _pod_name(pod), name, exc)
                self.recorder.pod_event(pod, WARNING, "FailedPostStartHook", str(exc), field_path=where)
                await self._kill_container(pod, container_id, spec, grace_period(pod), "FailedPostStartHook",
                                           init=init, pod_ip=pod_ip)
                result.waiting[name] = ("PostStartHookError", str(exc))
                return False
        return True

    async def _resize(self, pod: Pod, status: PodRuntimeStatus, result: SyncResult) -> bool:
        """In-place resize (upstream's doPodResizeAction): the running containers whose
        resources differ from the spec get them through UpdateContainerResources — or a
        restart, where the container's resizePolicy asks for one — once the node can take
        the pod's new requests (else PodResizePending, Infeasible or Deferred). True: a
        container was changed."""
        changed: list[tuple[core_pb2.Container, bool, str, api_pb2.LinuxContainerResources,
                            api_pb2.LinuxContainerResources]] = []
        for spec, init in [*((c, False) for c in pod.spec.containers),
                           *((c, True) for c in pod.spec.initContainers if is_sidecar(c))]:
            latest = status.latest(spec.name, init)
            if latest is None or latest.state != RUNNING or latest.applied is None:
                continue
            try:
                wanted = container_resources(pod, spec)
            except ConfigError:
                continue
            if _limits(wanted) != _limits(latest.applied):
                changed.append((spec, init, latest.id, wanted, latest.applied))
        if not changed:
            return False
        pending = self.fits(pod) if self.fits is not None else None
        if pending is not None:
            result.resize = ("PodResizePending", *pending)
            return False
        for spec, init, container_id, wanted, applied in changed:
            restart = any(p.restartPolicy == "RestartContainer" and p.resourceName in _differing(wanted, applied)
                          for p in spec.resizePolicy)
            if restart:
                await self._kill_container(pod, container_id, spec, grace_period(pod),
                                           f"Container {spec.name} resize requires restart", init=init)
                continue  # started again by this sync's actions or the next sync
            try:
                await self.runtime.update_container_resources(container_id, wanted)
            except CRICallError as exc:
                message = f"container {spec.name}: {exc.details or exc}"
                log.warning("pod %s: resize failed: %s", _pod_name(pod), message)
                result.resize = ("PodResizeInProgress", "Error", message)
                continue
            self.recorder.pod_event(pod, NORMAL, "ResizeCompleted", f"Pod resize completed for container "
                                    f"{spec.name}", field_path=_field(spec.name, init))
            log.info("pod %s: container %s resized in place", _pod_name(pod), spec.name)
        return True

    async def _ensure_image(self, pod: Pod, spec: core_pb2.Container, where: str,
                            config: api_pb2.PodSandboxConfig, result: SyncResult) -> bool:
        image, policy = spec.image, spec.imagePullPolicy or "IfNotPresent"
        try:
            present = await self.runtime.image_present(image)
        except CRICallError as exc:
            result.waiting[spec.name] = ("InvalidImageName", exc.details or str(exc))
            self.recorder.pod_event(pod, WARNING, "InspectFailed", f"Failed to inspect image {image!r}: {exc}",
                                    field_path=where)
            return False
        if present and policy != "Always":
            self.recorder.pod_event(pod, NORMAL, "Pulled", f"Container image \"{image}\" already present on machine",
                                    field_path=where)
            return True
        if policy == "Never":
            message = f"Container image \"{image}\" is not present with pull policy of Never"
            result.waiting[spec.name] = ("ErrImageNeverPull", message)
            self.recorder.pod_event(pod, WARNING, "ErrImageNeverPull", message, field_path=where)
            return False
        key = f"{pod.metadata.uid}/{image}"
        remaining = self.pull_backoff.remaining(key, self.pull_backoff.clock())
        if remaining > 0:
            message = f"Back-off pulling image \"{image}\""
            result.waiting[spec.name] = ("ImagePullBackOff", message)
            result.hold(remaining)
            self.recorder.pod_event(pod, NORMAL, "BackOff", message, field_path=where)
            return False
        self.recorder.pod_event(pod, NORMAL, "Pulling", f"Pulling image \"{image}\"", field_path=where)
        started = time.monotonic()
        try:
            await self.runtime.pull_image(image, config)
        except CRICallError as exc:
            self.pull_backoff.next(key)
            message = f"Failed to pull image \"{image}\": {exc.details or exc}"
            result.waiting[spec.name] = ("ErrImagePull", message)
            result.hold(self.pull_backoff.delay(key))
            self.recorder.pod_event(pod, WARNING, "Failed", message, field_path=where)
            return False
        self.pull_backoff.forget(key)
        self.recorder.pod_event(pod, NORMAL, "Pulled", f"Successfully pulled image \"{image}\" in "
                                f"{time.monotonic() - started:.3f}s", field_path=where)
        return True

    async def _prune_init_containers(self, pod: Pod, status: PodRuntimeStatus) -> None:
        """Keep the latest exited instance of each init container; older ones go."""
        for container in pod.spec.initContainers:
            for old in [c for c in status.by_name(container.name, init=True)[1:] if c.state == EXITED]:
                await self._remove_container(old.id)

    # ---- killing ----

    async def _kill_container(self, pod: Pod, container_id: str, spec: core_pb2.Container | None, grace: int,
                              message: str = "", init: bool = False, pod_ip: str = "", name: str = "") -> None:
        """upstream's killContainer: the Killing event, the preStop hook within the grace
        period (what it used is taken from it, at least 2 s left for the stop signal),
        then StopContainer. `spec`: None for a container the pod does not name any more."""
        name = spec.name if spec is not None else name
        self.recorder.pod_event(pod, NORMAL, "Killing", message or f"Stopping container {name}",
                                field_path=_field(name, init))
        if spec is not None and spec.lifecycle.HasField("preStop") and grace > 0:
            started = time.monotonic()
            try:
                async with asyncio.timeout(grace):
                    await self.hooks.run(pod, spec, container_id, spec.lifecycle.preStop, pod_ip)
            except TimeoutError:
                log.info("pod %s: container %s: preStop hook not completed in the grace period (%ds)",
                         _pod_name(pod), name, grace)
            except HookError as exc:
                log.warning("pod %s: container %s: preStop hook failed: %s", _pod_name(pod), name, exc)
                # upstream leaves the hook's output out of the event: it may hold secrets
                self.recorder.pod_event(pod, WARNING, "FailedPreStopHook", "PreStopHook failed",
                                        field_path=_field(name, init))
            grace = max(_MIN_GRACE_AFTER_HOOK, grace - int(time.monotonic() - started))
        try:
            await self.runtime.stop_container(container_id, grace)
        except CRICallError as exc:
            log.warning("pod %s: stopping container %s failed: %s", _pod_name(pod), name, exc)

    async def kill_pod(self, pod: Pod, status: PodRuntimeStatus, grace: int) -> None:
        """Stop every running container (with the grace period): the app containers
        together, then the sidecars one by one in reverse order with what is left of the
        grace period, as upstream; then the sandboxes."""
        ip = _pod_ip(pod, status, self.node_ip)
        running = [c for c in status.containers if c.state == RUNNING]
        order = {c.name: i for i, c in enumerate(pod.spec.initContainers)}
        sidecars = sorted((c for c in running if c.init and c.restart_policy == "Always"),
                          key=lambda c: order.get(c.name, -1), reverse=True)
        started = time.monotonic()
        await asyncio.gather(*(self._kill_container(pod, c.id, _spec(pod, c.name, c.init), grace, init=c.init,
                                                    pod_ip=ip, name=c.name)
                               for c in running if c not in sidecars))
        for c in sidecars:
            left = max(0, grace - int(time.monotonic() - started))
            await self._kill_container(pod, c.id, _spec(pod, c.name, True), left, init=True, pod_ip=ip, name=c.name)
        for sandbox in status.sandboxes:
            if sandbox.ready:
                try:
                    await self.runtime.stop_sandbox(sandbox.id)
                except CRICallError as exc:
                    log.warning("pod %s: stopping sandbox %s failed: %s", _pod_name(pod), sandbox.id[:13], exc)

    async def _remove_container(self, container_id: str) -> None:
        try:
            await self.runtime.remove_container(container_id)
        except CRICallError as exc:
            log.warning("removing container %s failed: %s", container_id[:13], exc)

    async def remove_pod(self, uid: str, pod: Pod | None = None) -> None:
        """Everything of a pod that is gone for good in the runtime: sandboxes (with their
        containers and network) and its log directory. Its volumes and directory are the
        volume manager's to take down (nothing may be deleted under a mount)."""
        status = await self.runtime.pod_status(uid)
        for sandbox in status.sandboxes:
            await self.runtime.stop_sandbox(sandbox.id)
            await self.runtime.remove_sandbox(sandbox.id)
        for container in status.containers:  # any outside a sandbox the runtime knows
            await self._remove_container(container.id)
        self.backoff.forget(f"{uid}/")
        self.backoff.forget(f"sandbox/{uid}")
        self.pull_backoff.forget(f"{uid}/")
        for log_dir in self.paths.logs_dir.glob(f"*_{uid}"):
            shutil.rmtree(log_dir, ignore_errors=True)

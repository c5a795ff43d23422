"""Containers: CreateContainer, StartContainer, StopContainer, RemoveContainer,
ListContainers, ContainerStatus, ExecSync, ReopenContainerLog.

A container is an OCI bundle in `<state>/containers/<id>` (config.json and an
overlay rootfs over the image's unpacked layers), made by CreateContainer; its
shim, launched by StartContainer, runs it under runc and owns its exit and its
CRI log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal as signals
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from cni import netns
from cri.container_store import Ambiguous, ContainerRecord, ContainerStore, NameReserved, NotFound
from cri.errors import CRIError, invalid, not_found
from cri.images import reference
from cri.images.store import ImageStore
from cri.oci_spec import SandboxContext, SpecError, container_spec, resources_spec, sandbox_hostname
from cri.rootfs import MountError, mount_overlay, unmount
from cri.runc import Runc, RuncError
from cri.sandbox_store import READY, SandboxRecord
from cri.sandboxes import SandboxManager
from cri.shims import ShimError, ShimLauncher, record_lost_shim, record_start_failure, reopen_log, shim_running
from cri.stats import CpuSampler, directory_usage, memory_usage, network_usage, now
from kubeling.telemetry import tracer
from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)


def _stop_signal(config: api_pb2.ContainerConfig, image: dict[str, object]) -> int:
    if config.stop_signal != api_pb2.RUNTIME_DEFAULT:
        name = api_pb2.Signal.Name(config.stop_signal)
        if hasattr(signals, name):
            return int(getattr(signals, name))
    image_signal = str(image.get("StopSignal") or "SIGTERM").upper()
    if not image_signal.startswith("SIG"):
        image_signal = "SIG" + image_signal
    return int(getattr(signals, image_signal, signals.SIGTERM))


@dataclass
class ContainerManager:
    store: ContainerStore
    sandboxes: SandboxManager
    images: ImageStore
    runc: Runc
    shims: ShimLauncher
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _cpu: CpuSampler = field(default_factory=CpuSampler)

    def _lock(self, container_id: str) -> asyncio.Lock:
        return self._locks.setdefault(container_id, asyncio.Lock())

    def get(self, container_id: str) -> ContainerRecord:
        try:
            return self.store.get(container_id)
        except (NotFound, Ambiguous) as exc:
            raise not_found(exc.args[0]) from None

    def _sandbox_context(self, sandbox: SandboxRecord) -> SandboxContext:
        config = sandbox.config
        options = config.linux.security_context.namespace_options
        return SandboxContext(
            hostname=sandbox_hostname(config), pause_pid=sandbox.pause_pid,
            netns_path=netns.path_of(sandbox.netns) if sandbox.netns else "",
            etc_dir=self.sandboxes.store.directory(sandbox.id), cgroup_parent=config.linux.cgroup_parent,
            host_ipc=options.ipc == api_pb2.NODE, host_pid=options.pid == api_pb2.NODE,
            sysctls=tuple(sorted(config.linux.sysctls.items())))

    def _target_pid(self, sandbox_id: str, target_id: str) -> int:
        """The process of the running container whose PID namespace a new one joins
        (upstream's NamespaceMode TARGET: kubectl debug --target)."""
        try:
            target = self.store.get(target_id) if target_id else None
        except (NotFound, Ambiguous):
            target = None
        if target is None or target.sandbox_id != sandbox_id or target.state() != api_pb2.CONTAINER_RUNNING \
                or not target.pid:
            raise invalid(f"namespace_options.target_id: {target_id!r} is not a running container of the sandbox")
        return target.pid

    # ---- CreateContainer / StartContainer ----

    async def create(self, sandbox_id: str, config: api_pb2.ContainerConfig) -> str:
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox.state != READY:
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"pod sandbox {sandbox.id} is not ready")
        if not config.metadata.name:
            raise invalid("config.metadata.name is required")
        if not config.image.image:
            raise invalid("config.image.image is required")
        try:
            image = self.images.get(config.image.image)  # the index is cached: no disk read
        except reference.InvalidReference as exc:
            raise invalid(f"config.image.image: {exc}") from None
        if image is None:
            raise not_found(f"image {config.image.image!r} is not present; pull it first")
        log_dir = sandbox.config.log_directory
        log_path = str(Path(log_dir) / config.log_path) if log_dir and config.log_path else ""
        record = ContainerRecord.create(sandbox.id, config, image.id, config.image.image, time.time_ns(), log_path)
        try:
            self.store.reserve(record)
        except NameReserved as exc:
            raise CRIError(grpc.StatusCode.ALREADY_EXISTS, str(exc)) from None
        directory = self.store.directory(record.id)
        record.state_dir = str(directory)
        pod = f"{sandbox.config.metadata.namespace}/{sandbox.config.metadata.name}"
        try:
            layers = self.images.unpacked(image)
            if layers is None:
                layers = await asyncio.to_thread(self.images.unpack, image)
            rootfs = await mount_overlay(layers, directory)
            context = self._sandbox_context(sandbox)
            options = config.linux.security_context.namespace_options
            if options.pid == api_pb2.TARGET:
                context = dataclasses.replace(context, target_pid=self._target_pid(sandbox.id, options.target_id))
            spec = container_spec(record.id, config, image.run_config, rootfs, context)
            (directory / "config.json").write_text(json.dumps(spec))
            user = spec["process"]["user"]
            record.user = (int(user["uid"]), int(user["gid"]), tuple(int(g) for g in user.get("additionalGids", [])))
            self.store.save(record)
        except BaseException as exc:
            await asyncio.shield(self._destroy(record))
            if isinstance(exc, SpecError):
                raise invalid(str(exc)) from exc
            if isinstance(exc, (MountError, OSError)):
                raise CRIError(grpc.StatusCode.UNKNOWN, f"pod {pod}: create container "
                               f"{config.metadata.name!r}: {exc}") from exc
            raise
        log.info("pod %s: container %s created (%s)", pod, config.metadata.name, record.id[:13])
        return record.id

    async def start(self, container_id: str) -> None:
        record = self.get(container_id)
        # Shielded: a call cancelled (its deadline) while the shim starts the container
        # must not leave a running container recorded as CREATED, to be started again.
        starting = asyncio.ensure_future(self._start(record))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            starting.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise

    async def _start(self, record: ContainerRecord) -> None:
        async with self._lock(record.id):
            state = record.state()
            if state != api_pb2.CONTAINER_CREATED:
                raise CRIError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"container {record.id} is {api_pb2.ContainerState.Name(state)}, not CREATED")
            # The shim runs `runc run --detach` (containerd, too, makes its task only
            # here): one runc program per container start instead of create + start.
            config, directory = record.config, Path(record.state_dir)
            try:
                with _TRACER.start_as_current_span("runc run", attributes={"runc.container_id": record.id}):
                    record.pid = await self.shims.launch(
                        record.id, directory, Path(record.log_path or directory / "container.log"), directory,
                        stdin=config.stdin, stdin_once=config.stdin_once, tty=config.tty, run=True)
            except (ShimError, OSError) as exc:
                record_start_failure(directory, str(exc))
                raise CRIError(grpc.StatusCode.UNKNOWN, f"container {record.id}: start: {exc}") from exc
            record.started_at = time.time_ns()
            self.store.save(record)

    # ---- StopContainer / RemoveContainer ----

    async def _wait_exit(self, record: ContainerRecord, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while record.exit() is None:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def stop(self, container_id: str, timeout: int) -> None:
        try:
            record = self.store.get(container_id)
        except NotFound:
            return  # nothing to stop: success, as the CRI asks (and containerd does)
        except Ambiguous as exc:
            raise not_found(exc.args[0]) from None
        async with self._lock(record.id):
            await self._stop(record, timeout)

    async def _stop(self, record: ContainerRecord, timeout: float) -> None:
        if record.exit() is not None:
            return  # already stopped: success
        state_dir = Path(record.state_dir) if record.state_dir else None
        state = await self.runc.state(record.id)
        if state is None:
            return
        if timeout > 0:
            image = self.images.get(record.image_id)
            sig = _stop_signal(record.config, image.run_config if image else {})
            try:
                await self.runc.kill(record.id, sig)
            except RuncError as exc:
                log.debug("container %s: stop signal: %s", record.id[:13], exc)
            if await self._wait_exit(record, float(timeout)):
                return
        try:
            await self.runc.kill(record.id, signals.SIGKILL, all_processes=True)
        except RuncError as exc:
            log.debug("container %s: SIGKILL: %s", record.id[:13], exc)
        deadline = time.monotonic() + 10.0
        while record.exit() is None:
            if time.monotonic() >= deadline:
                raise CRIError(grpc.StatusCode.DEADLINE_EXCEEDED, f"container {record.id} did not exit after SIGKILL")
            # A shim records the exit, then ends; one that is gone without an exit died before
            # (with a runtime killed mid-start, or just now): judged in that order — shim gone,
            # then no exit written —, once runc has the container stopped, its exit is recorded
            # here (255, Unknown), or it would be "running" forever and its pod never terminate.
            if state_dir is not None and not shim_running(state_dir):
                current = await self.runc.state(record.id)
                if (current is None or current.status == "stopped") and record_lost_shim(state_dir):
                    log.warning("container %s: its shim was gone; recorded as exited (255)", record.id[:13])
                    return
            await asyncio.sleep(0.05)

    async def _destroy(self, record: ContainerRecord) -> None:
        for step in (lambda: self.runc.delete(record.id, force=True),
                     lambda: unmount(self.store.directory(record.id))):
            try:
                await step()
            except Exception as exc:
                log.warning("container %s: cleanup step failed: %s", record.id[:13], exc)
        self.store.delete(record)

    async def remove(self, container_id: str) -> None:
        try:
            record = self.store.get(container_id)
        except NotFound:
            return  # already removed
        except Ambiguous as exc:
            raise not_found(exc.args[0]) from None
        async with self._lock(record.id):
            if record.started_at or record.exit() is None:
                await self._stop(record, 0)
            try:
                await self.runc.delete(record.id, force=True)
                await unmount(self.store.directory(record.id))
            except (RuncError, MountError) as exc:
                raise CRIError(grpc.StatusCode.UNKNOWN, f"container {record.id}: remove failed: {exc}") from exc
            self.store.delete(record)
        self._locks.pop(record.id, None)
        self._cpu.forget(record.id)
        log.info("container %s removed", record.id[:13])

    async def stop_all_in(self, sandbox_id: str) -> None:
        for record in self.store.containers():
            if record.sandbox_id == sandbox_id:
                async with self._lock(record.id):
                    await self._stop(record, 0)

    async def remove_all_in(self, sandbox_id: str) -> None:
        for record in self.store.containers():
            if record.sandbox_id == sandbox_id:
                await self.remove(record.id)

    # ---- ListContainers / ContainerStatus ----

    def _image_spec(self, record: ContainerRecord) -> api_pb2.ImageSpec:
        return api_pb2.ImageSpec(image=record.image_name, user_specified_image=record.config.image.user_specified_image)

    def list_containers(self, selector: api_pb2.ContainerFilter) -> list[api_pb2.Container]:
        out: list[api_pb2.Container] = []
        wanted = dict(selector.label_selector).items()
        for record in self.store.containers():
            config = record.config
            if selector.id and not record.id.startswith(selector.id):
                continue
            if selector.pod_sandbox_id and not record.sandbox_id.startswith(selector.pod_sandbox_id):
                continue
            labels = record.labels
            if any(labels.get(k) != v for k, v in wanted):
                continue
            state = record.state()  # after the cheap filters: it may read the exit file
            if selector.HasField("state") and selector.state.state != state:
                continue
            out.append(api_pb2.Container(
                id=record.id, pod_sandbox_id=record.sandbox_id, metadata=config.metadata,
                image=self._image_spec(record), image_ref=record.image_id, image_id=record.image_id, state=state,
                created_at=record.created_at, labels=config.labels, annotations=config.annotations))
        return out

    def status(self, container_id: str, verbose: bool) -> api_pb2.ContainerStatusResponse:
        record = self.get(container_id)
        config = record.config
        status = api_pb2.ContainerStatus(
            id=record.id, metadata=config.metadata, state=record.state(), created_at=record.created_at,
            started_at=record.started_at, image=self._image_spec(record), image_ref=record.image_id,
            image_id=record.image_id, labels=config.labels, annotations=config.annotations,
            mounts=config.mounts, log_path=record.log_path,
            resources=api_pb2.ContainerResources(linux=config.linux.resources))
        if record.user is not None:
            uid, gid, groups = record.user
            status.user.linux.CopyFrom(api_pb2.LinuxContainerUser(uid=uid, gid=gid, supplemental_groups=groups))
        ended = record.exit()
        if ended is not None:
            status.finished_at, status.exit_code, status.message = ended.finished_at, ended.exit_code, ended.message
            status.reason = ended.reason or (
                "OOMKilled" if ended.oom_killed else ("Completed" if ended.exit_code == 0 else "Error"))
        info: dict[str, str] = {}
        if verbose:
            info["info"] = json.dumps({"pid": record.pid, "sandboxID": record.sandbox_id,
                                       "stateDir": record.state_dir})
        return api_pb2.ContainerStatusResponse(status=status, info=info)

    # ---- ExecSync / ReopenContainerLog ----

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> api_pb2.ExecSyncResponse:
        record = self.get(container_id)
        if record.state() != api_pb2.CONTAINER_RUNNING:
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"container {record.id} is not running")
        if not cmd:
            raise invalid("cmd is required")
        result = await self.runc.exec(record.id, cmd, timeout=float(timeout))
        if result.timed_out:
            raise CRIError(grpc.StatusCode.DEADLINE_EXCEEDED,
                           f"command {cmd!r} in container {record.id} timed out after {timeout}s")
        return api_pb2.ExecSyncResponse(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code)

    def reopen_log(self, container_id: str) -> None:
        record = self.get(container_id)
        if record.state() != api_pb2.CONTAINER_RUNNING:
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"container {record.id} is not running")
        # The new file exists when the RPC returns, as containerd's (the kubelet's rotation
        # checks it); the shim, signalled, then appends to it.
        path = Path(record.log_path or Path(record.state_dir) / "container.log")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        except OSError as exc:
            raise CRIError(grpc.StatusCode.UNKNOWN, f"container {record.id}: reopen log {path}: {exc}") from exc
        if not reopen_log(Path(record.state_dir)):
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"container {record.id} is not running")

    # ---- UpdateContainerResources ----

    async def update_resources(self, container_id: str, resources: api_pb2.LinuxContainerResources) -> None:
        record = self.get(container_id)
        async with self._lock(record.id):
            if record.state() == api_pb2.CONTAINER_EXITED:
                raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"container {record.id} has exited")
            try:
                spec = resources_spec(resources)
            except SpecError as exc:
                raise invalid(str(exc).replace("config.linux.resources", "linux")) from None
            spec.pop("devices", None)  # runc update takes limits only
            try:
                await self.runc.update(record.id, spec)
            except RuncError as exc:
                raise CRIError(grpc.StatusCode.UNKNOWN, str(exc)) from exc
            config = record.config
            config.linux.resources.CopyFrom(resources)  # ContainerStatus reports what is applied
            record.set_config(config)
            self.store.save(record)

    # ---- ContainerStats / PodSandboxStats ----

    async def _cgroup(self, runc_id: str) -> dict[str, Any]:
        try:
            return await self.runc.stats(runc_id)
        except RuncError:
            return {}  # not running: no cgroup figures

    async def container_stats(self, record: ContainerRecord) -> api_pb2.ContainerStats:
        return (await self._container_stats(record))[0]

    async def _container_stats(self, record: ContainerRecord) -> tuple[api_pb2.ContainerStats, int]:
        """The container's stats and its process count (which ContainerStats has no field for)."""
        config = record.config
        stats = api_pb2.ContainerStats(attributes=api_pb2.ContainerAttributes(
            id=record.id, metadata=config.metadata, labels=config.labels, annotations=config.annotations))
        data = await self._cgroup(record.id) if record.state() == api_pb2.CONTAINER_RUNNING else {}
        stamp = now()
        if data:
            cpu_total = int(((data.get("cpu") or {}).get("usage") or {}).get("total", 0))
            stats.cpu.CopyFrom(self._cpu.usage(record.id, cpu_total, stamp))
            stats.memory.CopyFrom(memory_usage(data, stamp))
        stats.writable_layer.CopyFrom(directory_usage(self.store.directory(record.id) / "upper", stamp))
        return stats, int((data.get("pids") or {}).get("current", 0))

    async def stats(self, container_id: str) -> api_pb2.ContainerStats:
        return await self.container_stats(self.get(container_id))

    async def list_stats(self, selector: api_pb2.ContainerStatsFilter) -> list[api_pb2.ContainerStats]:
        chosen = [r for r in self.store.containers()
                  if (not selector.id or r.id.startswith(selector.id))
                  and (not selector.pod_sandbox_id or r.sandbox_id.startswith(selector.pod_sandbox_id))
                  and all(r.labels.get(k) == v for k, v in selector.label_selector.items())]
        return [await self.container_stats(r) for r in chosen]

    async def sandbox_stats(self, sandbox: SandboxRecord) -> api_pb2.PodSandboxStats:
        config = sandbox.config
        measured = [await self._container_stats(r) for r in self.store.containers() if r.sandbox_id == sandbox.id]
        containers = [stats for stats, _ in measured]
        stamp = now()
        pause = await self._cgroup(sandbox.id) if sandbox.state == READY else {}
        # The pod's figures: its pause plus its containers (each has its own cgroup here).
        cpu_total = int(((pause.get("cpu") or {}).get("usage") or {}).get("total", 0))
        cpu_total += sum(c.cpu.usage_core_nano_seconds.value for c in containers)
        memory = memory_usage(pause, stamp) if pause else api_pb2.MemoryUsage(timestamp=stamp)
        for c in containers:
            memory.working_set_bytes.value += c.memory.working_set_bytes.value
            memory.usage_bytes.value += c.memory.usage_bytes.value
            memory.rss_bytes.value += c.memory.rss_bytes.value
        processes = int((pause.get("pids") or {}).get("current", 0)) + sum(count for _, count in measured)
        linux = api_pb2.LinuxPodSandboxStats(
            cpu=self._cpu.usage(f"pod:{sandbox.id}", cpu_total, stamp), memory=memory,
            process=api_pb2.ProcessUsage(timestamp=stamp, process_count=api_pb2.UInt64Value(value=processes)),
            containers=containers)
        if sandbox.netns and sandbox.state == READY:
            linux.network.CopyFrom(network_usage(sandbox.pause_pid, stamp))
        return api_pb2.PodSandboxStats(attributes=api_pb2.PodSandboxAttributes(
            id=sandbox.id, metadata=config.metadata, labels=config.labels, annotations=config.annotations),
            linux=linux)

    async def pod_stats(self, sandbox_id: str) -> api_pb2.PodSandboxStats:
        return await self.sandbox_stats(self.sandboxes.get(sandbox_id))

    async def list_pod_stats(self, selector: api_pb2.PodSandboxStatsFilter) -> list[api_pb2.PodSandboxStats]:
        chosen = [s for s in self.sandboxes.store.sandboxes()
                  if (not selector.id or s.id.startswith(selector.id))
                  and all(s.labels.get(k) == v for k, v in selector.label_selector.items())]
        return [await self.sandbox_stats(s) for s in chosen]

"""Pod sandboxes: RunPodSandbox, StopPodSandbox, RemovePodSandbox, PodSandboxStatus, ListPodSandbox.

A sandbox is a network namespace (unless host network), a pause container under
runc holding the pod's namespaces, the pod's /etc files and a checkpoint. The
order of RunPodSandbox follows containerd: checkpoint (not ready), netns, pause,
network (CNI ADD), ready; a failure undoes what was done, in reverse.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import grpc

from cni import netns
from cni.invoke import PluginError
from cri.errors import CRIError, invalid, not_found
from cri.hostport import HostPortInUse, PortMapping
from cri.images.builtin import PAUSE_IMAGE
from cri.images.store import ImageRecord, ImageStore
from cri.network import NetworkNotReady, NetworkPluginManager, PodNetwork
from cri.oci_spec import SpecError, pause_spec, sandbox_hostname
from cri.rootfs import MountError, mount_overlay, unmount
from cri.runc import Runc, RuncError
from cri.sandbox_store import NOTREADY, READY, Ambiguous, NameReserved, NotFound, SandboxRecord, SandboxStore
from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)

PROTOCOLS = {api_pb2.TCP: "tcp", api_pb2.UDP: "udp", api_pb2.SCTP: "sctp"}
LOCALHOST_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
RUNTIME_HANDLERS = ("", "runc")
HOST_NAME_MAX = 64  # sethostname(2) refuses longer names


def _validate(config: api_pb2.PodSandboxConfig, runtime_handler: str) -> None:
    for name in ("name", "namespace", "uid"):
        if not getattr(config.metadata, name):
            raise invalid(f"config.metadata.{name} is required")
    if len(config.hostname) > HOST_NAME_MAX:
        raise invalid(f"config.hostname: must be at most {HOST_NAME_MAX} characters (the kernel's limit), "
                      f"got {len(config.hostname)}")
    if runtime_handler not in RUNTIME_HANDLERS:
        # containerd's words (the handlers here: "" and "runc", the default's name as containerd's)
        raise invalid(f'failed to get sandbox runtime: no runtime for "{runtime_handler}" is configured')
    for index, mapping in enumerate(config.port_mappings):
        if not 0 <= mapping.host_port <= 65535 or not 0 < mapping.container_port <= 65535:
            raise invalid(f"config.port_mappings[{index}]: ports must be within 1-65535")


def process_alive(pid: int) -> bool:
    """A running (not zombie) process: a killed pause stays a zombie until its reaper waits."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def host_network(config: api_pb2.PodSandboxConfig) -> bool:
    return config.linux.security_context.namespace_options.network == api_pb2.NODE


def _resolv_conf(config: api_pb2.PodSandboxConfig) -> str:
    dns = config.dns_config
    if not (dns.servers or dns.searches or dns.options):
        try:
            return Path("/etc/resolv.conf").read_text()
        except OSError:
            return ""
    lines = [f"search {' '.join(dns.searches)}"] if dns.searches else []
    lines += [f"nameserver {server}" for server in dns.servers]
    if dns.options:
        lines.append(f"options {' '.join(dns.options)}")
    return "\n".join(lines) + "\n"


@dataclass
class SandboxManager:
    store: SandboxStore
    images: ImageStore
    runc: Runc
    network: NetworkPluginManager
    # Hooks for the sandbox's containers: stopped before the pause, removed before the sandbox.
    stop_containers: Callable[[str], Awaitable[None]] | None = None
    remove_containers: Callable[[str], Awaitable[None]] | None = None
    # Stop and remove of one sandbox are serialised (kubelet retries overlap).
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def _lock(self, sandbox_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sandbox_id, asyncio.Lock())

    def get(self, sandbox_id: str) -> SandboxRecord:
        try:
            return self.store.get(sandbox_id)
        except (NotFound, Ambiguous) as exc:
            raise not_found(exc.args[0]) from None

    def pod_network(self, record: SandboxRecord) -> PodNetwork:
        config = record.config
        return PodNetwork(
            namespace=config.metadata.namespace, name=config.metadata.name, uid=config.metadata.uid,
            sandbox_id=record.id, netns=netns.path_of(record.netns) if record.netns else "",
            port_mappings=tuple(PortMapping(host_port=m.host_port, container_port=m.container_port,
                                            protocol=PROTOCOLS.get(m.protocol, "tcp"), host_ip=m.host_ip)
                                for m in config.port_mappings if m.host_port))

    # ---- RunPodSandbox ----

    async def run(self, config: api_pb2.PodSandboxConfig, runtime_handler: str) -> str:
        _validate(config, runtime_handler)
        pause = self.images.get(PAUSE_IMAGE)  # the index is cached: no disk read
        if pause is None:
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"sandbox image {PAUSE_IMAGE} is not in the image store")
        record = SandboxRecord.create(config, runtime_handler, created_at=time.time_ns())
        record.state = NOTREADY
        try:
            self.store.reserve(record)
        except NameReserved as exc:
            raise CRIError(grpc.StatusCode.ALREADY_EXISTS, str(exc)) from None
        pod = f"{config.metadata.namespace}/{config.metadata.name}"
        try:
            self.store.save(record)  # a crash from here on leaves a NOTREADY sandbox to stop and remove
            directory = self.store.directory(record.id)
            self._write_etc(directory, config)
            if not host_network(config):
                record.netns = f"cni-{uuid.uuid4()}"
                await netns.create(record.netns)
                self.store.save(record)
            # The pause container and the pod network only share the netns: set them up
            # at once (containerd does them in turn; this is most of a pod's start time).
            outcomes = await asyncio.gather(self._start_pause(record, pause), self._set_up_network(record),
                                            return_exceptions=True)
            failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
            if not failed:
                record.state = READY
            self.store.save(record)  # ready, or what the cleanup below has to undo
            if failed:
                raise failed[0]
        except BaseException as exc:
            log.warning("pod %s: RunPodSandbox failed, cleaning up sandbox %s: %s", pod, record.id[:13], exc)
            await asyncio.shield(self._destroy(record))
            if isinstance(exc, (NetworkNotReady, HostPortInUse)):
                raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"pod {pod}: {exc}") from exc
            if isinstance(exc, SpecError):
                raise invalid(str(exc)) from exc
            if isinstance(exc, (PluginError, RuncError, MountError, OSError, netns.NetnsError)):
                raise CRIError(grpc.StatusCode.UNKNOWN, f"pod {pod}: failed to start sandbox: {exc}") from exc
            raise
        log.info("pod %s: sandbox %s ready, IPs %s", pod, record.id[:13], record.ips)
        return record.id

    async def _start_pause(self, record: SandboxRecord, pause: ImageRecord) -> None:
        directory = self.store.directory(record.id)
        layers = self.images.unpacked(pause)
        if layers is None:
            layers = await asyncio.to_thread(self.images.unpack, pause)
        rootfs = await mount_overlay(layers, directory)
        spec = pause_spec(record.id, record.config, pause.run_config, rootfs,
                          netns.path_of(record.netns) if record.netns else "")
        (directory / "config.json").write_text(json.dumps(spec))
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            # One runc call instead of create + start (containerd makes two): nothing is
            # done to the pause between them, and each runc exec costs the node CPU.
            await self.runc.run_detached(record.id, directory, stdout=devnull, stderr=devnull,
                                         pid_file=directory / "pause.pid")
        finally:
            os.close(devnull)
        record.pause_pid = int((directory / "pause.pid").read_text())

    async def _set_up_network(self, record: SandboxRecord) -> None:
        if record.netns:
            record.ips = await self.network.set_up_pod(self.pod_network(record))
            record.network_ready = True

    def _write_etc(self, directory: Path, config: api_pb2.PodSandboxConfig) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hostname").write_text(sandbox_hostname(config) + "\n")
        (directory / "hosts").write_text(Path("/etc/hosts").read_text() if host_network(config)
                                         else LOCALHOST_HOSTS)
        (directory / "resolv.conf").write_text(_resolv_conf(config))

    # ---- StopPodSandbox / RemovePodSandbox ----

    async def _stop_pause(self, record: SandboxRecord) -> None:
        state = await self.runc.state(record.id)
        if state is None or state.status == "stopped":
            return
        try:
            await self.runc.kill(record.id, signal.SIGKILL, all_processes=True)
        except RuncError as exc:
            if "not running" not in exc.message and not exc.not_found:
                raise
        for _ in range(200):
            state = await self.runc.state(record.id)
            if state is None or state.status == "stopped":
                return
            await asyncio.sleep(0.01)
        raise CRIError(grpc.StatusCode.DEADLINE_EXCEEDED, f"sandbox {record.id}: pause did not stop after SIGKILL")

    async def stop(self, sandbox_id: str) -> None:
        try:
            record = self.store.get(sandbox_id)
        except NotFound:
            return  # nothing to stop: success, as the CRI asks (and containerd does)
        except Ambiguous as exc:
            raise not_found(exc.args[0]) from None
        if self.stop_containers is not None:
            await self.stop_containers(record.id)
        async with self._lock(record.id):
            try:
                await self._stop_pause(record)
                await self._teardown(record)
            except (PluginError, RuncError, netns.NetnsError) as exc:
                raise CRIError(grpc.StatusCode.UNKNOWN, f"sandbox {record.id}: stop failed: {exc}") from exc
            finally:
                self.store.save(record)  # keep what was undone, so a retry only redoes the rest
            record.state = NOTREADY
            self.store.save(record)
        log.info("sandbox %s stopped", record.id[:13])

    async def _destroy(self, record: SandboxRecord) -> None:
        """Undo everything a sandbox may hold; each step tolerates what is already gone."""
        steps: list[Callable[[], Awaitable[None]]] = [
            lambda: self._stop_pause(record), lambda: self._teardown(record),
            lambda: self.runc.delete(record.id, force=True), lambda: unmount(self.store.directory(record.id))]
        for step in steps:
            try:
                await step()
            except Exception as exc:  # keep going: leave as little behind as possible
                log.warning("sandbox %s: cleanup step failed: %s", record.id[:13], exc)
        self.store.delete(record)

    async def _teardown(self, record: SandboxRecord) -> None:
        if record.network_ready:
            await self.network.tear_down_pod(self.pod_network(record))
            record.network_ready = False
        if record.netns:
            await netns.delete(record.netns)

    async def remove(self, sandbox_id: str) -> None:
        try:
            record = self.store.get(sandbox_id)
        except NotFound:
            return  # already removed: success, as the CRI asks
        except Ambiguous as exc:
            raise not_found(exc.args[0]) from None
        await self.stop(record.id)
        if self.remove_containers is not None:
            await self.remove_containers(record.id)
        async with self._lock(record.id):
            try:
                await self.runc.delete(record.id, force=True)
                await unmount(self.store.directory(record.id))
            except (RuncError, MountError) as exc:
                raise CRIError(grpc.StatusCode.UNKNOWN, f"sandbox {record.id}: remove failed: {exc}") from exc
            self.store.delete(record)
        self._locks.pop(record.id, None)
        log.info("sandbox %s removed", record.id[:13])

    # ---- PodSandboxStatus / ListPodSandbox ----

    async def refresh(self, record: SandboxRecord) -> SandboxRecord:
        """A ready sandbox whose pause process died is not ready."""
        if record.state == READY and not process_alive(record.pause_pid):
            record.state = NOTREADY
            self.store.save(record)
        return record

    async def status(self, sandbox_id: str, verbose: bool) -> api_pb2.PodSandboxStatusResponse:
        record = await self.refresh(self.get(sandbox_id))
        config = record.config
        status = api_pb2.PodSandboxStatus(
            id=record.id, metadata=config.metadata, created_at=record.created_at,
            state=api_pb2.SANDBOX_READY if record.state == READY else api_pb2.SANDBOX_NOTREADY,
            labels=config.labels, annotations=config.annotations, runtime_handler=record.runtime_handler,
            linux=api_pb2.LinuxPodSandboxStatus(namespaces=api_pb2.Namespace(
                options=config.linux.security_context.namespace_options)))
        if record.ips:
            status.network.ip = record.ips[0]
            status.network.additional_ips.extend(api_pb2.PodIP(ip=ip) for ip in record.ips[1:])
        info: dict[str, str] = {}
        if verbose:
            info["info"] = json.dumps({"pid": record.pause_pid, "netns": netns.path_of(record.netns)
                                       if record.netns else "", "image": PAUSE_IMAGE,
                                       "runtimeHandler": record.runtime_handler or "runc"})
        return api_pb2.PodSandboxStatusResponse(status=status, info=info, timestamp=time.time_ns())

    async def list_sandboxes(self, selector: api_pb2.PodSandboxFilter) -> list[api_pb2.PodSandbox]:
        out: list[api_pb2.PodSandbox] = []
        wanted = dict(selector.label_selector).items()
        for record in self.store.sandboxes():
            if selector.id and not record.id.startswith(selector.id):
                continue
            labels = record.labels
            if any(labels.get(k) != v for k, v in wanted):
                continue
            config = record.config
            record = await self.refresh(record)
            state = api_pb2.SANDBOX_READY if record.state == READY else api_pb2.SANDBOX_NOTREADY
            if selector.HasField("state") and selector.state.state != state:
                continue
            out.append(api_pb2.PodSandbox(id=record.id, metadata=config.metadata, state=state,
                                          created_at=record.created_at, labels=config.labels,
                                          annotations=config.annotations, runtime_handler=record.runtime_handler))
        return out

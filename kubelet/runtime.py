"""The kubelet's view of its CRI runtime: a client of the runtime.v1 API, and the
per-pod runtime state it reads back (upstream's kubecontainer.PodStatus).

The API is reached over its socket, or, when the kubelet hosts the runtime itself, by
calling the runtime's handlers directly with the same runtime.v1 messages: a gRPC call
costs this interpreter more CPU on each side than most handlers do, a dozen calls per
pod start plus the PLEG's relists. Every other client (crictl, critest, a second
kubelet) still uses the socket.

The kubelet keeps no container state of its own: what runs is whatever the runtime
lists under the pod's UID label, so a restarted kubelet sees exactly what the old
one left (restart counts and init/app kind travel in labels and annotations).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import grpc
from google.protobuf.message import Message
from opentelemetry import trace

from kubelet import labels
from kubelet.termination import termination_message
from kubeling.telemetry import span_if_tracing
from protos.runtime.v1 import api_pb2, api_pb2_grpc

__all__ = ["Runtime", "CRICallError", "ContainerInfo", "SandboxInfo", "PodRuntimeStatus"]

log = logging.getLogger(__name__)
_TRACER = trace.get_tracer("kubelet.runtime")
RUNTIME_SERVICE, IMAGE_SERVICE = "RuntimeService", "ImageService"

RUNNING = api_pb2.CONTAINER_RUNNING
EXITED = api_pb2.CONTAINER_EXITED
CREATED = api_pb2.CONTAINER_CREATED
UNKNOWN = api_pb2.CONTAINER_UNKNOWN
SANDBOX_READY = api_pb2.SANDBOX_READY


class CRICallError(Exception):
    """A CRI call failed; `code` is its gRPC status code."""

    def __init__(self, call: str, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        super().__init__(f"{call}: {code.name}: {details}")


class _Transport(Protocol):
    async def call(self, service: str, method: str, request: Message, timeout: float) -> Any: ...

    async def close(self) -> None: ...


class _Socket:
    """runtime.v1 over gRPC."""

    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.aio.insecure_channel(endpoint)
        self.stubs: dict[str, object] = {RUNTIME_SERVICE: api_pb2_grpc.RuntimeServiceStub(self.channel),
                                         IMAGE_SERVICE: api_pb2_grpc.ImageServiceStub(self.channel)}

    async def call(self, service: str, method: str, request: Message, timeout: float) -> Any:
        try:
            return await getattr(self.stubs[service], method)(request, timeout=timeout, wait_for_ready=True)
        except grpc.aio.AioRpcError as err:
            raise CRICallError(method, err.code(), err.details() or "") from None

    async def close(self) -> None:
        await self.channel.close()


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class _HandlerContext:
    """What the runtime's handlers use of a gRPC servicer context: abort."""

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: object = ()) -> NoReturn:
        raise _Aborted(code, details)


class _InProcess:
    """runtime.v1 by calling the servicers' handlers in this process. Errors come out as
    they would through gRPC: an abort's code and details, a deadline as DEADLINE_EXCEEDED,
    anything unexpected as UNKNOWN."""

    def __init__(self, runtime: api_pb2_grpc.RuntimeServiceServicer,
                 images: api_pb2_grpc.ImageServiceServicer) -> None:
        self.servicers: dict[str, object] = {RUNTIME_SERVICE: runtime, IMAGE_SERVICE: images}

    async def call(self, service: str, method: str, request: Message, timeout: float) -> Any:
        handler = getattr(self.servicers[service], method)
        own = type(request)()
        own.CopyFrom(request)  # the runtime keeps parts of requests (a sandbox's config): no sharing
        # The span a gRPC client would have made, under the same name.
        with span_if_tracing(_TRACER, f"/runtime.v1.{service}/{method}",
                             attributes=lambda: {"rpc.system": "in-process", "rpc.service": f"runtime.v1.{service}",
                                                 "rpc.method": method}, child_only=True):
            deadline = asyncio.timeout(timeout)
            try:
                async with deadline:
                    return await handler(own, _HandlerContext())
            except _Aborted as aborted:
                raise CRICallError(method, aborted.code, aborted.details) from None
            except TimeoutError as exc:
                if deadline.expired():
                    raise CRICallError(method, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
                raise CRICallError(method, grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}") from exc
            except Exception as exc:
                log.exception("CRI %s failed unexpectedly", method)
                raise CRICallError(method, grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        pass


@dataclass
class ContainerInfo:
    id: str
    name: str
    state: int  # api_pb2.ContainerState
    created_at: int  # ns
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    image: str = ""
    image_ref: str = ""
    restart_count: int = 0
    hash: str = ""
    init: bool = False
    log_path: str = ""
    restart_policy: str = ""  # an init container's (Always: a sidecar), from its annotation
    applied: api_pb2.LinuxContainerResources | None = None  # the resources the runtime applies now


@dataclass
class SandboxInfo:
    id: str
    ready: bool
    attempt: int
    created_at: int
    ip: str = ""
    ips: list[str] = field(default_factory=list)


@dataclass
class PodRuntimeStatus:
    uid: str
    sandboxes: list[SandboxInfo] = field(default_factory=list)  # newest first
    containers: list[ContainerInfo] = field(default_factory=list)  # newest first

    def by_name(self, name: str, init: bool = False) -> list[ContainerInfo]:
        """This container's instances, newest first."""
        return [c for c in self.containers if c.name == name and c.init == init]

    def latest(self, name: str, init: bool = False) -> ContainerInfo | None:
        found = self.by_name(name, init)
        return found[0] if found else None

    def states(self) -> dict[str, int]:
        """Each sandbox's and container's state, keyed by id, as the PLEG records them
        (sandboxes as 100 + their CRI state) so the two can be compared."""
        out = {s.id: 100 + (api_pb2.SANDBOX_READY if s.ready else api_pb2.SANDBOX_NOTREADY) for s in self.sandboxes}
        out.update((c.id, c.state) for c in self.containers)
        return out

    @property
    def ready_sandbox(self) -> SandboxInfo | None:
        return self.sandboxes[0] if self.sandboxes and self.sandboxes[0].ready else None


class Runtime:
    """Thin async client of a CRI runtime: its socket (`endpoint`), or its servicers in
    this process (`in_process`); every failure is a CRICallError."""

    def __init__(self, endpoint: str, timeout: float = 120.0, *, transport: _Transport | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._transport: _Transport = transport or _Socket(endpoint)

    @classmethod
    def in_process(cls, endpoint: str, runtime: api_pb2_grpc.RuntimeServiceServicer,
                   images: api_pb2_grpc.ImageServiceServicer, timeout: float = 120.0) -> Runtime:
        """The runtime served in this process (at `endpoint` for everyone else)."""
        return cls(endpoint, timeout, transport=_InProcess(runtime, images))

    async def close(self) -> None:
        await self._transport.close()

    async def _call(self, service: str, method: str, request: Message, timeout: float | None = None) -> Any:
        """`method` of `service`: the reply, typed by each caller (the generated stubs are untyped)."""
        return await self._transport.call(service, method, request, timeout or self.timeout)

    # ---- runtime ----

    async def version(self) -> api_pb2.VersionResponse:
        return await self._call(RUNTIME_SERVICE, "Version", api_pb2.VersionRequest())

    async def status(self) -> api_pb2.StatusResponse:
        return await self._call(RUNTIME_SERVICE, "Status", api_pb2.StatusRequest())

    async def update_pod_cidr(self, cidr: str) -> None:
        await self._call(RUNTIME_SERVICE, "UpdateRuntimeConfig", api_pb2.UpdateRuntimeConfigRequest(
            runtime_config=api_pb2.RuntimeConfig(network_config=api_pb2.NetworkConfig(pod_cidr=cidr))))

    # ---- sandboxes ----

    async def run_sandbox(self, config: api_pb2.PodSandboxConfig, runtime_handler: str = "") -> str:
        reply = await self._call(RUNTIME_SERVICE, "RunPodSandbox",
                                 api_pb2.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler))
        return reply.pod_sandbox_id

    async def sandbox_status(self, sandbox_id: str) -> api_pb2.PodSandboxStatus:
        reply = await self._call(RUNTIME_SERVICE, "PodSandboxStatus",
                                 api_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
        return reply.status

    async def stop_sandbox(self, sandbox_id: str) -> None:
        await self._call(RUNTIME_SERVICE, "StopPodSandbox", api_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))

    async def remove_sandbox(self, sandbox_id: str) -> None:
        await self._call(RUNTIME_SERVICE, "RemovePodSandbox",
                         api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))

    async def list_sandboxes(self, uid: str = "") -> list[api_pb2.PodSandbox]:
        flt = api_pb2.PodSandboxFilter(label_selector={labels.POD_UID: uid} if uid else {})
        reply = await self._call(RUNTIME_SERVICE, "ListPodSandbox", api_pb2.ListPodSandboxRequest(filter=flt))
        return list(reply.items)

    # ---- containers ----

    async def create_container(self, sandbox_id: str, config: api_pb2.ContainerConfig,
                               sandbox_config: api_pb2.PodSandboxConfig) -> str:
        reply = await self._call(RUNTIME_SERVICE, "CreateContainer", api_pb2.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config))
        return reply.container_id

    async def start_container(self, container_id: str) -> None:
        await self._call(RUNTIME_SERVICE, "StartContainer", api_pb2.StartContainerRequest(container_id=container_id))

    async def stop_container(self, container_id: str, timeout: int) -> None:
        await self._call(RUNTIME_SERVICE, "StopContainer",
                         api_pb2.StopContainerRequest(container_id=container_id, timeout=timeout),
                         timeout=self.timeout + timeout)

    async def remove_container(self, container_id: str) -> None:
        await self._call(RUNTIME_SERVICE, "RemoveContainer", api_pb2.RemoveContainerRequest(container_id=container_id))

    async def list_containers(self, uid: str = "") -> list[api_pb2.Container]:
        flt = api_pb2.ContainerFilter(label_selector={labels.POD_UID: uid} if uid else {})
        reply = await self._call(RUNTIME_SERVICE, "ListContainers", api_pb2.ListContainersRequest(filter=flt))
        return list(reply.containers)

    async def container_status(self, container_id: str) -> api_pb2.ContainerStatus:
        reply = await self._call(RUNTIME_SERVICE, "ContainerStatus",
                                 api_pb2.ContainerStatusRequest(container_id=container_id))
        return reply.status

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> api_pb2.ExecSyncResponse:
        return await self._call(
            RUNTIME_SERVICE, "ExecSync", api_pb2.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=timeout),
            timeout=timeout + 10 if timeout else None)

    # ---- streaming: each answers the runtime's one-time URL for the session ----

    async def exec_url(self, container_id: str, cmd: list[str], tty: bool, stdin: bool, stdout: bool,
                       stderr: bool) -> str:
        reply = await self._call(RUNTIME_SERVICE, "Exec", api_pb2.ExecRequest(
            container_id=container_id, cmd=cmd, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr))
        return reply.url

    async def attach_url(self, container_id: str, tty: bool, stdin: bool, stdout: bool, stderr: bool) -> str:
        reply = await self._call(RUNTIME_SERVICE, "Attach", api_pb2.AttachRequest(
            container_id=container_id, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr))
        return reply.url

    async def port_forward_url(self, sandbox_id: str, ports: list[int]) -> str:
        reply = await self._call(RUNTIME_SERVICE, "PortForward",
                                 api_pb2.PortForwardRequest(pod_sandbox_id=sandbox_id, port=ports))
        return reply.url

    # ---- images ----

    async def image_present(self, image: str) -> bool:
        reply = await self._call(IMAGE_SERVICE, "ImageStatus",
                                 api_pb2.ImageStatusRequest(image=api_pb2.ImageSpec(image=image)))
        return reply.HasField("image")

    async def update_container_resources(self, container_id: str,
                                         resources: api_pb2.LinuxContainerResources) -> None:
        await self._call(RUNTIME_SERVICE, "UpdateContainerResources", api_pb2.UpdateContainerResourcesRequest(
            container_id=container_id, linux=resources))

    async def reopen_container_log(self, container_id: str) -> None:
        await self._call(RUNTIME_SERVICE, "ReopenContainerLog",
                         api_pb2.ReopenContainerLogRequest(container_id=container_id))

    async def list_images(self) -> list[api_pb2.Image]:
        reply = await self._call(IMAGE_SERVICE, "ListImages", api_pb2.ListImagesRequest())
        return list(reply.images)

    async def remove_image(self, image_id: str) -> None:
        await self._call(IMAGE_SERVICE, "RemoveImage", api_pb2.RemoveImageRequest(image=api_pb2.ImageSpec(
            image=image_id)))

    async def image_fs_info(self) -> list[api_pb2.FilesystemUsage]:
        reply = await self._call(IMAGE_SERVICE, "ImageFsInfo", api_pb2.ImageFsInfoRequest())
        return list(reply.image_filesystems)

    async def pull_image(self, image: str, sandbox_config: api_pb2.PodSandboxConfig) -> str:
        reply = await self._call(IMAGE_SERVICE, "PullImage", api_pb2.PullImageRequest(
            image=api_pb2.ImageSpec(image=image), sandbox_config=sandbox_config))
        return reply.image_ref

    async def list_pod_stats(self) -> list[api_pb2.PodSandboxStats]:
        """Every pod sandbox's CPU and memory, with its containers' (CRI ListPodSandboxStats)."""
        reply = await self._call("RuntimeService", "ListPodSandboxStats", api_pb2.ListPodSandboxStatsRequest())
        return list(reply.stats)

    # ---- one pod's state ----

    async def pod_status(self, uid: str) -> PodRuntimeStatus:
        status = PodRuntimeStatus(uid)
        for sandbox in sorted(await self.list_sandboxes(uid), key=lambda s: s.created_at, reverse=True):
            info = SandboxInfo(sandbox.id, sandbox.state == api_pb2.SANDBOX_READY, sandbox.metadata.attempt,
                               sandbox.created_at)
            if info.ready:
                try:
                    network = (await self.sandbox_status(sandbox.id)).network
                    info.ip = network.ip
                    info.ips = [network.ip, *(ip.ip for ip in network.additional_ips)] if network.ip else []
                except CRICallError as exc:
                    if exc.code != grpc.StatusCode.NOT_FOUND:
                        raise
                    continue  # removed meanwhile
            status.sandboxes.append(info)
        for container in await self.list_containers(uid):
            try:
                cs = await self.container_status(container.id)
            except CRICallError as exc:
                if exc.code == grpc.StatusCode.NOT_FOUND:
                    continue  # removed meanwhile
                raise
            annotations = cs.annotations
            message = cs.message
            if cs.state == EXITED and (left := termination_message(cs)):
                message = f"{message}: {left}" if message else left  # the runtime's words, then the container's
            status.containers.append(ContainerInfo(
                id=cs.id, name=cs.metadata.name, state=cs.state, created_at=cs.created_at, started_at=cs.started_at,
                finished_at=cs.finished_at, exit_code=cs.exit_code, reason=cs.reason, message=message,
                image=cs.image.image, image_ref=cs.image_ref,
                restart_count=_int(annotations.get(labels.RESTART_COUNT, "")) or cs.metadata.attempt,
                hash=annotations.get(labels.CONTAINER_HASH, ""),
                init=cs.labels.get(labels.CONTAINER_TYPE, "") == labels.INIT, log_path=cs.log_path,
                restart_policy=annotations.get(labels.RESTART_POLICY, ""),
                applied=cs.resources.linux if cs.HasField("resources") else None))
        status.containers.sort(key=lambda c: c.created_at, reverse=True)
        return status


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0

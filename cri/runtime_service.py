"""runtime.v1 RuntimeService: runtime information, status, pod sandboxes and containers.

Handlers translate; the work is in sandboxes.py and containers.py, and Exec,
Attach and PortForward hand out URLs on the streaming server (streaming/). Every
RPC of protos/runtime/v1 is implemented here (a test checks it); RPCs outside that
subset (Stream*, checkpoint, events, metrics) get gRPC's own UNIMPLEMENTED.
"""

from __future__ import annotations

import ipaddress
import json
import logging

import grpc

from cri.containers import ContainerManager
from cri.errors import CRIError, translate_errors
from cri.network import POD_CIDR_CHANGE, NetworkNotReady, NetworkPluginManager
from cri.sandbox_store import READY
from cri.sandboxes import SandboxManager
from cri.streaming import StreamingServer
from protos.runtime.v1 import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)

RUNTIME_NAME = "kubeling"
RUNTIME_VERSION = "0.1.0"
RUNTIME_API_VERSION = "v1"
# The kubelet's runtime API version string, as containerd and CRI-O answer it.
KUBELET_API_VERSION = "0.1.0"


class RuntimeService(api_pb2_grpc.RuntimeServiceServicer):
    def __init__(self, network: NetworkPluginManager, sandboxes: SandboxManager,
                 containers: ContainerManager, streaming: StreamingServer) -> None:
        self.network = network
        self.sandboxes = sandboxes
        self.containers = containers
        self.streaming = streaming

    # ---- pod sandboxes (cri/sandboxes.py) ----

    @translate_errors
    async def RunPodSandbox(self, request: api_pb2.RunPodSandboxRequest,
                            context: grpc.aio.ServicerContext) -> api_pb2.RunPodSandboxResponse:
        sandbox_id = await self.sandboxes.run(request.config, request.runtime_handler)
        return api_pb2.RunPodSandboxResponse(pod_sandbox_id=sandbox_id)

    @translate_errors
    async def StopPodSandbox(self, request: api_pb2.StopPodSandboxRequest,
                             context: grpc.aio.ServicerContext) -> api_pb2.StopPodSandboxResponse:
        await self.sandboxes.stop(request.pod_sandbox_id)
        return api_pb2.StopPodSandboxResponse()

    @translate_errors
    async def RemovePodSandbox(self, request: api_pb2.RemovePodSandboxRequest,
                               context: grpc.aio.ServicerContext) -> api_pb2.RemovePodSandboxResponse:
        await self.sandboxes.remove(request.pod_sandbox_id)
        return api_pb2.RemovePodSandboxResponse()

    @translate_errors
    async def PodSandboxStatus(self, request: api_pb2.PodSandboxStatusRequest,
                               context: grpc.aio.ServicerContext) -> api_pb2.PodSandboxStatusResponse:
        return await self.sandboxes.status(request.pod_sandbox_id, request.verbose)

    @translate_errors
    async def ListPodSandbox(self, request: api_pb2.ListPodSandboxRequest,
                             context: grpc.aio.ServicerContext) -> api_pb2.ListPodSandboxResponse:
        return api_pb2.ListPodSandboxResponse(items=await self.sandboxes.list_sandboxes(request.filter))

    # ---- containers (cri/containers.py) ----

    @translate_errors
    async def CreateContainer(self, request: api_pb2.CreateContainerRequest,
                              context: grpc.aio.ServicerContext) -> api_pb2.CreateContainerResponse:
        container_id = await self.containers.create(request.pod_sandbox_id, request.config)
        return api_pb2.CreateContainerResponse(container_id=container_id)

    @translate_errors
    async def StartContainer(self, request: api_pb2.StartContainerRequest,
                             context: grpc.aio.ServicerContext) -> api_pb2.StartContainerResponse:
        await self.containers.start(request.container_id)
        return api_pb2.StartContainerResponse()

    @translate_errors
    async def StopContainer(self, request: api_pb2.StopContainerRequest,
                            context: grpc.aio.ServicerContext) -> api_pb2.StopContainerResponse:
        await self.containers.stop(request.container_id, int(request.timeout))
        return api_pb2.StopContainerResponse()

    @translate_errors
    async def RemoveContainer(self, request: api_pb2.RemoveContainerRequest,
                              context: grpc.aio.ServicerContext) -> api_pb2.RemoveContainerResponse:
        await self.containers.remove(request.container_id)
        return api_pb2.RemoveContainerResponse()

    @translate_errors
    async def ListContainers(self, request: api_pb2.ListContainersRequest,
                             context: grpc.aio.ServicerContext) -> api_pb2.ListContainersResponse:
        return api_pb2.ListContainersResponse(containers=self.containers.list_containers(request.filter))

    @translate_errors
    async def ContainerStatus(self, request: api_pb2.ContainerStatusRequest,
                              context: grpc.aio.ServicerContext) -> api_pb2.ContainerStatusResponse:
        return self.containers.status(request.container_id, request.verbose)

    @translate_errors
    async def ExecSync(self, request: api_pb2.ExecSyncRequest,
                       context: grpc.aio.ServicerContext) -> api_pb2.ExecSyncResponse:
        return await self.containers.exec_sync(request.container_id, list(request.cmd), int(request.timeout))

    @translate_errors
    async def ReopenContainerLog(self, request: api_pb2.ReopenContainerLogRequest,
                                 context: grpc.aio.ServicerContext) -> api_pb2.ReopenContainerLogResponse:
        self.containers.reopen_log(request.container_id)
        return api_pb2.ReopenContainerLogResponse()

    @translate_errors
    async def UpdateContainerResources(
            self, request: api_pb2.UpdateContainerResourcesRequest,
            context: grpc.aio.ServicerContext) -> api_pb2.UpdateContainerResourcesResponse:
        await self.containers.update_resources(request.container_id, request.linux)
        return api_pb2.UpdateContainerResourcesResponse()

    @translate_errors
    async def ContainerStats(self, request: api_pb2.ContainerStatsRequest,
                             context: grpc.aio.ServicerContext) -> api_pb2.ContainerStatsResponse:
        return api_pb2.ContainerStatsResponse(stats=await self.containers.stats(request.container_id))

    @translate_errors
    async def ListContainerStats(self, request: api_pb2.ListContainerStatsRequest,
                                 context: grpc.aio.ServicerContext) -> api_pb2.ListContainerStatsResponse:
        return api_pb2.ListContainerStatsResponse(stats=await self.containers.list_stats(request.filter))

    @translate_errors
    async def PodSandboxStats(self, request: api_pb2.PodSandboxStatsRequest,
                              context: grpc.aio.ServicerContext) -> api_pb2.PodSandboxStatsResponse:
        return api_pb2.PodSandboxStatsResponse(stats=await self.containers.pod_stats(request.pod_sandbox_id))

    @translate_errors
    async def ListPodSandboxStats(self, request: api_pb2.ListPodSandboxStatsRequest,
                                  context: grpc.aio.ServicerContext) -> api_pb2.ListPodSandboxStatsResponse:
        return api_pb2.ListPodSandboxStatsResponse(stats=await self.containers.list_pod_stats(request.filter))

    # ---- runtime ----

    @translate_errors
    async def Version(self, request: api_pb2.VersionRequest,
                      context: grpc.aio.ServicerContext) -> api_pb2.VersionResponse:
        return api_pb2.VersionResponse(version=KUBELET_API_VERSION, runtime_name=RUNTIME_NAME,
                                       runtime_version=RUNTIME_VERSION, runtime_api_version=RUNTIME_API_VERSION)

    @translate_errors
    async def Status(self, request: api_pb2.StatusRequest,
                     context: grpc.aio.ServicerContext) -> api_pb2.StatusResponse:
        runtime = api_pb2.RuntimeCondition(type="RuntimeReady", status=True)
        network = api_pb2.RuntimeCondition(type="NetworkReady", status=True)
        try:
            self.network.status()
        except NetworkNotReady as exc:
            network.status, network.reason = False, "NetworkPluginNotReady"
            network.message = f"Network plugin returns error: {exc}"
        info: dict[str, str] = {}
        if request.verbose:
            default = self.network.default_network()
            info["config"] = json.dumps({"cniConfDir": str(self.network.conf_dir),
                                         "cniNetwork": default.name if default else None,
                                         "cniConfig": default.source if default else None})
        return api_pb2.StatusResponse(
            status=api_pb2.RuntimeStatus(conditions=[runtime, network]), info=info,
            runtime_handlers=[api_pb2.RuntimeHandler(name="", features=api_pb2.RuntimeHandlerFeatures())],
            features=api_pb2.RuntimeFeatures(supplemental_groups_policy=True))

    @translate_errors
    async def UpdateRuntimeConfig(self, request: api_pb2.UpdateRuntimeConfigRequest,
                                  context: grpc.aio.ServicerContext) -> api_pb2.UpdateRuntimeConfigResponse:
        cidr = request.runtime_config.network_config.pod_cidr
        if cidr:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"runtime_config.network_config.pod_cidr: {exc}")
            self.network.event(POD_CIDR_CHANGE, {"podCIDR": cidr})
            log.info("pod CIDR is now %s", cidr)
        return api_pb2.UpdateRuntimeConfigResponse()

    @translate_errors
    async def RuntimeConfig(self, request: api_pb2.RuntimeConfigRequest,
                            context: grpc.aio.ServicerContext) -> api_pb2.RuntimeConfigResponse:
        return api_pb2.RuntimeConfigResponse(
            linux=api_pb2.LinuxRuntimeConfiguration(cgroup_driver=api_pb2.CGROUPFS))

    # ---- streaming (cri/streaming): a single-use URL on the streaming server ----

    def _running_container(self, container_id: str) -> str:
        record = self.containers.get(container_id)
        state = record.state()
        if state != api_pb2.CONTAINER_RUNNING:
            raise CRIError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"container {record.id} is in {api_pb2.ContainerState.Name(state)} state, not running")
        return record.id

    @translate_errors
    async def Exec(self, request: api_pb2.ExecRequest, context: grpc.aio.ServicerContext) -> api_pb2.ExecResponse:
        if request.container_id:
            request.container_id = self._running_container(request.container_id)
        return api_pb2.ExecResponse(url=self.streaming.get_exec(request))

    @translate_errors
    async def Attach(self, request: api_pb2.AttachRequest,
                     context: grpc.aio.ServicerContext) -> api_pb2.AttachResponse:
        if request.container_id:
            request.container_id = self._running_container(request.container_id)
        return api_pb2.AttachResponse(url=self.streaming.get_attach(request))

    @translate_errors
    async def PortForward(self, request: api_pb2.PortForwardRequest,
                          context: grpc.aio.ServicerContext) -> api_pb2.PortForwardResponse:
        if request.pod_sandbox_id:
            sandbox = await self.sandboxes.refresh(self.sandboxes.get(request.pod_sandbox_id))
            if sandbox.state != READY:
                raise CRIError(grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {sandbox.id} is not running")
            request.pod_sandbox_id = sandbox.id
        return api_pb2.PortForwardResponse(url=self.streaming.get_port_forward(request))

"""runtime.v1 RuntimeService: runtime information and status.

Sandbox and container RPCs are not built yet; until they are, they answer
UNIMPLEMENTED naming the method (rather than the generated base class's
NotImplementedError, which logs a traceback per call).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import Any, Callable, Coroutine

import grpc

from cni.manager import POD_CIDR_CHANGE, NetworkNotReady, NetworkPluginManager
from protos.runtime.v1 import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)

RUNTIME_NAME = "kubeling"
RUNTIME_VERSION = "0.1.0"
RUNTIME_API_VERSION = "v1"
# The kubelet's runtime API version string, as containerd and CRI-O answer it.
KUBELET_API_VERSION = "0.1.0"

STREAMING_UNSUPPORTED = ("{method} is not supported by kubeling's CRI runtime yet: there is no streaming "
                         "server; use ExecSync for commands")


class RuntimeService(api_pb2_grpc.RuntimeServiceServicer):
    def __init__(self, network: NetworkPluginManager) -> None:
        self.network = network

    async def Version(self, request: api_pb2.VersionRequest,
                      context: grpc.aio.ServicerContext) -> api_pb2.VersionResponse:
        return api_pb2.VersionResponse(version=KUBELET_API_VERSION, runtime_name=RUNTIME_NAME,
                                       runtime_version=RUNTIME_VERSION, runtime_api_version=RUNTIME_API_VERSION)

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
            features=api_pb2.RuntimeFeatures())

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

    async def RuntimeConfig(self, request: api_pb2.RuntimeConfigRequest,
                            context: grpc.aio.ServicerContext) -> api_pb2.RuntimeConfigResponse:
        return api_pb2.RuntimeConfigResponse(
            linux=api_pb2.LinuxRuntimeConfiguration(cgroup_driver=api_pb2.CGROUPFS))

    async def Exec(self, request: api_pb2.ExecRequest, context: grpc.aio.ServicerContext) -> api_pb2.ExecResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, STREAMING_UNSUPPORTED.format(method="Exec"))
        raise AssertionError("unreachable")

    async def Attach(self, request: api_pb2.AttachRequest,
                     context: grpc.aio.ServicerContext) -> api_pb2.AttachResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, STREAMING_UNSUPPORTED.format(method="Attach"))
        raise AssertionError("unreachable")

    async def PortForward(self, request: api_pb2.PortForwardRequest,
                          context: grpc.aio.ServicerContext) -> api_pb2.PortForwardResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, STREAMING_UNSUPPORTED.format(method="PortForward"))
        raise AssertionError("unreachable")


def _not_built(method: str) -> Callable[..., Coroutine[Any, Any, None]]:
    async def handler(self: RuntimeService, request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            f"{method} is not implemented by kubeling's CRI runtime yet")
    handler.__name__ = method
    return handler


for _method in api_pb2.DESCRIPTOR.services_by_name["RuntimeService"].methods:
    if _method.name not in RuntimeService.__dict__:
        setattr(RuntimeService, _method.name, _not_built(_method.name))

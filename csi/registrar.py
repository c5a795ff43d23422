"""What upstream's node-driver-registrar sidecar does: a socket in the kubelet's plugin
registry directory (`<kubelet root>/plugins_registry/<driver>-reg.sock`) serving the
kubelet's Registration API, saying which driver this is and where its CSI socket is. The
kubelet's plugin watcher finds the socket, asks GetInfo, registers the driver and says how
that went (NotifyRegistrationStatus)."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from kubeling.unixsocket import SocketAddress
from protos.pluginregistration.v1 import api_pb2, api_pb2_grpc

__all__ = ["Registrar", "CSI_PLUGIN", "SUPPORTED_VERSIONS", "socket_path"]

log = logging.getLogger(__name__)

CSI_PLUGIN = "CSIPlugin"
SUPPORTED_VERSIONS = ("1.0.0",)


def socket_path(registry_dir: Path, driver: str) -> Path:
    return registry_dir / f"{driver}-reg.sock"


class _Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, registrar: Registrar) -> None:
        self.registrar = registrar

    async def GetInfo(self, request: api_pb2.InfoRequest, context: grpc.aio.ServicerContext) -> api_pb2.PluginInfo:
        r = self.registrar
        return api_pb2.PluginInfo(type=CSI_PLUGIN, name=r.driver, endpoint=str(r.endpoint),
                                  supported_versions=list(SUPPORTED_VERSIONS))

    async def NotifyRegistrationStatus(self, request: api_pb2.RegistrationStatus,
                                       context: grpc.aio.ServicerContext) -> api_pb2.RegistrationStatusResponse:
        self.registrar.registered = request.plugin_registered
        if request.plugin_registered:
            log.info("kubelet registered CSI driver %s", self.registrar.driver)
        else:
            log.error("kubelet refused to register CSI driver %s: %s", self.registrar.driver, request.error)
        return api_pb2.RegistrationStatusResponse()


class Registrar:
    """The registration socket of one driver whose CSI socket is `endpoint`."""

    def __init__(self, driver: str, endpoint: Path, registry_dir: Path) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.path = socket_path(registry_dir, driver)
        self.registered = False
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        server = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        address = SocketAddress(self.path)
        try:
            server.add_insecure_port(address.target())
            await server.start()
        finally:
            address.close()
        self._server = server

    async def stop(self) -> None:
        """The socket goes away: the kubelet's watcher deregisters the driver."""
        if self._server is not None:
            await self._server.stop(grace=1)
            self._server = None
        self.path.unlink(missing_ok=True)

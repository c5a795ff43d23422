"""csi.v1.Identity: who the driver is, what it offers, and whether it is ready."""

from __future__ import annotations

import grpc
from google.protobuf import wrappers_pb2

from csi.hostpath.driver import Driver
from protos.csi.v1 import csi_pb2, csi_pb2_grpc

__all__ = ["IdentityServicer"]

_Service = csi_pb2.PluginCapability.Service


class IdentityServicer(csi_pb2_grpc.IdentityServicer):
    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def GetPluginInfo(self, request: csi_pb2.GetPluginInfoRequest,
                            context: grpc.aio.ServicerContext) -> csi_pb2.GetPluginInfoResponse:
        return csi_pb2.GetPluginInfoResponse(name=self.driver.config.name, vendor_version=self.driver.version)

    async def GetPluginCapabilities(self, request: csi_pb2.GetPluginCapabilitiesRequest,
                                    context: grpc.aio.ServicerContext) -> csi_pb2.GetPluginCapabilitiesResponse:
        caps = [csi_pb2.PluginCapability(service=_Service(type=kind))
                for kind in (_Service.CONTROLLER_SERVICE, _Service.VOLUME_ACCESSIBILITY_CONSTRAINTS)]
        # Directories grow without the node's help: expansion is online.
        caps.append(csi_pb2.PluginCapability(volume_expansion=csi_pb2.PluginCapability.VolumeExpansion(
            type=csi_pb2.PluginCapability.VolumeExpansion.ONLINE)))
        return csi_pb2.GetPluginCapabilitiesResponse(capabilities=caps)

    async def Probe(self, request: csi_pb2.ProbeRequest, context: grpc.aio.ServicerContext) -> csi_pb2.ProbeResponse:
        return csi_pb2.ProbeResponse(ready=wrappers_pb2.BoolValue(value=self.driver.state_ready()))

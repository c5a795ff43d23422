"""The driver's gRPC server: its three services on one unix socket, as a CSI driver serves them."""

from __future__ import annotations

from pathlib import Path

import grpc

from csi.hostpath.controller import ControllerServicer
from csi.hostpath.driver import Driver
from csi.hostpath.identity import IdentityServicer
from csi.hostpath.node import NodeServicer
from kubeling.unixsocket import SocketAddress
from protos.csi.v1 import csi_pb2_grpc

__all__ = ["Server"]


class Server:
    """`node`: the Node service (default: the driver's own; a test may wrap it to inject faults)."""

    def __init__(self, driver: Driver, node: csi_pb2_grpc.NodeServicer | None = None) -> None:
        self.driver = driver
        self.node = node or NodeServicer(driver)
        self._server: grpc.aio.Server | None = None

    async def start(self, endpoint: Path) -> None:
        """Serve on the unix socket at endpoint (a stale socket file is replaced)."""
        endpoint.parent.mkdir(parents=True, exist_ok=True)
        endpoint.unlink(missing_ok=True)
        server = grpc.aio.server()
        csi_pb2_grpc.add_IdentityServicer_to_server(IdentityServicer(self.driver), server)
        csi_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(self.driver), server)
        csi_pb2_grpc.add_NodeServicer_to_server(self.node, server)
        address = SocketAddress(endpoint)
        try:
            server.add_insecure_port(address.target())
            await server.start()
        finally:
            address.close()  # bound: the socket file is in its directory now
        self._server = server
        self.driver.log.info("CSI driver %s serving on %s (%d volumes known)", self.driver.config.name, endpoint,
                             len(self.driver.state.volumes))

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1)
            self._server = None

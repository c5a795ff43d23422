"""One node's hostpath CSI deployment as a process: the driver, its registrar, and (with
apiserver credentials) its provisioner — what upstream deploys as a driver container with
its node-driver-registrar and external-provisioner (`--node-deployment`) sidecars."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from csi.attacher import Attacher, AttacherConfig
from csi.hostpath import DRIVER_NAME, TOPOLOGY_KEY, Driver, DriverConfig, Server
from csi.provisioner import Provisioner, ProvisionerConfig
from csi.registrar import Registrar
from kubeling.client import Client
from kubeling.options import ConfigError, boolean, flag
from kubeling.quantity import QuantityError, parse_quantity
from kubeling.unixsocket import SocketAddress

__all__ = ["ServiceConfig", "HostpathService", "bytes_arg"]


def bytes_arg(text: str) -> int:
    try:
        value = parse_quantity(text).int_value()
    except QuantityError as exc:
        raise ConfigError(f"{text!r}: {exc}") from None
    if value <= 0:
        raise ConfigError(f"{text!r}: must be positive")
    return value


@dataclass(frozen=True)
class ServiceConfig:
    node_id: str = flag(help="the node this driver serves (the kubelet's --node-name)")
    state_dir: Path = flag(help="where volumes (a directory each), snapshots and state.json live", type=Path)
    endpoint: Path | None = flag(None, "the CSI socket (default: <state-dir>/csi.sock)", type=Path)
    registration_dir: Path | None = flag(None, "the kubelet's plugin registry directory (<kubelet "
                                               "root>/plugins_registry): a registration socket there makes the "
                                               "kubelet use this driver", type=Path)
    driver_name: str = flag(DRIVER_NAME, "the driver's name (a StorageClass's provisioner)")
    capacity: int = flag(bytes_arg("100Gi"), "what all volumes on this node may add up to (a quantity)",
                         type=bytes_arg)
    max_volume_size: int = flag(bytes_arg("100Gi"), "the largest volume (a quantity)", type=bytes_arg)
    max_volumes_per_node: int = flag(0, "volumes a node may have published (0: no limit; CSINode's allocatable "
                                        "count)", type=int)
    attach_required: bool = flag(False, "the CSIDriver object says attachRequired: each volume is attached (a "
                                        "VolumeAttachment, this process's attacher) before a kubelet mounts it",
                                 type=boolean)

    @property
    def socket(self) -> Path:
        return self.endpoint or self.state_dir / "csi.sock"

    def driver(self) -> DriverConfig:
        return DriverConfig(node_id=self.node_id, state_dir=self.state_dir, name=self.driver_name,
                            capacity=self.capacity, max_volume_size=self.max_volume_size,
                            max_volumes_per_node=self.max_volumes_per_node)


class HostpathService:
    def __init__(self, config: ServiceConfig, client: Client | None = None) -> None:
        self.config = config
        self.client = client
        self.driver = Driver(config.driver())
        self.server = Server(self.driver)
        self.registrar = (Registrar(config.driver_name, config.socket, config.registration_dir)
                          if config.registration_dir is not None else None)
        self._channel: grpc.aio.Channel | None = None
        self._address: SocketAddress | None = None
        self.provisioner: Provisioner | None = None
        self.attacher: Attacher | None = None

    async def start(self) -> None:
        await self.server.start(self.config.socket)
        if self.client is not None:
            # The sidecar speaks to the driver as upstream's does: over the driver's socket.
            self._address = SocketAddress(self.config.socket)
            self._channel = grpc.aio.insecure_channel(self._address.target())
            self.provisioner = Provisioner(self.client, self._channel, ProvisionerConfig(
                driver=self.config.driver_name, node=self.config.node_id, topology_key=TOPOLOGY_KEY,
                attach_required=self.config.attach_required))
            await self.provisioner.start()
            self.attacher = Attacher(self.client, self._channel, AttacherConfig(self.config.driver_name,
                                                                                self.config.node_id))
            await self.attacher.start()
        if self.registrar is not None:
            await self.registrar.start()  # last: the kubelet uses the driver from here on

    async def stop(self) -> None:
        if self.registrar is not None:
            await self.registrar.stop()
        if self.attacher is not None:
            await self.attacher.stop()
        if self.provisioner is not None:
            await self.provisioner.stop()
        if self._channel is not None:
            await self._channel.close()
        if self._address is not None:
            self._address.close()
        await self.server.stop()
        if self.client is not None:
            await self.client.close()

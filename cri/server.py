"""The CRI server: RuntimeService and ImageService on a unix socket.

`python -m cri` runs it alone; the kubelet agent starts the same
server in its own process.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cri.container_store import ContainerStore
from cri.containers import ContainerManager
from cri.image_service import ImageService
from cri.images.builtin import build_builtins
from cri.images.hosts import RegistryHosts
from cri.images.pull import Puller
from cri.images.store import ImageStore
from cri.network import NetworkPluginManager
from cri.runc import Runc
from cri.runtime_service import RuntimeService
from cri.sandbox_store import SandboxStore
from cri.sandboxes import SandboxManager
from cri.shims import ShimLauncher
from cri.streaming import StreamingConfig, StreamingServer
from cri.streams import RuntimeStreams
from kubeling.netutil import host_port_arg
from kubeling.options import flag
from protos.runtime.v1 import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)

DEFAULT_SOCKET = Path("/run/kubeling/cri.sock")
DEFAULT_STATE_DIR = Path("/var/lib/kubeling")
DEFAULT_CNI_CONF_DIR = Path("/etc/cni/net.d")
DEFAULT_RUNC_ROOT = Path("/run/kubeling/runc")
DEFAULT_CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")


@dataclass
class CRIConfig:
    """The runtime's settings; those `python -m cri` takes are declared with their flag."""

    socket: Path = flag(DEFAULT_SOCKET, "the runtime's unix socket (default %(default)s)", type=Path)
    state_dir: Path = flag(DEFAULT_STATE_DIR, "sandboxes, containers, images (default %(default)s)", type=Path)
    cni_conf_dir: Path = flag(DEFAULT_CNI_CONF_DIR, "CNI configs; the default network is the first valid file "
                              "(default %(default)s)", type=Path)
    cni_bin_dirs: list[str] = flag(help="CNI plugin directory (repeatable; default /usr/lib/cni and /opt/cni/bin)",
                                   name="cni-bin-dir", action="append", default_factory=list)
    cni_cache_dir: Path | None = flag(None, "CNI result cache (default libcni's /var/lib/cni)", type=Path)
    # runc state: tmpfs, gone with a reboot like the containers
    runc_root: Path = flag(DEFAULT_RUNC_ROOT, "runc state directory, on tmpfs (default %(default)s)", type=Path)
    build_builtin_images: bool = True
    insecure_registries: tuple[str, ...] = ()  # spoken to over HTTP (loopback registries always are)
    # containerd's hosts.toml directory: mirrors, plain HTTP, CAs per registry (images/hosts.py)
    registry_config_dir: Path | None = flag(None, "registry hosts configuration, containerd's hosts.toml layout: "
                                            "DIR/<registry>/hosts.toml with mirrors, plain HTTP, CAs (e.g. "
                                            "/etc/containerd/certs.d)", type=Path)
    # The streaming server of Exec/Attach/PortForward; port 0: a free one (containerd's default)
    streaming_listen: str = flag("127.0.0.1:0", "HOST:PORT of the streaming server for exec, attach and "
                                 "port-forward (default %(default)s: loopback, a free port)", type=host_port_arg)
    # The default network written when the pod CIDR arrives (UpdateRuntimeConfig):
    bridge: str = "cni0"
    cluster_cidr: str = "10.88.0.0/16"  # the only routes pods get: to the pods and (when set) to the Services
    service_cidr: str = ""
    node_network: str = ""  # and to the nodes' network, for clients there whose address a Service keeps
    ipam_data_dir: Path | None = None  # host-local's state; default /var/lib/cni/networks

    def __post_init__(self) -> None:
        self.cni_bin_dirs = self.cni_bin_dirs or list(DEFAULT_CNI_BIN_DIRS)

    @property
    def image_root(self) -> Path:
        return self.state_dir / "images"


class CRIServer:
    def __init__(self, config: CRIConfig, network: NetworkPluginManager | None = None) -> None:
        self.config = config
        self.images = ImageStore(config.image_root)
        if network is None:
            options: dict[str, Any] = {"cache_dir": config.cni_cache_dir} if config.cni_cache_dir else {}
            network = NetworkPluginManager(config.cni_conf_dir, config.cni_bin_dirs, bridge=config.bridge,
                                           cluster_cidr=config.cluster_cidr, service_cidr=config.service_cidr,
                                           node_network=config.node_network, ipam_data_dir=config.ipam_data_dir,
                                           **options)
        self.network = network
        runc = Runc(config.runc_root)
        self.sandboxes = SandboxManager(SandboxStore(config.state_dir / "sandboxes"), self.images, runc, self.network)
        self.containers = ContainerManager(ContainerStore(config.state_dir / "containers"), self.sandboxes,
                                           self.images, runc, ShimLauncher(config.runc_root))
        self.sandboxes.stop_containers = self.containers.stop_all_in
        self.sandboxes.remove_containers = self.containers.remove_all_in
        self.streams = RuntimeStreams(self.containers, self.sandboxes, runc)
        self.streaming = StreamingServer(StreamingConfig(listen=config.streaming_listen), self.streams)
        # The servicers the socket serves; an agent in this process calls them directly.
        self.runtime_service = RuntimeService(self.network, self.sandboxes, self.containers, self.streaming)
        hosts = RegistryHosts(config.registry_config_dir, config.insecure_registries)
        self.image_service = ImageService(self.images, Puller(self.images, hosts))
        self._server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        return f"unix://{self.config.socket}"

    async def start(self) -> None:
        if self.config.build_builtin_images:
            for image in build_builtins(self.images):
                log.info("built image %s (%s)", image.repo_tags[0], image.id)
        socket = self.config.socket
        socket.parent.mkdir(parents=True, exist_ok=True)
        if socket.is_socket():
            socket.unlink()  # left by a server that did not stop cleanly
        elif socket.exists():
            raise RuntimeError(f"{socket} exists and is not a socket; refusing to replace it")
        self._server = grpc.aio.server(options=[("grpc.max_send_message_length", 32 * 1024 * 1024)])
        await self.streaming.start()
        api_pb2_grpc.add_RuntimeServiceServicer_to_server(self.runtime_service, self._server)
        api_pb2_grpc.add_ImageServiceServicer_to_server(self.image_service, self._server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, self._server)
        names = [api_pb2.DESCRIPTOR.services_by_name[n].full_name for n in ("RuntimeService", "ImageService")]
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server)
        if self._server.add_insecure_port(self.address) == 0:
            raise RuntimeError(f"cannot listen on {self.address}")
        await self._server.start()
        os.chmod(socket, 0o660)
        for name in ["", *names]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("CRI runtime serving on %s (state %s)", self.address, self.config.state_dir)

    async def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        await self.streaming.stop()
        self.streams.close()
        await self.containers.shims.close()
        self.config.socket.unlink(missing_ok=True)

    async def wait(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()

"""The kubelet's plugin manager (upstream's pkg/kubelet/pluginmanager): it watches the plugin
registry directory (`<root>/plugins_registry`) for sockets, asks each new one who it is
(Registration.GetInfo), hands a CSI plugin to the CSI client to register, and tells the
plugin how that went (NotifyRegistrationStatus). A socket that goes away deregisters its
plugin. Upstream watches with inotify; a look every `interval` seconds does here (the
directory holds a socket per driver)."""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubeling.periodic import Periodic
from kubeling.unixsocket import SocketAddress
from protos.pluginregistration.v1 import api_pb2, api_pb2_grpc

__all__ = ["PluginManager", "CSI_PLUGIN"]

log = logging.getLogger(__name__)

CSI_PLUGIN = "CSIPlugin"


@dataclass
class _Plugin:
    name: str
    kind: str


@dataclass
class PluginManager:
    registry_dir: Path
    # (name, endpoint, versions) -> None, or raise to refuse; and name -> None on removal
    register_csi: Callable[[str, str, list[str]], Awaitable[None]]
    deregister_csi: Callable[[str], Awaitable[None]]
    interval: float = 1.0
    timeout: float = 10.0
    plugins: dict[Path, _Plugin] = field(default_factory=dict)  # socket -> what registered through it
    _failed: dict[Path, float] = field(default_factory=dict)  # socket -> when its registration last failed
    _loop: Periodic | None = None

    async def start(self) -> None:
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        await self.scan()
        self._loop = Periodic("plugin-watcher", self.interval, self.scan)
        self._loop.start()

    async def stop(self) -> None:
        if self._loop is not None:
            await self._loop.stop()

    async def scan(self) -> None:
        sockets = {p for p in self.registry_dir.iterdir() if _is_socket(p)} if self.registry_dir.is_dir() else set()
        for gone in [p for p in self.plugins if p not in sockets]:
            plugin = self.plugins.pop(gone)
            if plugin.kind == CSI_PLUGIN:
                await self.deregister_csi(plugin.name)
        now = asyncio.get_running_loop().time()
        for socket in sorted(sockets - self.plugins.keys()):
            if now - self._failed.get(socket, -1e9) < 10 * self.interval:
                continue  # a plugin that failed is tried again a little later, not every scan
            if await self._register(socket):
                self._failed.pop(socket, None)
            else:
                self._failed[socket] = now

    async def _register(self, socket: Path) -> bool:
        address = SocketAddress(socket)
        try:
            return await self._ask(socket, address.target())
        finally:
            address.close()

    async def _ask(self, socket: Path, target: str) -> bool:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = api_pb2_grpc.RegistrationStub(channel)
            try:
                info = await stub.GetInfo(api_pb2.InfoRequest(), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                log.warning("plugin socket %s: GetInfo failed: %s", socket, err.details())
                return False
            error = ""
            if info.type != CSI_PLUGIN:
                error = f"plugin type {info.type!r} is not supported by this kubelet (CSIPlugin)"
            else:
                try:
                    await self.register_csi(info.name, info.endpoint or str(socket), list(info.supported_versions))
                except Exception as err:  # noqa: BLE001 (told to the plugin, retried later)
                    error = str(err)
            try:
                await stub.NotifyRegistrationStatus(api_pb2.RegistrationStatus(
                    plugin_registered=not error, error=error), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                log.warning("plugin %s: NotifyRegistrationStatus failed: %s", info.name, err.details())
            if error:
                log.warning("plugin %s (%s): registration failed: %s", info.name, socket, error)
                return False
            self.plugins[socket] = _Plugin(info.name, info.type)
            return True


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False

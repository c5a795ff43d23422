"""The runtime behind the streaming server (containerd's streamRuntime): exec and attach
in containers, port-forward into sandboxes' network namespaces."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cni import netns
from cri.attach import attach
from cri.containers import ContainerManager
from cri.errors import CRIError
from cri.exec import exec_streams
from cri.runc import Runc
from cri.sandbox_store import READY
from cri.sandboxes import SandboxManager
from cri.streaming.runtime import DuplexStream, ExecError, Streams
from protos.runtime.v1 import api_pb2

log = logging.getLogger(__name__)

_LOOPBACKS = ((socket.AF_INET, "127.0.0.1", "tcp4"), (socket.AF_INET6, "::1", "tcp6"))


class DialError(OSError):
    """A connection into the pod that could not be made; reads as Go's net.Dial error does."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


@dataclass
class RuntimeStreams:
    containers: ContainerManager
    sandboxes: SandboxManager
    runc: Runc
    # Entering a namespace is per thread: one thread of our own does it, nothing else runs there.
    _netns_thread: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="netns"))

    def close(self) -> None:
        self._netns_thread.shutdown(wait=False, cancel_futures=True)

    def _running(self, container_id: str) -> tuple[str, api_pb2.ContainerConfig, Path]:
        try:
            record = self.containers.get(container_id)
        except CRIError as exc:
            raise ExecError(exc.message) from None
        state = record.state()
        if state != api_pb2.CONTAINER_RUNNING:
            raise ExecError(f"container {record.id} is in {api_pb2.ContainerState.Name(state)} state, not running")
        return record.id, record.config, Path(record.state_dir)

    async def exec(self, container_id: str, cmd: list[str], streams: Streams) -> int:
        full_id, _, _ = self._running(container_id)
        return await exec_streams(self.runc.binary, self.runc.root, full_id, cmd, streams)

    async def attach(self, container_id: str, streams: Streams) -> None:
        _, config, state = self._running(container_id)
        if not config.stdin:  # a container without stdin takes no input (as containerd)
            streams = dataclasses.replace(streams, stdin=None)
        await attach(state, streams)

    async def _connect(self, netns_path: str, port: int) -> socket.socket:
        loop = asyncio.get_running_loop()
        first: OSError | None = None
        for family, address, network in _LOOPBACKS:
            try:
                if netns_path:
                    sock = await loop.run_in_executor(self._netns_thread, netns.socket_in, netns_path, family)
                else:
                    sock = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                first = first or exc
                continue
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, (address, port))
                return sock
            except OSError as exc:
                sock.close()
                reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
                first = first or DialError(exc.errno, f"dial {network} {address}:{port}: connect: {reason}")
        assert first is not None
        raise first

    async def port_forward(self, sandbox_id: str, port: int, stream: DuplexStream) -> None:
        try:
            sandbox = await self.sandboxes.refresh(self.sandboxes.get(sandbox_id))
        except CRIError as exc:
            raise OSError(exc.message) from None
        if sandbox.state != READY:
            raise OSError(f"sandbox {sandbox.id} is not running")
        path = netns.path_of(sandbox.netns) if sandbox.netns else ""  # "" for host network
        sock = await self._connect(path, port)
        reader, writer = await asyncio.open_connection(sock=sock)

        async def to_pod() -> None:
            try:
                while data := await stream.read():
                    writer.write(data)
                    await writer.drain()
                if writer.can_write_eof():
                    writer.write_eof()  # the client is done sending; the pod may still answer
            except (ConnectionError, OSError):
                pass

        sending = asyncio.create_task(to_pod())
        try:
            while data := await reader.read(64 * 1024):
                await stream.write(data)
        except (ConnectionError, OSError) as exc:
            # One side went away mid-copy (a client that reset its stream): the end of this
            # connection, not an error of the forward. containerd only logs these too; one
            # reported on the error stream would end the client's whole port-forward.
            log.debug("port-forward to port %d of sandbox %s ended: %s", port, sandbox_id[:13], exc)
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            writer.close()

"""Routes to the other nodes' pod CIDRs, as flannel's host-gw backend sets them: for each
Node with a pod CIDR and an InternalIP, `<podCIDR> via <InternalIP>` in this kubelet's
network namespace, kept current from the Node objects (added, changed, deleted).

Only for kubelets that each have their own network namespace on a shared network
(docker-compose, separate hosts): kubelets sharing one namespace reach each other's
bridges directly. The InternalIPs must be on-link (one L2 network), as host-gw requires.

The rest of the cluster CIDR is `unreachable`: pod traffic to an address no node has is
refused here instead of following the namespace's default route out of the cluster.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass, field

from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2

__all__ = ["PodRoutes", "wanted_routes"]

log = logging.getLogger(__name__)

RESYNC_SECONDS = 30.0  # routes removed by someone else come back at least this often


def wanted_routes(nodes: list[core_pb2.Node], own: str) -> dict[str, str]:
    """pod CIDR -> the InternalIP to route it through, for every other node that has both."""
    out: dict[str, str] = {}
    for node in nodes:
        if node.metadata.name == own or node.metadata.HasField("deletionTimestamp"):
            continue
        via = next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")
        for cidr in node.spec.podCIDRs or ([node.spec.podCIDR] if node.spec.podCIDR else []):
            try:
                net, gw = ipaddress.ip_network(cidr), ipaddress.ip_address(via)
            except ValueError:
                continue  # no usable InternalIP yet (or a malformed CIDR): nothing to route
            if net.version == gw.version:
                out[str(net)] = str(gw)
    return out


@dataclass
class PodRoutes:
    client: Client
    node_name: str
    cluster_cidr: str
    ip_command: list[str] = field(default_factory=lambda: ["ip"])  # tests: ["ip", "-n", NETNS]
    installed: dict[str, str] = field(default_factory=dict)  # pod CIDR -> via, as this kubelet set it
    _informer: Informer[core_pb2.Node] = field(init=False)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._informer = Informer(self.client.nodes)
        changed = self._changed.set
        self._informer.add_handler(on_add=lambda _: changed(), on_update=lambda _o, _n: changed(),
                                   on_delete=lambda _: changed())
        await self._informer.start()
        await self._informer.wait_synced(timeout=60)
        await self.sync()
        self._task = asyncio.create_task(self._run(), name=f"pod-routes-{self.node_name}")

    async def stop(self) -> None:
        # Routes stay (as flannel leaves them): pods keep reaching each other while the
        # kubelet restarts, and the next one takes them over.
        await cancel_and_wait(self._task)
        self._task = None
        await self._informer.stop()

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(RESYNC_SECONDS):
                    await self._changed.wait()
            except TimeoutError:
                pass
            self._changed.clear()
            await self.sync()

    async def sync(self) -> None:
        """Make the routes what the Node objects say; a failed change is tried again next time."""
        wanted = wanted_routes(self._informer.store.list(), self.node_name)
        present, unreachable = await self._present()
        if self.cluster_cidr not in unreachable and await self._ip("route", "replace", "unreachable",
                                                                    self.cluster_cidr):
            log.info("node %s: %s unreachable but for the nodes' pod CIDRs", self.node_name, self.cluster_cidr)
        for cidr, via in sorted(wanted.items()):
            if present.get(cidr) != via and await self._ip("route", "replace", cidr, "via", via):
                log.info("node %s: route %s via %s", self.node_name, cidr, via)
            self.installed[cidr] = via
        for cidr in sorted(set(self.installed) - set(wanted)):
            if cidr not in present or await self._ip("route", "del", cidr, "via", self.installed[cidr]):
                log.info("node %s: route %s removed (its node is gone or moved)", self.node_name, cidr)
                del self.installed[cidr]

    async def _present(self) -> tuple[dict[str, str], set[str]]:
        """The main table's gateway routes (destination -> via) and unreachable destinations."""
        proc = await asyncio.create_subprocess_exec(*self.ip_command, "-o", "route", "show", "table", "main",
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            log.warning("node %s: reading routes failed: %s", self.node_name, err.decode().strip())
            return {}, set()
        routes: dict[str, str] = {}
        unreachable: set[str] = set()
        for line in out.decode().splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] == "via":
                routes[words[0]] = words[2]
            elif len(words) >= 2 and words[0] == "unreachable":
                unreachable.add(words[1])
        return routes, unreachable

    async def _ip(self, *args: str) -> bool:
        proc = await asyncio.create_subprocess_exec(*self.ip_command, *args, stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        if proc.returncode != 0:
            log.warning("node %s: ip %s failed: %s", self.node_name, " ".join(args), err.decode().strip())
            return False
        return True

"""The controller manager: shared informers (one per resource, for every controller),
leader election on kube-system/kube-controller-manager (the informers stay warm on a
standby; only the leader's controllers act), and each controller's loop."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge

from controllers.nodelifecycle import LEASE_NAMESPACE, NodeLifecycleController
from controllers.tainteviction import TaintEviction
from kubeling.client import Client
from kubeling.events import EventRecorder
from kubeling.http import StatusServer
from kubeling.informer import Informer
from kubeling.leaderelection import ElectionConfig, LeaderElector
from kubeling.periodic import Periodic
from protos.kubeling.v1 import coordination_pb2, core_pb2

__all__ = ["ManagerConfig", "ControllerManager"]

log = logging.getLogger(__name__)


@dataclass
class ManagerConfig:
    node_monitor_grace_period: float = 40.0  # upstream's defaults
    node_monitor_period: float = 5.0
    eviction_period: float = 1.0  # how often NoExecute evictions are looked for
    leader_elect: bool = True
    election: ElectionConfig = field(default_factory=lambda: ElectionConfig(name="kube-controller-manager"))
    metrics_listen: str = ""  # /metrics, /healthz, /readyz; empty: off


class ControllerManager:
    def __init__(self, client: Client, config: ManagerConfig | None = None, identity: str = "") -> None:
        self.client = client
        self.config = config = config or ManagerConfig()
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.nodes: Informer[core_pb2.Node] = Informer(client.nodes)
        self.pods: Informer[core_pb2.Pod] = Informer(client.pods)
        self.leases: Informer[coordination_pb2.Lease] = Informer(client.leases, namespace=LEASE_NAMESPACE)
        self.recorder = EventRecorder(client, "node-controller", instance=self.identity)
        self.node_lifecycle = NodeLifecycleController(client, self.nodes, self.leases, self.pods,
                                                      config.node_monitor_grace_period)
        self.eviction = TaintEviction(client, self.nodes, self.pods, self.recorder)
        self._loops = [Periodic("node-lifecycle", config.node_monitor_period, self.node_lifecycle.monitor),
                       Periodic("taint-eviction", config.eviction_period, self.eviction.sync)]
        self.elector = LeaderElector(client, self.identity, config.election, on_started=self._lead,
                                     on_stopped=self._follow) if config.leader_elect else None
        self.registry = CollectorRegistry()
        self._leader = Gauge("leader_election_master_status", "1 while this replica leads.", registry=self.registry)
        self.status = StatusServer(self.registry, self._ready)
        self._election: asyncio.Task[None] | None = None
        self.leading = False

    def _ready(self) -> tuple[bool, str]:
        if not all(i.synced for i in (self.nodes, self.pods, self.leases)):
            return False, "informers not synced"
        return True, "leader" if self.leading else "standby"

    async def start(self, sync_timeout: float = 60.0) -> None:
        if self.config.metrics_listen:
            await self.status.start(self.config.metrics_listen)
        for informer in (self.nodes, self.leases, self.pods):
            await informer.start()
        for informer in (self.nodes, self.leases, self.pods):
            await informer.wait_synced(sync_timeout)
        if self.elector is not None:
            self._election = asyncio.create_task(self.elector.run(), name="leader-election")
        else:
            await self._lead()

    async def _lead(self) -> None:
        log.info("controller manager %s leads", self.identity)
        self.leading = True
        self._leader.set(1)
        for loop in self._loops:
            loop.start()

    async def _follow(self) -> None:
        self.leading = False
        self._leader.set(0)
        for loop in self._loops:
            await loop.stop()

    async def stop(self, *, release: bool = True) -> None:
        if self._election is not None:
            self._election.cancel()
            try:
                await self._election
            except (asyncio.CancelledError, Exception):
                pass
        await self._follow()
        if release and self.elector is not None:
            try:
                await asyncio.wait_for(self.elector.release(), 5)
            except Exception as err:  # noqa: BLE001 (the lease then expires by itself)
                log.info("lease not released: %s", err)
        try:
            await asyncio.wait_for(self.recorder.flush(), 5)
        except TimeoutError:
            pass
        for informer in (self.pods, self.leases, self.nodes):
            await informer.stop()
        await self.status.stop()
        await self.client.close()

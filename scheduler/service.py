"""The scheduler as a service: informers from the apiserver feed it, Bind goes back."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from pathlib import Path

from kubeling.client import Client
from kubeling.http import StatusServer
from kubeling.informer import Informer
from kubeling.leaderelection import ElectionConfig, LeaderElector
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2, policy_pb2
from scheduler.config import load_config
from scheduler.plugins import registry
from scheduler.recorder import ApiRecorder
from scheduler.scheduler import Scheduler

__all__ = ["SchedulerService"]

log = logging.getLogger(__name__)

SHUTDOWN_API_SECONDS = 5.0

# Finished pods hold no resources: the scheduler does not watch them (upstream does the same).
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class SchedulerService:
    """Informers always run (a warm cache); the scheduling loop runs only while this
    replica leads (with leader election on), as kube-scheduler does."""

    def __init__(self, apiserver: str, config_path: str | Path | None = None, *,
                 leader_elect: bool = True, election: ElectionConfig = ElectionConfig(),
                 metrics_listen: str = "", identity: str = "", client: Client | None = None) -> None:
        """`client`: how to reach the apiserver when it needs credentials (else plain text to `apiserver`)."""
        self.apiserver = apiserver
        self.registry = registry()
        self.config = load_config(config_path, self.registry)
        self.client = client if client is not None else Client(apiserver)
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.recorder = ApiRecorder(self.client, instance=self.identity)
        self.scheduler = Scheduler(self.config, self.registry, client=self.client, recorder=self.recorder)
        self.pods: Informer[core_pb2.Pod] = Informer(self.client.pods, field_selector=ACTIVE_PODS)
        self.nodes: Informer[core_pb2.Node] = Informer(self.client.nodes)
        self.pdbs: Informer[policy_pb2.PodDisruptionBudget] = Informer(self.client.poddisruptionbudgets)
        s = self.scheduler
        s.pdb_lister = self.pdbs.store.list
        self.nodes.add_handler(on_add=s.on_node_add, on_update=s.on_node_update, on_delete=s.on_node_delete)
        self.pods.add_handler(on_add=s.on_pod_add, on_update=s.on_pod_update, on_delete=s.on_pod_delete)
        self.elector = LeaderElector(self.client, self.identity, election, on_started=self._lead,
                                     on_stopped=self._follow) if leader_elect else None
        self.metrics_listen = metrics_listen
        self.status = StatusServer(self.scheduler.metrics.registry, self._ready)
        self._loop: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def leading(self) -> bool:
        return self._loop is not None and not self._loop.done()

    def _ready(self) -> tuple[bool, str]:
        if not (self.pods.synced and self.nodes.synced and self.pdbs.synced):
            return False, "informers not synced"
        return True, "leader" if self.leading else "standby"

    async def start(self, sync_timeout: float = 60.0) -> None:
        if self.metrics_listen:
            await self.status.start(self.metrics_listen)
        await self.nodes.start()
        await self.nodes.wait_synced(sync_timeout)
        await self.pods.start()
        await self.pdbs.start()
        await self.pods.wait_synced(sync_timeout)
        await self.pdbs.wait_synced(sync_timeout)
        log.info("scheduler %s synced: %d nodes, %d pods; profiles %s", self.identity, len(self.nodes.store.items),
                 len(self.pods.store.items), ", ".join(self.scheduler.frameworks))
        self._tasks = [asyncio.create_task(self.scheduler.housekeeping(), name="scheduler-housekeeping")]
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        else:
            await self._lead()

    async def _lead(self) -> None:
        self.scheduler.metrics.leader.set(1)
        self._loop = asyncio.create_task(self.scheduler.run(), name="schedule-loop")

    async def _follow(self) -> None:
        self.scheduler.metrics.leader.set(0)
        await cancel_and_wait(self._loop)
        self._loop = None

    async def _finish_with_apiserver(self, release: bool) -> None:
        """Bindings in flight, the lease given up, the events written."""
        await self.scheduler.wait_for_bindings()
        if release and self.elector is not None:
            await self.elector.release()
        await self.recorder.flush()

    async def stop(self, *, release: bool = True) -> None:
        """Stop everything; `release=False` leaves the lease to expire (as a crash would)."""
        for t in self._tasks:
            await cancel_and_wait(t)
        await cancel_and_wait(self._loop)
        self.scheduler.queue.close()
        try:
            # What still needs the apiserver gets a bounded time: with the apiserver gone
            # (stopped first, unreachable) the process still ends, and the lease runs out
            # by itself, as after a crash.
            async with asyncio.timeout(SHUTDOWN_API_SECONDS):
                await self._finish_with_apiserver(release)
        except TimeoutError:
            log.warning("scheduler %s: the apiserver did not answer within %.0fs at shutdown; "
                        "the lease will expire by itself", self.identity, SHUTDOWN_API_SECONDS)
        await self.scheduler.close()
        await self.pods.stop()
        await self.pdbs.stop()
        await self.nodes.stop()
        await self.status.stop()
        await self.client.close()

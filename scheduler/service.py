"""The scheduler as a service: informers from the apiserver feed it, Bind goes back."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.periodic import cancel_and_wait
from scheduler.config import load_config
from scheduler.plugins import in_tree_registry
from scheduler.recorder import ApiRecorder
from scheduler.scheduler import Scheduler
from protos.kubeling.v1 import core_pb2

__all__ = ["SchedulerService"]

log = logging.getLogger(__name__)

# Finished pods hold no resources: the scheduler does not watch them (upstream does the same).
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class SchedulerService:
    def __init__(self, apiserver: str, config_path: str | Path | None = None) -> None:
        self.apiserver = apiserver
        self.registry = in_tree_registry()
        self.config = load_config(config_path, self.registry)
        self.client = Client(apiserver)
        self.recorder = ApiRecorder(self.client, instance=socket.gethostname())
        self.scheduler = Scheduler(self.config, self.registry, client=self.client, recorder=self.recorder)
        self.pods: Informer[core_pb2.Pod] = Informer(self.client.pods, field_selector=ACTIVE_PODS)
        self.nodes: Informer[core_pb2.Node] = Informer(self.client.nodes)
        s = self.scheduler
        self.nodes.add_handler(on_add=s.on_node_add, on_update=s.on_node_update, on_delete=s.on_node_delete)
        self.pods.add_handler(on_add=s.on_pod_add, on_update=s.on_pod_update, on_delete=s.on_pod_delete)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, sync_timeout: float = 60.0) -> None:
        await self.nodes.start()
        await self.nodes.wait_synced(sync_timeout)
        await self.pods.start()
        await self.pods.wait_synced(sync_timeout)
        log.info("scheduler synced: %d nodes, %d pods; profiles %s", len(self.nodes.store.items),
                 len(self.pods.store.items), ", ".join(self.scheduler.frameworks))
        self._tasks = [asyncio.create_task(self.scheduler.run(), name="schedule-loop"),
                       asyncio.create_task(self.scheduler.housekeeping(), name="scheduler-housekeeping")]

    async def stop(self) -> None:
        self.scheduler.queue.close()
        for t in self._tasks:
            await cancel_and_wait(t)
        await self.scheduler.wait_for_bindings()
        await self.recorder.flush()
        await self.pods.stop()
        await self.nodes.stop()
        await self.client.close()

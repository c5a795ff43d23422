"""The scheduler as a service: informers from the apiserver feed it, Bind goes back.

Its configuration is a KubeSchedulerConfiguration file and the deprecated flags
(scheduler.config.LegacyOptions); a Policy in a ConfigMap is read at start, through the
apiserver, and watched: a changed Policy replaces the profiles (Scheduler.reconfigure), a
bad one leaves them as they are, with a Warning Event on the ConfigMap saying why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import uuid
from pathlib import Path
from typing import Any

from kubeling import options
from kubeling.client import Client
from kubeling.events import NORMAL, WARNING
from kubeling.http import StatusServer
from kubeling.informer import INDEX_NAMESPACE, Informer
from kubeling.leaderelection import ElectionConfig, LeaderElector
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import apps_pb2, core_pb2, policy_pb2, storage_pb2
from scheduler.config import LegacyOptions, PolicySource, SchedulerConfig, algorithm_source, config_data, parse_config
from scheduler.framework.interface import Resource
from scheduler.framework.storage import StorageListers
from scheduler.legacy.policy import Policy
from scheduler.legacy.source import PolicyConfigMapWatch, fetch_policy_configmap, policy_of, read_policy_file
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
                 legacy: LegacyOptions | None = None,
                 leader_elect: bool = True, election: ElectionConfig = ElectionConfig(),
                 metrics_listen: str = "", identity: str = "", client: Client | None = None) -> None:
        """`client`: how to reach the apiserver when it needs credentials (else plain text to
        `apiserver`); `legacy`: the deprecated flags, which override the file."""
        self.apiserver = apiserver
        self.registry = registry()
        self.legacy = legacy or LegacyOptions()
        self.config_data = config_data(config_path, self.legacy)
        source = algorithm_source(self.config_data)
        self.policy_source: PolicySource | None = source.policy if source is not None else None
        self.config = self._initial_config()
        self.client = client if client is not None else Client(apiserver)
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.recorder = ApiRecorder(self.client, instance=self.identity)
        self.scheduler = Scheduler(self.config, self.registry, client=self.client, recorder=self.recorder)
        self.pods: Informer[core_pb2.Pod] = Informer(self.client.pods, field_selector=ACTIVE_PODS)
        self.nodes: Informer[core_pb2.Node] = Informer(self.client.nodes)
        self.pdbs: Informer[policy_pb2.PodDisruptionBudget] = Informer(self.client.poddisruptionbudgets)
        # What selects pods (SelectorSpread, ServiceAffinity, PodTopologySpread's default constraints).
        self.services: Informer[core_pb2.Service] = Informer(self.client.services)
        self.replica_sets: Informer[apps_pb2.ReplicaSet] = Informer(self.client.replicasets)
        # What the volume plugins read (VolumeBinding, VolumeRestrictions, NodeVolumeLimits).
        self.claims: Informer[core_pb2.PersistentVolumeClaim] = Informer(self.client.persistentvolumeclaims)
        self.volumes: Informer[core_pb2.PersistentVolume] = Informer(self.client.persistentvolumes)
        self.storage_classes: Informer[storage_pb2.StorageClass] = Informer(self.client.storageclasses)
        self.csi_nodes: Informer[storage_pb2.CSINode] = Informer(self.client.csinodes)
        self.csi_drivers: Informer[storage_pb2.CSIDriver] = Informer(self.client.csidrivers)
        self.capacities: Informer[storage_pb2.CSIStorageCapacity] = Informer(self.client.csistoragecapacities)
        s = self.scheduler
        s.storage_listers = StorageListers(
            claim=lambda namespace, name: self.claims.store.get(f"{namespace}/{name}"),
            volume=self.volumes.store.get, volumes=self.volumes.store.list,
            storage_class=self.storage_classes.store.get, csi_node=self.csi_nodes.store.get,
            csi_driver=self.csi_drivers.store.get, capacities=self.capacities.store.list)
        for informer, resource in ((self.claims, Resource.PERSISTENT_VOLUME_CLAIM),
                                   (self.volumes, Resource.PERSISTENT_VOLUME),
                                   (self.storage_classes, Resource.STORAGE_CLASS), (self.csi_nodes, Resource.CSI_NODE)):
            informer.add_handler(**s.storage_handlers(resource))
        s.pdb_lister = self.pdbs.store.list
        s.service_lister = lambda namespace: self.services.store.by_index(INDEX_NAMESPACE, namespace)
        s.replica_set_getter = lambda namespace, name: self.replica_sets.store.get(f"{namespace}/{name}")
        self.nodes.add_handler(on_add=s.on_node_add, on_update=s.on_node_update, on_delete=s.on_node_delete)
        self.pods.add_handler(on_add=s.on_pod_add, on_update=s.on_pod_update, on_delete=s.on_pod_delete)
        self.services.add_handler(on_add=s.on_service_add, on_update=s.on_service_update,
                                  on_delete=s.on_service_delete)
        self.elector = LeaderElector(self.client, self.identity, election, on_started=self._lead,
                                     on_stopped=self._follow) if leader_elect else None
        self.metrics_listen = metrics_listen
        self.status = StatusServer(self.scheduler.metrics.registry, self._ready)
        self._loop: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.policy_watch: PolicyConfigMapWatch | None = None

    def _parse(self, policy: Policy | None) -> SchedulerConfig:
        return parse_config(self.config_data, self.registry, policy=policy, gates=self.legacy.gates())

    def _initial_config(self) -> SchedulerConfig:
        """The configuration, but for a Policy in a ConfigMap: then every other setting, and no
        profile until start reads it (checked now with an empty Policy, so that the rest of
        a bad configuration still stops the scheduler before it connects)."""
        source = self.policy_source
        if source is not None and source.file:
            return self._parse(read_policy_file(source.file))
        if source is not None:
            return dataclasses.replace(self._parse(Policy(predicates=[], priorities=[])), profiles=[])
        return self._parse(None)

    @property
    def leading(self) -> bool:
        return self._loop is not None and not self._loop.done()

    def _ready(self) -> tuple[bool, str]:
        if not all(i.synced for i in self._informers()):
            return False, "informers not synced"
        return True, "leader" if self.leading else "standby"

    def _informers(self) -> list[Informer[Any]]:
        return [self.pods, self.nodes, self.pdbs, self.services, self.replica_sets, *self._storage_informers()]

    def _storage_informers(self) -> list[Informer[Any]]:
        return [self.claims, self.volumes, self.storage_classes, self.csi_nodes, self.csi_drivers, self.capacities]

    async def resolved_config(self) -> SchedulerConfig:
        """The configuration with its Policy, read from its ConfigMap if it is in one."""
        source = self.policy_source
        if source is None or not source.configmap_name:
            return self.config
        policy, _ = await fetch_policy_configmap(self.client, source.configmap_namespace, source.configmap_name)
        return self._parse(policy)

    async def start(self, sync_timeout: float = 60.0) -> None:
        source = self.policy_source
        if source is not None and source.configmap_name:
            # Before any informer: the profiles must exist when the first pod arrives.
            policy, cm = await fetch_policy_configmap(self.client, source.configmap_namespace, source.configmap_name)
            self.config = self._parse(policy)
            await self.scheduler.reconfigure(self.config)
            log.info("scheduler %s: profiles from the Policy in ConfigMap %s/%s", self.identity,
                     source.configmap_namespace, source.configmap_name)
            self.policy_watch = PolicyConfigMapWatch(self.client, source.configmap_namespace, source.configmap_name,
                                                     self._policy_changed, cm)
        if self.metrics_listen:
            await self.status.start(self.metrics_listen)
        await self.services.start()
        await self.replica_sets.start()
        for informer in self._storage_informers():
            await informer.start()
        await self.services.wait_synced(sync_timeout)
        await self.replica_sets.wait_synced(sync_timeout)
        for informer in self._storage_informers():
            await informer.wait_synced(sync_timeout)
        await self.nodes.start()
        await self.nodes.wait_synced(sync_timeout)
        await self.pods.start()
        await self.pdbs.start()
        await self.pods.wait_synced(sync_timeout)
        await self.pdbs.wait_synced(sync_timeout)
        if self.policy_watch is not None:
            await self.policy_watch.start()
        log.info("scheduler %s synced: %d nodes, %d pods; profiles %s", self.identity, len(self.nodes.store.items),
                 len(self.pods.store.items), ", ".join(self.scheduler.frameworks))
        self._tasks = [asyncio.create_task(self.scheduler.housekeeping(), name="scheduler-housekeeping")]
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        else:
            await self._lead()

    async def _policy_changed(self, cm: core_pb2.ConfigMap | None) -> None:
        """The policy ConfigMap changed: schedule by its new Policy, or keep the profiles and say why."""
        source = self.policy_source
        assert source is not None
        where = f"ConfigMap {source.configmap_namespace}/{source.configmap_name}"
        if cm is None:
            log.warning("scheduler %s: policy %s was deleted; keeping the profiles it made", self.identity, where)
            return
        try:
            config = self._parse(policy_of(cm))
            await self.scheduler.reconfigure(config)
        except (options.ConfigError, ValueError) as err:
            log.warning("scheduler %s: policy %s not applied, keeping the previous profiles: %s",
                        self.identity, where, err)
            self.recorder.events.object_event(cm, "v1", "ConfigMap", WARNING, "PolicyRejected",
                                              f"not applied, the scheduler keeps its previous profiles: {err}")
            return
        self.config = config
        log.info("scheduler %s: profiles rebuilt from the changed policy %s", self.identity, where)
        self.recorder.events.object_event(cm, "v1", "ConfigMap", NORMAL, "PolicyApplied",
                                          "the scheduler's profiles "
                                          f"({', '.join(p.scheduler_name for p in config.profiles)}) follow it now")

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
        if self.policy_watch is not None:
            await self.policy_watch.stop()
        await self.services.stop()
        await self.replica_sets.stop()
        for informer in self._storage_informers():
            await informer.stop()
        await self.pods.stop()
        await self.pdbs.stop()
        await self.nodes.stop()
        await self.status.stop()
        await self.client.close()

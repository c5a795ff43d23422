"""The controllers that run inside the apiserver (node IPAM, the namespace finalizer, the
ServiceAccounts controller) run in one apiserver at a time when there are several:
leader election on the kube-system/kube-apiserver-controllers Lease, as kube-controller-
manager elects itself, written through this apiserver's own store. Compaction is not
among them: it coordinates through etcd already, as upstream's."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from typing import Protocol

from apiserver.registry.generic.store import Registry
from kubeling.leaderelection import ElectionConfig, LeaderElector, LeaseAPI
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import coordination_pb2

__all__ = ["Controller", "ControllerElection", "LEASE_NAME"]

log = logging.getLogger(__name__)

LEASE_NAME = "kube-apiserver-controllers"


class Controller(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


class _StoreLeases:
    """LeaseAPI over the registry (no request, no authorization: the apiserver's own write)."""

    def __init__(self, registry: Registry[coordination_pb2.Lease]) -> None:
        self.registry = registry

    async def get(self, name: str, namespace: str = "") -> coordination_pb2.Lease:
        return await self.registry.get(namespace, name)

    async def create(self, obj: coordination_pb2.Lease) -> coordination_pb2.Lease:
        return await self.registry.create(obj)

    async def update(self, obj: coordination_pb2.Lease) -> coordination_pb2.Lease:
        return await self.registry.update(obj)


class _Holder:
    def __init__(self, leases: LeaseAPI) -> None:
        self._leases = leases

    @property
    def leases(self) -> LeaseAPI:
        return self._leases


class ControllerElection:
    def __init__(self, leases: Registry[coordination_pb2.Lease], controllers: list[Controller],
                 config: ElectionConfig = ElectionConfig(name=LEASE_NAME)) -> None:
        self.controllers = controllers
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        self.elector = LeaderElector(_Holder(_StoreLeases(leases)), self.identity, config,
                                     on_started=self._lead, on_stopped=self._follow)
        self._task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.elector.is_leader

    def start(self) -> None:
        self._task = asyncio.create_task(self.elector.run(), name="apiserver-controllers-election")

    async def _lead(self) -> None:
        log.info("apiserver %s runs the controllers", self.identity)
        for controller in self.controllers:
            controller.start()

    async def _follow(self) -> None:
        for controller in self.controllers:
            await controller.stop()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self._follow()
        await self.elector.release()  # the next apiserver takes over at once

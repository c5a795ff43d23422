"""The ServiceAccounts controller (kube-controller-manager's serviceaccounts-controller,
folded into the apiserver until kubeling has a controller manager): every namespace that
is not terminating has a `default` ServiceAccount, made again when deleted."""

from __future__ import annotations

import logging

from apiserver.registry.generic.store import Registry
from kubeling import errors
from kubeling.periodic import Periodic
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["ServiceAccountsController"]

log = logging.getLogger(__name__)

DEFAULT = "default"


class ServiceAccountsController:
    def __init__(self, namespaces: Registry[core_pb2.Namespace],
                 service_accounts: Registry[core_pb2.ServiceAccount], interval: float = 0.2) -> None:
        self.namespaces = namespaces
        self.service_accounts = service_accounts
        self._loop = Periodic("serviceaccounts-controller", interval, self.sync)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        """One pass (cheap when nothing is missing: two cache lookups per namespace)."""
        namespaces, accounts = self.namespaces.watch_cache, self.service_accounts.watch_cache
        if not namespaces.ready.is_set() or not accounts.ready.is_set():
            return
        for entry in list(namespaces.store.values()):
            ns = entry.obj.metadata
            if ns.HasField("deletionTimestamp") or accounts.get(self.service_accounts.key(ns.name, DEFAULT)):
                continue
            try:
                await self.service_accounts.create(core_pb2.ServiceAccount(
                    metadata=meta_pb2.ObjectMeta(name=DEFAULT, namespace=ns.name)))
                log.info("created ServiceAccount %s/%s", ns.name, DEFAULT)
            except errors.AlreadyExists:
                pass
            except errors.ApiError as err:  # a namespace going away meanwhile: the next pass sees it
                log.debug("ServiceAccount %s/%s: %s", ns.name, DEFAULT, err.message)

"""The token cleaner (upstream's pkg/controller/bootstrap/tokencleaner.go): a bootstrap
token Secret whose `expiration` has passed is deleted (its uid as precondition), at the
time it expires."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubeling import bootstraptoken, errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2

__all__ = ["TokenCleaner"]

log = logging.getLogger(__name__)


class TokenCleaner:
    def __init__(self, client: Client, secrets: Informer[core_pb2.Secret],
                 clock: Callable[[], float] = time.time) -> None:
        """`secrets`: kube-system's Secrets of type bootstrap.kubernetes.io/token."""
        self.client = client
        self.secrets = secrets
        self.clock = clock
        self.queue = WorkQueue("token-cleaner")
        self.workers = Workers(self.queue, self.sync, 1)
        secrets.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new))

    def _changed(self, secret: core_pb2.Secret) -> None:
        self.queue.add(secret.metadata.name)

    async def sync(self, name: str) -> None:
        secret = self.secrets.store.get(f"{bootstraptoken.NAMESPACE}/{name}")
        if secret is None or secret.type != bootstraptoken.SECRET_TYPE:
            return
        expires = bootstraptoken.expiration(dict(secret.data))
        if expires is None:
            return
        left = expires - self.clock()
        if left > 0:
            self.queue.add_after(name, left)
            return
        try:
            await self.client.secrets.delete(name, bootstraptoken.NAMESPACE, uid=secret.metadata.uid)
        except (errors.NotFound, errors.Conflict):
            return
        log.info("bootstrap token secret %s deleted: expired", name)

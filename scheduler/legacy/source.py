"""Where a Policy comes from: a file (`--policy-config-file`, `algorithmSource.policy.file`)
or a ConfigMap (`--policy-configmap`, `algorithmSource.policy.configMap`), whose data holds
it under `policy.cfg`, with upstream's messages when it cannot be read.

A ConfigMap is watched (`PolicyConfigMapWatch`): each change is handed to the scheduler,
which builds its profiles from the new Policy, or keeps the ones it has and says why
(upstream read it once, and a kube-scheduler had to be restarted for a change to count).
The scheduler's identity needs get, list and watch on that ConfigMap (upstream's
system:kube-scheduler could not read ConfigMaps either: an administrator grants it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.options import ConfigError
from protos.kubeling.v1.core_pb2 import ConfigMap
from scheduler.legacy.policy import POLICY_CONFIGMAP_KEY, Policy, load_policy

__all__ = ["read_policy_file", "policy_of", "fetch_policy_configmap", "PolicyConfigMapWatch"]

log = logging.getLogger(__name__)


def read_policy_file(path: str) -> Policy:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"missing policy config file {path}") from None
    except OSError as err:
        raise ConfigError(f"couldn't read policy config: {err}") from None
    return load_policy(text, f"policy file {path}")


def policy_of(cm: ConfigMap) -> Policy:
    """The Policy a ConfigMap holds (ConfigError when the key is missing or it is invalid)."""
    where = f"policy ConfigMap {cm.metadata.namespace}/{cm.metadata.name}"
    if POLICY_CONFIGMAP_KEY not in cm.data:
        raise ConfigError(f"{where}: missing policy config map value at key {POLICY_CONFIGMAP_KEY!r}")
    return load_policy(cm.data[POLICY_CONFIGMAP_KEY], where)


async def fetch_policy_configmap(client: Client, namespace: str, name: str) -> tuple[Policy, ConfigMap]:
    """The ConfigMap's Policy now; a ConfigMap that is not there, or that this scheduler may
    not read, is a configuration error (the scheduler does not start)."""
    try:
        cm = await client.configmaps.get(name, namespace)
    except (errors.NotFound, errors.Forbidden) as err:
        raise ConfigError(f"couldn't get policy config map {namespace}/{name}: {err.message}") from None
    return policy_of(cm), cm


OnChange = Callable[[ConfigMap | None], Awaitable[None]]


class PolicyConfigMapWatch:
    """The policy ConfigMap, watched: `on_change` gets each new version of it (None when it
    was deleted); the version the scheduler started from is not repeated."""

    def __init__(self, client: Client, namespace: str, name: str, on_change: OnChange,
                 started_from: ConfigMap) -> None:
        self.namespace, self.name = namespace, name
        self._on_change = on_change
        self._seen = started_from.metadata.resourceVersion
        self.informer: Informer[ConfigMap] = Informer(client.configmaps, namespace=namespace,
                                                      field_selector=f"metadata.name={name}")
        self.informer.add_handler(on_add=self._changed, on_update=lambda _old, new: self._changed(new),
                                  on_delete=self._deleted)

    async def start(self) -> None:
        await self.informer.start()

    async def stop(self) -> None:
        await self.informer.stop()

    async def _changed(self, cm: ConfigMap) -> None:
        if cm.metadata.resourceVersion == self._seen:
            return  # the version the scheduler read at start (the informer's first list)
        self._seen = cm.metadata.resourceVersion
        await self._on_change(cm)

    async def _deleted(self, cm: ConfigMap) -> None:
        self._seen = ""
        await self._on_change(None)

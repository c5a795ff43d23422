"""The garbage collector against a real apiserver (issue 20): deletion propagation as
upstream's — Background (dependents collected after the owner is gone), Orphan (the
references removed first, the dependents kept), Foreground (the owner waits for its
blocking dependents) — and a dependent with another, solid owner kept while the
foreground owner goes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from controllers.manager import ControllerManager
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _cm(client: Client, name: str, *owners: core_pb2.ConfigMap, block: bool = False) -> core_pb2.ConfigMap:
    cm = core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"))
    for owner in owners:
        cm.metadata.ownerReferences.add(apiVersion="v1", kind="ConfigMap", name=owner.metadata.name,
                                        uid=owner.metadata.uid, blockOwnerDeletion=block)
    return await client.configmaps.create(cm)


async def _gone(client: Client, name: str) -> bool:
    try:
        await client.configmaps.get(name, "default")
    except errors.NotFound:
        return True
    return False


async def test_propagation_policies(client: Client, manager: ControllerManager) -> None:
    owner = await _cm(client, "owner")
    await _cm(client, "dep", owner)
    await client.configmaps.delete("owner", "default")  # Background
    await _until(lambda: _gone(client, "dep"), "the dependent of a deleted owner to be collected")

    orphaning = await _cm(client, "owner2")
    await _cm(client, "dep2", orphaning)
    await client.configmaps.delete("owner2", "default", propagation_policy="Orphan")
    await _until(lambda: _gone(client, "owner2"), "the orphaning owner to go")
    kept = await client.configmaps.get("dep2", "default")
    assert not kept.metadata.ownerReferences

    foreground = await _cm(client, "owner3")
    await _cm(client, "dep3", foreground, block=True)
    deleting = await client.configmaps.delete("owner3", "default", propagation_policy="Foreground")
    assert list(deleting.metadata.finalizers) == ["foregroundDeletion"]
    await _until(lambda: _gone(client, "dep3"), "the blocking dependent to be deleted first")
    await _until(lambda: _gone(client, "owner3"), "the foreground owner to go after it")


async def test_a_dependent_with_a_solid_owner_survives_a_foreground_owner(client: Client,
                                                                         manager: ControllerManager) -> None:
    solid = await _cm(client, "solid")
    leaving = await _cm(client, "leaving")
    await _cm(client, "shared", solid, leaving, block=True)
    await client.configmaps.delete("leaving", "default", propagation_policy="Foreground")
    await _until(lambda: _gone(client, "leaving"), "the foreground owner to go (its dependent unblocked)")

    async def one_owner_left() -> bool:
        refs = (await client.configmaps.get("shared", "default")).metadata.ownerReferences
        return [r.name for r in refs] == ["solid"]
    await _until(one_owner_left, "the reference to the gone owner to be removed")

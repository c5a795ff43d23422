"""StorageVersionMigrations against a real apiserver and etcd: after an encryption key is
rotated in, migrating Secrets writes every one again under the new key (etcd's own client
shows it), a second migration writes nothing, and the old key can then go; an object
stored in an older layout (a field the message no longer has) is written again without
it while its content stays, and the watch sees it once; a migration of an unknown
resource fails saying so; the spec is immutable and validated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import dynamic, errors, scheme
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, custom_pb2, meta_pb2
from tests.contract.test_encryption import PLAINTEXT, _config, _etcdctl_get, _key, _secret, _server
from tests.wait import until


def _migration(name: str, resource: str, group: str = "") -> custom_pb2.CustomResource:
    return dynamic.new({"metadata": {"name": name}, "spec": {"resource": {"group": group, "resource": resource}}})


async def _finished(client: Client, name: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        status = dynamic.content_of(await client.storageversionmigrations.get(name)).get("status") or {}
        ended = {c["type"]: c for c in status.get("conditions") or [] if c["status"] == "True"}
        return status if {"Succeeded", "Failed"} & set(ended) else None
    result: dict[str, Any] = await until(done, f"the migration {name} finished", timeout=30)
    return result


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


async def test_a_rotated_key_is_written_in_by_a_migration(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    old: dict[str, object] = {"aescbc": {"keys": [{"name": "key1", "secret": _key(1)}]}}
    new: dict[str, object] = {"aescbc": {"keys": [{"name": "key2", "secret": _key(2)}]}}
    server = await _server(etcd, prefix, tmp_path, _config(old))
    async with Client(server.address) as client:
        for i in range(3):
            await client.secrets.create(_secret(f"s{i}"))
    await server.stop(grace=0)

    server = await _server(etcd, prefix, tmp_path, _config(new, old))  # the new key first: it writes
    try:
        async with Client(server.address) as client:
            await client.storageversionmigrations.create(_migration("secrets-to-key2", "secrets"))
            status = await _finished(client, "secrets-to-key2")
            total = len((await client.secrets.list("")).items)
            assert _condition(status, "Succeeded")["message"] == \
                f"3 of {total} objects written again in the current storage format", status
            assert int(status["resourceVersion"]) > 0
            assert _condition(status, "Running")["status"] == "False"
            for i in range(3):
                key = server.registries[scheme.SECRETS].key("default", f"s{i}").decode()
                assert _etcdctl_get(etcd, key).startswith(b"k8s:enc:aescbc:v1:key2:")
            await client.storageversionmigrations.create(_migration("again", "secrets"))
            assert _condition(await _finished(client, "again"), "Succeeded")["message"].startswith(f"0 of {total} ")
    finally:
        await server.stop(grace=0)

    server = await _server(etcd, prefix, tmp_path, _config(new))  # the old key gone
    try:
        async with Client(server.address) as client:
            for i in range(3):
                assert (await client.secrets.get(f"s{i}", "default")).data["password"] == PLAINTEXT.encode()
    finally:
        await server.stop(grace=0)


async def test_an_older_layout_is_written_again_and_the_watch_sees_it_once(rest: APIServer) -> None:
    async with Client(rest.address) as client:
        made = await client.configmaps.create(core_pb2.ConfigMap(
            metadata=meta_pb2.ObjectMeta(name="old-layout", namespace="default"), data={"k": "v"}))
        await client.configmaps.create(core_pb2.ConfigMap(
            metadata=meta_pb2.ObjectMeta(name="current", namespace="default"), data={"k": "v"}))
        # what an older kubeling wrote: the message with a field (15) this one no longer has
        key = rest.registries[scheme.CONFIGMAPS].key("default", "old-layout")
        storage = rest._storage
        assert storage is not None
        current, _ = await storage.get(key)
        assert current is not None
        older = current.value + bytes([15 << 3 | 0, 7])  # field 15, varint 7
        revision = await storage.update(key, older, current.mod_revision)
        assert (await client.configmaps.get("old-layout", "default")).data["k"] == "v", "read as it is"

        seen: list[tuple[str, str]] = []

        async def watch() -> None:
            async for ev in client.configmaps.watch("default", resource_version=str(revision)):
                seen.append((ev.type, ev.object.metadata.name))
        watching = asyncio.create_task(watch())
        await client.storageversionmigrations.create(_migration("configmaps", "configmaps"))
        status = await _finished(client, "configmaps")
        total = len((await client.configmaps.list("")).items)
        assert _condition(status, "Succeeded")["message"] == \
            f"1 of {total} objects written again in the current storage format", status
        rewritten, _ = await storage.get(key)
        assert rewritten is not None and rewritten.value == current.value and rewritten.mod_revision > revision
        assert (await client.configmaps.get("old-layout", "default")).data["k"] == "v"
        await until(lambda: seen == [("MODIFIED", "old-layout")], "the one rewrite watched")
        watching.cancel()
        assert int(made.metadata.resourceVersion) < rewritten.mod_revision


async def test_unknown_resources_fail_and_bad_specs_are_refused(rest: APIServer) -> None:
    async with Client(rest.address) as client:
        await client.storageversionmigrations.create(_migration("nothing", "nothings", "example.com"))
        status = await _finished(client, "nothing")
        failed = _condition(status, "Failed")
        assert (failed["reason"], failed["message"]) == ("ResourceNotFound",
                                                         'the resource "nothings.example.com" is not served')
        with pytest.raises(errors.Invalid, match="spec.resource.resource: Required value"):
            await client.storageversionmigrations.create(_migration("empty", ""))
        svm = await client.storageversionmigrations.get("nothing")
        content = dynamic.content_of(svm)
        content["spec"]["resource"]["resource"] = "secrets"
        dynamic.set_content(svm, content)
        with pytest.raises(errors.Invalid, match="spec.resource: Invalid value.*field is immutable"):
            await client.storageversionmigrations.update(svm)
    async with aiohttp.ClientSession() as session, session.get(
            f"http://{rest.rest_address}/apis/storagemigration.k8s.io/v1/storageversionmigrations") as reply:
        assert reply.status == 200 and [i["metadata"]["name"] for i in (await reply.json())["items"]] == ["nothing"]

"""Encryption at rest against a real apiserver and etcd: what `etcdctl get` shows of a
Secret is the provider's prefix and ciphertext, never the data; every provider reads back
what it wrote; a key rotated in by rewriting (as upstream's documentation does it:
`kubectl get secrets -A -o json | kubectl replace -f -`); a bad configuration refused."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling.client import Client
from kubeling.options import ConfigError
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.conftest import apiserver_config

PLAINTEXT = "correct-horse-battery-staple"


def _key(byte: int, size: int = 32) -> str:
    return base64.b64encode(bytes([byte]) * size).decode()


def _config(*providers: dict[str, object], resources: tuple[str, ...] = ("secrets",)) -> dict[str, object]:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(resources), "providers": list(providers)}]}


def _etcdctl_get(etcd: EtcdServer, key: str) -> bytes:
    """What etcd holds at key, read by etcd's own client."""
    etcdctl = shutil.which("etcdctl")
    assert etcdctl is not None, "etcdctl is missing: `make deps` installs Debian's etcd-client"
    done = subprocess.run([etcdctl, "--endpoints", f"http://{etcd.endpoint}", "get", key, "--print-value-only"],
                          capture_output=True, timeout=30, env={"ETCDCTL_API": "3"})
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _server(etcd: EtcdServer, prefix: str, tmp_path: Path, config: dict[str, object]) -> APIServer:
    (tmp_path / "encryption.yaml").write_text(yaml.safe_dump(config))
    server = APIServer(apiserver_config(etcd, prefix, encryption_provider_config=str(tmp_path / "encryption.yaml")))
    await server.start()
    return server


def _secret(name: str) -> core_pb2.Secret:
    return core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                           stringData={"password": PLAINTEXT})


async def test_secrets_are_encrypted_in_etcd_and_read_back(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    config = _config({"aescbc": {"keys": [{"name": "key1", "secret": _key(1)}]}}, {"identity": {}},
                     resources=("secrets", "configmaps"))
    server = await _server(etcd, prefix, tmp_path, config)
    try:
        async with Client(server.address) as client:
            await client.secrets.create(_secret("s1"))
            await client.configmaps.create(core_pb2.ConfigMap(
                metadata=meta_pb2.ObjectMeta(name="c1", namespace="default"), data={"k": PLAINTEXT}))
            await client.serviceaccounts.create(core_pb2.ServiceAccount(
                metadata=meta_pb2.ObjectMeta(name=PLAINTEXT, namespace="default")))
            stored = _etcdctl_get(etcd, f"{prefix}/secrets/default/s1")
            assert stored.startswith(b"k8s:enc:aescbc:v1:key1:") and PLAINTEXT.encode() not in stored
            assert _etcdctl_get(etcd, f"{prefix}/configmaps/default/c1").startswith(b"k8s:enc:aescbc:v1:key1:")
            # what no rule names is stored as it is
            assert PLAINTEXT.encode() in _etcdctl_get(etcd, f"{prefix}/serviceaccounts/default/{PLAINTEXT}")
            got = await client.secrets.get("s1", "default")
            assert got.data["password"] == PLAINTEXT.encode()
            listed = await client.secrets.list("default")
            assert [s.metadata.name for s in listed.items] == ["s1"]
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize("provider", [
    {"aesgcm": {"keys": [{"name": "g", "secret": _key(2, 16)}]}},
    {"secretbox": {"keys": [{"name": "b", "secret": _key(3)}]}},
])
async def test_every_provider_reads_what_it_wrote(etcd: EtcdServer, prefix: str, tmp_path: Path,
                                                 provider: dict[str, object]) -> None:
    server = await _server(etcd, prefix, tmp_path, _config(provider))
    try:
        async with Client(server.address) as client:
            await client.secrets.create(_secret("s"))
            kind = next(iter(provider))
            stored = _etcdctl_get(etcd, f"{prefix}/secrets/default/s")
            assert stored.startswith(f"k8s:enc:{kind}:v1:".encode()) and PLAINTEXT.encode() not in stored
            assert (await client.secrets.get("s", "default")).data["password"] == PLAINTEXT.encode()
    finally:
        await server.stop(grace=0)


async def test_key_rotation_by_rewriting(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    old = {"name": "key1", "secret": _key(1)}
    new = {"name": "key2", "secret": _key(2)}
    # plaintext first, as a cluster that turns encryption on finds its Secrets
    server = APIServer(apiserver_config(etcd, prefix))
    await server.start()
    async with Client(server.address) as client:
        await client.secrets.create(_secret("before"))
    await server.stop(grace=0)
    assert PLAINTEXT.encode() in _etcdctl_get(etcd, f"{prefix}/secrets/default/before")

    for keys, expected in (([old], b"key1"), ([new, old], b"key2")):
        server = await _server(etcd, prefix, tmp_path, _config({"aescbc": {"keys": keys}}, {"identity": {}}))
        try:
            async with Client(server.address) as client:
                secret = await client.secrets.get("before", "default")  # read with what wrote it
                assert secret.data["password"] == PLAINTEXT.encode()
                await client.secrets.update(secret)  # unchanged: written again under the first key
                stored = _etcdctl_get(etcd, f"{prefix}/secrets/default/before")
                assert stored.startswith(b"k8s:enc:aescbc:v1:" + expected + b":"), stored[:40]
                again = await client.secrets.update(await client.secrets.get("before", "default"))
                assert again.metadata.resourceVersion == \
                    (await client.secrets.get("before", "default")).metadata.resourceVersion
        finally:
            await server.stop(grace=0)
    # the old key dropped: what it wrote is gone, what the new one wrote reads
    server = await _server(etcd, prefix, tmp_path, _config({"aescbc": {"keys": [new]}}))
    try:
        async with Client(server.address) as client:
            assert (await client.secrets.get("before", "default")).data["password"] == PLAINTEXT.encode()
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize("config, message", [
    (_config({"aescbc": {"keys": [{"name": "k", "secret": _key(1, 20)}]}}),
     r"providers\[0\].aescbc.keys\[0\].secret: Invalid value: secret is not of the expected length, got 20"),
    (_config({"rot13": {}}), r'providers\[0\]: Unsupported value: "rot13"'),
    ({"kind": "EncryptionConfiguration"}, "expected an apiserver.config.k8s.io/v1 EncryptionConfiguration"),
])
async def test_a_bad_configuration_is_refused(etcd: EtcdServer, prefix: str, tmp_path: Path,
                                              config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="--encryption-provider-config: .*" + message):
        await _server(etcd, prefix, tmp_path, config)

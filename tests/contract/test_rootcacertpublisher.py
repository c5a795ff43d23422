"""The controller manager's root-CA publisher on a real apiserver and etcd: the
kube-root-ca.crt ConfigMap in every namespace, made again when deleted, set back when
changed ('[sig-auth] ServiceAccounts should guarantee kube-root-ca.crt exist in any
namespace')."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controllers.manager import ControllerManager, ManagerConfig
from controllers.rootcacertpublisher import DESCRIPTION, ROOT_CA_CONFIGMAP
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.wait import until

CA = "-----BEGIN CERTIFICATE-----\nnot really one, as far as the publisher cares\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def publisher(client: Client, tmp_path: Path) -> AsyncIterator[ControllerManager]:
    (tmp_path / "ca.crt").write_text(CA)
    made = ControllerManager(Client(client.address), ManagerConfig(leader_elect=False,
                                                                   root_ca_file=tmp_path / "ca.crt"))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


async def _published(client: Client, namespace: str) -> core_pb2.ConfigMap:
    return await until(lambda: client.configmaps.get(ROOT_CA_CONFIGMAP, namespace), timeout=15,
                       what=f"{namespace}/{ROOT_CA_CONFIGMAP}", retry_on=(errors.NotFound,),
                       check=lambda cm: dict(cm.data) == {"ca.crt": CA})


async def test_serviceaccounts_guarantee_kube_root_ca_crt_exist_in_any_namespace(
        client: Client, publisher: ControllerManager) -> None:
    """ServiceAccount root CA ConfigMap ('[sig-auth] ServiceAccounts should guarantee
    kube-root-ca.crt exist in any namespace'): there, made again when deleted, set back
    when changed; and in a namespace made later."""
    made = await _published(client, "default")
    assert made.metadata.annotations["kubernetes.io/description"] == DESCRIPTION
    await client.configmaps.delete(ROOT_CA_CONFIGMAP, "default")
    await _published(client, "default")
    changed = await client.configmaps.get(ROOT_CA_CONFIGMAP, "default")
    changed.data["ca.crt"] = "something else"
    await client.configmaps.update(changed)
    await _published(client, "default")
    await client.namespaces.create(core_pb2.Namespace(metadata=meta_pb2.ObjectMeta(name="later")))
    await _published(client, "later")

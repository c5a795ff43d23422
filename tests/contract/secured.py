"""What the certificate tests share: a TLS apiserver (`Node,RBAC`, the PKI's CA for clients)
on a real etcd with the controller manager signing with the cluster CA, each party with a
certificate of its own, and the admin's client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from controllers.manager import ControllerManager, ManagerConfig
from kubeling import pki
from kubeling.client import Client, TLSConfig
from tests.conftest import apiserver_config

__all__ = ["tls", "secured_control_plane"]


def tls(root: Path, identity: str) -> TLSConfig:
    return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key")


@asynccontextmanager
async def secured_control_plane(etcd: EtcdServer, prefix: str, root: Path, nodes: dict[str, list[str]], *,
                                apiserver: dict[str, Any] | None = None, manager: dict[str, Any] | None = None,
                                ) -> AsyncIterator[tuple[APIServer, Client]]:
    """(the apiserver, the admin's client); `apiserver`/`manager`: more of their settings."""
    pki.ensure(root, nodes)
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        tls_cert_file=str(root / "apiserver.crt"),
                                        tls_private_key_file=str(root / "apiserver.key"),
                                        client_ca_file=str(root / "ca.crt"), authorization_mode="Node,RBAC",
                                        **(apiserver or {})))
    await server.start()
    controllers = ControllerManager(Client(server.address, tls=tls(root, "controller-manager")), ManagerConfig(
        leader_elect=False, cluster_signing_cert_file=root / "ca.crt", cluster_signing_key_file=root / "ca.key",
        **(manager or {})))
    await controllers.start()
    admin = Client(server.address, tls=tls(root, "admin"))
    try:
        yield server, admin
    finally:
        await admin.close()
        await controllers.stop()
        await controllers.client.close()
        await server.stop(grace=0)

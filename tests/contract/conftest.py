"""Fixtures of the contract tests beyond the shared ones (tests/conftest.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from controllers.manager import ControllerManager, ManagerConfig
from cri.server import CRIConfig, CRIServer
from kubeling.client import Client
from tests.conftest import apiserver_config
from tests.contract.test_crds import Rest


@pytest.fixture
async def rest(etcd: EtcdServer, prefix: str) -> AsyncIterator[APIServer]:
    """An apiserver that also serves the REST API (on a free port)."""
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)


@pytest.fixture
async def cri_server() -> AsyncIterator[CRIServer]:
    """The project's CRI runtime in this process, on a socket in a temporary directory."""
    base = Path(tempfile.mkdtemp(prefix="kcrc-"))  # short: unix socket paths are limited
    cri = CRIServer(CRIConfig(socket=base / "cri.sock", state_dir=base / "state", cni_conf_dir=base / "net.d",
                              cni_cache_dir=base / "cni-cache", runc_root=base / "runc"))
    await cri.start()
    try:
        yield cri
    finally:
        await cri.stop()
        shutil.rmtree(base)


@pytest.fixture
async def manager(client: Client) -> AsyncIterator[ControllerManager]:
    """The controller manager on the test's apiserver, leading at once (no election)."""
    made = ControllerManager(Client(client.address), ManagerConfig(leader_elect=False))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


@pytest.fixture
async def http(rest: APIServer) -> AsyncIterator[Rest]:
    """Raw HTTP against the REST API (tests.contract.test_crds.Rest); modules that need
    another shape define their own."""
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)

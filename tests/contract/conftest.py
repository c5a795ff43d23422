"""Fixtures of the contract tests beyond the shared ones (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from controllers.manager import ControllerManager, ManagerConfig
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

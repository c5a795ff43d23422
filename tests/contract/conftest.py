"""Fixtures of the contract tests beyond the shared ones (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client


@pytest.fixture
async def manager(client: Client) -> AsyncIterator[ControllerManager]:
    """The controller manager on the test's apiserver, leading at once (no election)."""
    made = ControllerManager(Client(client.address), ManagerConfig(leader_elect=False))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()

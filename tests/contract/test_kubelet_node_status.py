"""The kubelet's node status loop against a real apiserver and the project's CRI runtime:
as upstream's tryUpdateNodeStatus, its first try reads the Node it watches (its node
lister), not the apiserver — at thousands of nodes those every-10-s reads were half of all
requests — and it still writes back what the node controller changed."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from apiserver.server import APIServer
from cri.server import CRIServer
from kubelet.node import NodeManager
from kubelet.runtime import Runtime
from kubeling.client import Client
from tests.wait import until


@pytest.fixture
async def runtime(cri_server: CRIServer) -> AsyncIterator[Runtime]:
    rt = Runtime(cri_server.address)
    try:
        yield rt
    finally:
        await rt.close()


async def _requests(server: APIServer, verb: str) -> float:
    """apiserver_request_total for nodes and `verb`, every code summed."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://{server.rest_address}/metrics") as r:
            text = await r.text()
    pattern = re.compile(r'^apiserver_request_total\{code="[A-Z_]+",resource="nodes",verb="' + verb +
                         r'"\} ([0-9.e+]+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


async def test_the_status_loop_reads_the_watched_node_and_writes_back_what_changed(
        rest: APIServer, runtime: Runtime, tmp_path: Path) -> None:
    async with Client(rest.address) as client:
        node = NodeManager(client, runtime, "status-n1", "127.0.0.1", 10250, tmp_path, report_frequency=3600)
        try:
            await node.register()
            await node.watch_own_node()
            gets, writes = await _requests(rest, "GET"), await _requests(rest, "UPDATE_STATUS")
            for _ in range(5):
                await node.update_status()
            assert await _requests(rest, "GET") == gets  # nothing asked of the apiserver
            assert await _requests(rest, "UPDATE_STATUS") == writes  # nothing changed, nothing written

            # The node controller's verdict (Ready Unknown), as it writes it: the next pass sees
            # it through the watch and writes the kubelet's own conditions back.
            seen = await client.nodes.get("status-n1")
            mine = {c.type: c.status for c in seen.status.conditions}
            for c in seen.status.conditions:
                if c.type == "Ready":
                    c.status, c.reason = "Unknown", "NodeStatusUnknown"
            marked = await client.nodes.update_status(seen)
            watched = node._own
            assert watched is not None

            def brought() -> bool:
                copy = watched.store.get("status-n1")
                return copy is not None and copy.metadata.resourceVersion == marked.metadata.resourceVersion

            await until(brought, what="the watch brought the verdict")
            await node.update_status()
            after = await client.nodes.get("status-n1")
            assert {c.type: c.status for c in after.status.conditions} == mine
            assert await _requests(rest, "UPDATE_STATUS") == writes + 2  # the verdict and the answer
        finally:
            await node.stop()

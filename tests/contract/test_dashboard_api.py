"""The dashboard's HTTP API against a real apiserver: the snapshot, the live stream of
changes (server-sent events), a pod's page data with its recorded scheduling attempt,
and the apiserver's refusals passed on as HTTP errors, never a 500."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from cluster.dashboard.server import Dashboard
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from scheduler.framework.results import PREFIX
from tests.wait import until


@pytest.fixture
async def dashboard(client: Client) -> AsyncIterator[str]:
    board = Dashboard(client)
    await board.start()
    runner = web.AppRunner(board.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
        await board.stop()


def _pod(name: str, **annotations: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default", annotations=annotations),
                        spec=core_pb2.PodSpec(containers=[core_pb2.Container(name="main", image="busybox")]))


async def test_snapshot_stream_and_pod_page(client: Client, dashboard: str) -> None:
    await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(
        name="n1", labels={"node-role.kubernetes.io/control-plane": ""})))
    recorded = {PREFIX + "attempt": "1", PREFIX + "selected-node": "n2",
                PREFIX + "filter-result": json.dumps({"n1": {"TaintToleration": "UnschedulableAndUnresolvable: node(s) "
                                                                                 "had untolerated taint"},
                                                      "n2": {"TaintToleration": "passed"}}),
                PREFIX + "score-result": json.dumps({"n2": {"ImageLocality": {"raw": 0, "normalized": 0,
                                                                              "weighted": 0}}}),
                PREFIX + "finalscore-result": json.dumps({"n2": 0})}
    async with aiohttp.ClientSession() as http:
        async def snapshot() -> Any:
            async with http.get(f"{dashboard}/api/snapshot") as reply:
                return await reply.json()
        found = await until(snapshot, "the node in the snapshot", timeout=10, check=lambda s: s["nodes"])
        assert found["nodes"][0]["roles"] == ["control-plane"] and found["errors"] == {}

        async with http.get(f"{dashboard}/api/watch") as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            await client.pods.create(_pod("explained", **recorded))
            changes = []
            async for line in stream.content:
                if line.startswith(b"data: "):
                    changes.append(json.loads(line[6:]))
                    if any(c["kind"] == "pods" and c["row"]["name"] == "explained" for c in changes):
                        break
            change = next(c for c in changes if c["kind"] == "pods")
            assert change["op"] == "upsert" and change["row"]["explained"] is True
            assert change["row"]["status"] == "Pending"
            await client.pods.delete("explained", "default", grace_period_seconds=0)
            async for line in stream.content:
                if line.startswith(b"data: ") and json.loads(line[6:]).get("op") == "delete":
                    assert json.loads(line[6:])["row"] == {"namespace": "default", "name": "explained"}
                    break

        await client.pods.create(_pod("again", **recorded))
        async with http.get(f"{dashboard}/api/pods/default/again") as reply:
            detail = await reply.json()
        why = detail["why"]
        assert why["selected"] == "n2" and [n["node"] for n in why["nodes"]] == ["n2", "n1"]
        assert why["nodes"][1]["filter"] == "TaintToleration: node(s) had untolerated taint"
        assert detail["containers"] == [{"name": "main", "image": "busybox", "state": "Waiting", "ready": False,
                                         "restarts": 0}]
        async with http.get(f"{dashboard}/api/pods/default/absent") as reply:
            assert reply.status == 404 and "NotFound" in (await reply.json())["error"]
        async with http.get(f"{dashboard}/api/pods/default/again/log?tail=ten") as reply:
            assert reply.status == 400 and "tail" in (await reply.json())["error"]
        async with http.get(f"{dashboard}/api/pods/default/again/log") as reply:  # on no node: no log
            assert 400 <= reply.status < 500, reply.status
            assert (await reply.json())["error"]
        async with http.get(f"{dashboard}/api/pods/default/again/trace") as reply:  # no trace store given
            assert reply.status == 404 and "--traces-url" in (await reply.json())["error"]
        async with http.get(f"{dashboard}/") as reply:
            assert reply.status == 200 and "kubeling.overview()" in await reply.text()
        async with http.get(f"{dashboard}/pods/default/again") as reply:
            assert "kubeling.podPage()" in await reply.text()

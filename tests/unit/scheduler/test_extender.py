"""HTTP extenders: filter, prioritize and bind over real HTTP (an extender served by the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kubeling.netutil import free_port
from scheduler.config import ConfigError
from tests.unit.scheduler.builders import FailureLog, make_node, make_pod
from tests.unit.scheduler.harness import drain, make_scheduler


class ExampleExtender:
    """Refuses nodes labelled bad=true, prefers node 'b', binds by recording."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.bound: dict[str, str] = {}
        self.seen_pod: dict[str, Any] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/ext/filter", self.filter)
        app.router.add_post("/ext/prioritize", self.prioritize)
        app.router.add_post("/ext/bind", self.bind)
        return app

    async def filter(self, req: web.Request) -> web.Response:
        args = await req.json()
        self.calls.append("filter")
        self.seen_pod = args["pod"]
        keep, failed = [], {}
        for node in args["nodes"]["items"]:
            if node["metadata"].get("labels", {}).get("bad") == "true":
                failed[node["metadata"]["name"]] = "node(s) were refused by the example extender"
            else:
                keep.append(node)
        return web.json_response({"nodes": {"items": keep}, "failedNodes": failed})

    async def prioritize(self, req: web.Request) -> web.Response:
        args = await req.json()
        self.calls.append("prioritize")
        return web.json_response([{"host": n["metadata"]["name"], "score": 10 if n["metadata"]["name"] == "b" else 0}
                                  for n in args["nodes"]["items"]])

    async def bind(self, req: web.Request) -> web.Response:
        args = await req.json()
        self.calls.append("bind")
        self.bound[args["podName"]] = args["node"]
        return web.json_response({})


@pytest.fixture
async def extender() -> AsyncIterator[tuple[ExampleExtender, str]]:
    ext = ExampleExtender()
    runner = web.AppRunner(ext.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield ext, f"http://127.0.0.1:{port}/ext"
    finally:
        await runner.cleanup()


async def test_extender_filters_prioritizes_and_binds(extender: tuple[ExampleExtender, str]) -> None:
    ext, url = extender
    sched = make_scheduler({"extenders": [{"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                                           "bindVerb": "bind", "weight": 5}]})
    sched.on_node_add(make_node("a", "4", "4Gi", "110"))
    sched.on_node_add(make_node("b", "4", "4Gi", "110"))
    sched.on_node_add(make_node("c", "8", "8Gi", "110", labels={"bad": "true"}))
    sched.on_pod_add(make_pod("p", {"cpu": "1"}))
    await drain(sched)
    await sched.close()
    assert ext.bound == {"p": "b"}  # c refused, b preferred (10 × 5 × 10 outweighs the plugins)
    assert ext.calls == ["filter", "prioritize", "bind"]
    assert ext.seen_pod["metadata"]["name"] == "p"  # Kubernetes-shaped JSON
    assert ext.seen_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"


async def test_extender_failures_reach_the_diagnosis_and_ignorable_errors_are_skipped(
        extender: tuple[ExampleExtender, str]) -> None:
    ext, url = extender
    log = FailureLog()
    sched = make_scheduler({"extenders": [{"urlPrefix": url, "filterVerb": "filter"},
                                          {"urlPrefix": f"http://127.0.0.1:{free_port()}/none", "filterVerb": "filter",
                                           "ignorable": True, "httpTimeout": "1s"}]}, recorder=log)
    sched.on_node_add(make_node("c", "8", "8Gi", "110", labels={"bad": "true"}))
    sched.on_pod_add(make_pod("p", {"cpu": "1"}))
    await drain(sched)
    await sched.close()
    assert [m for _, m, _ in log.failures] == [
        "0/1 nodes are available: 1 node(s) were refused by the example extender. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."]


def test_extender_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"extenders\[0\].urlPrefix"):
        make_scheduler({"extenders": [{"filterVerb": "filter"}]})
    with pytest.raises(ConfigError, match="only one extender can implement bind"):
        make_scheduler({"extenders": [{"urlPrefix": "http://x", "bindVerb": "b"}, {"urlPrefix": "http://y",
                                                                                   "bindVerb": "b"}]})
    with pytest.raises(ConfigError, match=r"extenders\[0\].weight"):
        make_scheduler({"extenders": [{"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": 0}]})

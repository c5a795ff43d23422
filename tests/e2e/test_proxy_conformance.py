"""The proxy subresources on a real cluster: pods/proxy and services/proxy to a backend
that answers with the method and path it was asked (the test's own HTTP server, run by
a host-network pod as upstream's agnhost porter is run by a pod), and nodes/proxy to the
kubelet's own endpoints — with the real kubectl (`get --raw`) and raw HTTPS for the
methods kubectl does not send. Names follow upstream's conformance tests ([sig-network]
Proxy version v1)."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from controllers.manager import ControllerManager
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.wait import until

METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


@pytest.fixture
async def porter() -> AsyncIterator[int]:
    """An HTTP server on a free loopback port answering every method with
    `<METHOD> <path>` (upstream's agnhost porter answers with the method)."""
    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=f"{request.method} {request.path_qs}")
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr,unused-ignore]
    finally:
        await runner.cleanup()


def _tls(cluster: Cluster) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    context.load_cert_chain(cluster.pki / "admin.crt", cluster.pki / "admin.key")
    return context


async def test_proxy_with_and_without_path(cluster: Cluster, controllers: ControllerManager, kubectl: Kubectl,
                                           porter: int) -> None:
    """A set of valid responses are returned for both pod and service ProxyWithPath / Proxy
    ('[sig-network] Proxy version v1 A set of valid responses are returned for both pod and
    service ProxyWithPath|Proxy'): every method through pods/proxy and services/proxy, with
    and without a path; and 'should proxy through a service and a pod' in part: by port
    number and by port name, http named explicitly."""
    await cluster.add_node(1)
    client = cluster.client
    backend = pod("agnhost", container("porter", "sleep", "3600", ports=[core_pb2.ContainerPort(
        name="http", containerPort=porter)]), hostNetwork=True)
    backend.metadata.labels["test"] = "proxy"
    await client.pods.create(backend)
    for name, port_name in (("test-service", ""), ("named-service", "portname1")):  # unnamed: no port in the URL
        await client.services.create(core_pb2.Service(
            metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
            spec=core_pb2.ServiceSpec(selector={"test": "proxy"}, ports=[core_pb2.ServicePort(
                name=port_name, port=80, targetPort=core_pb2.IntOrString(intVal=porter), protocol="TCP")])))
    await cluster.wait_pod("agnhost", lambda p: p.status.phase == "Running")
    ns = f"https://{cluster.apiserver.rest_address}/api/v1/namespaces/default"

    async with aiohttp.ClientSession() as session:
        async def call(method: str, url: str) -> tuple[int, str]:
            async with session.request(method, url, ssl=_tls(cluster)) as reply:
                return reply.status, await reply.text()

        for ready in (f"{ns}/services/test-service/proxy/", f"{ns}/services/named-service:portname1/proxy/"):
            await until(functools.partial(call, "GET", ready), timeout=30, check=lambda answer: answer[0] == 200,
                        what="the Services' endpoints")
        for base in (f"{ns}/pods/agnhost/proxy", f"{ns}/pods/agnhost:{porter}/proxy",
                     f"{ns}/pods/http:agnhost:{porter}/proxy", f"{ns}/services/test-service/proxy",
                     f"{ns}/services/named-service:portname1/proxy", f"{ns}/services/named-service:80/proxy",
                     f"{ns}/services/http:named-service:portname1/proxy"):
            for path in ("/", "/some/path/with/DELETE?x=1"):
                for method in METHODS:
                    status, text = await call(method, base + path)
                    assert status == 200, (method, base + path, text)
                    if method != "HEAD":
                        assert text == f"{method} {path}", (method, base + path, text)
        status, text = await call("GET", f"{ns}/services/named-service/proxy/")  # no port named: none matches
        assert status == 503 and 'no endpoints available for service \\"named-service\\"' in text, text
        status, text = await call("GET", f"{ns}/pods/a:b:c:d/proxy/")
        assert status == 400 and 'invalid request \\"a:b:c:d\\"' in text, text

    _, out, _ = await kubectl("get", "--raw", f"/api/v1/namespaces/default/pods/agnhost:{porter}/proxy/raw?k=v")
    assert out == "GET /raw?k=v"
    code, _, err = await kubectl("get", "--raw", "/api/v1/namespaces/default/pods/agnhost/proxy/", "--as=nobody",
                                 ok=False)
    assert code != 0 and 'cannot get resource "pods/proxy"' in err, err


async def test_node_proxy_to_the_kubelet(cluster: Cluster, kubectl: Kubectl) -> None:
    """nodes/proxy (upstream's '[sig-network] Proxy version v1 should proxy logs on node',
    not in the list today): the kubelet's /pods, /healthz, /configz, /metrics,
    /stats/summary and /logs/, through the apiserver with its kubelet client certificate."""
    node = await cluster.add_node(1)
    name = node.config.node_name
    await cluster.client.pods.create(pod("logged", container("c", "sh", "-c", "echo hello; sleep 3600")))
    running = await cluster.wait_pod("logged", lambda p: p.status.phase == "Running")
    base = f"/api/v1/nodes/{name}/proxy"

    _, out, _ = await kubectl("get", "--raw", f"{base}/pods")
    listed = json.loads(out)
    assert listed["kind"] == "PodList" and [p["metadata"]["name"] for p in listed["items"]] == ["logged"]
    assert (await kubectl("get", "--raw", f"{base}/healthz"))[1] == "ok"
    configz = json.loads((await kubectl("get", "--raw", f"{base}/configz"))[1])
    assert configz["kubeletconfig"]["nodeName"] == name and configz["kubeletconfig"]["maxPods"] == 110
    metrics = (await kubectl("get", "--raw", f"{base}/metrics"))[1]
    assert "kubelet_running_pods 1" in metrics and f'kubelet_node_name{{node="{name}"}} 1' in metrics, metrics
    summary = json.loads((await kubectl("get", "--raw", f"{base}/stats/summary"))[1])
    assert summary["node"]["nodeName"] == name
    pod_dir = f"default_logged_{running.metadata.uid}/"
    listing = (await kubectl("get", "--raw", f"{base}/logs/"))[1]
    assert f'<a href="{pod_dir}">{pod_dir}</a>' in listing, listing
    log = (await kubectl("get", "--raw", f"{base}/logs/{pod_dir}c/0.log"))[1]
    assert log.rstrip("\n").endswith(" stdout F hello"), log
    code, _, err = await kubectl("get", "--raw", f"{base}/logs/../../pki/ca.key", ok=False)
    assert code != 0

"""One trace per pod start, across processes: an in-process OTLP collector receives the
spans of a real apiserver, scheduler and kubelet (each its own process and
service.name) and the trace of one pod holds them all, correctly linked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from cluster.etcd import EtcdServer
from kubelet.agent import bridge_name
from kubeling import errors, pki
from kubeling.client import Client, TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from kubeling.netutil import free_port
from kubeling.servingtls import client_context
from kubeling.telemetry import POD_TRACE_ANNOTATION
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.wait import settle, until


@dataclass
class _Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    ended: bool
    events: tuple[str, ...] = ()


@dataclass
class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    spans: list[_Span] = field(default_factory=list)

    async def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,  # noqa: N802 (the RPC's name)
                     context: grpc.aio.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = next((a.value.string_value for a in resource_spans.resource.attributes
                            if a.key == "service.name"), "")
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(_Span(service, span.name, span.trace_id.hex(), span.span_id.hex(),
                                            span.parent_span_id.hex(), span.end_time_unix_nano > 0,
                                            tuple(e.name for e in span.events)))
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
async def collector() -> AsyncIterator[tuple[Collector, int]]:
    made = Collector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(made, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield made, port
    await server.stop(0)


async def test_one_trace_per_pod_across_components(collector: tuple[Collector, int], etcd: EtcdServer,
                                                   prefix: str, tmp_path: Path) -> None:
    spans, port = collector
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
           "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    api, rest = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    node = f"t{os.getpid() % 10000}"
    cidr = f"10.{165 + os.getpid() % 4}.0.0/16"
    # Secured as `kubeling up` runs it: traces cross TLS channels.
    root = tmp_path / "pki"
    pki.ensure(root, {node: ["127.0.0.1"]})
    secured = ["--tls-cert-file", str(root / "apiserver.crt"), "--tls-private-key-file", str(root / "apiserver.key"),
               "--client-ca-file", str(root / "ca.crt"), "--authorization-mode", "Node,RBAC",
               "--kubelet-client-certificate", str(root / "apiserver-kubelet-client.crt"),
               "--kubelet-client-key", str(root / "apiserver-kubelet-client.key"),
               "--kubelet-certificate-authority", str(root / "ca.crt")]

    def tls(identity: str) -> TLSConfig:
        return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key")

    admin_ssl = client_context(root / "ca.crt", root / "admin.crt", root / "admin.key")
    procs = [subprocess.Popen([sys.executable, "-m", *argv, "--log-level", "WARNING"], env=env,
                              stdin=subprocess.DEVNULL)
             for argv in (["apiserver", "--etcd", etcd.endpoint, "--listen", api, "--etcd-prefix", prefix,
                           "--cluster-cidr", cidr, "--rest-listen", rest, *secured],)]
    try:
        async with Client(api, tls=tls("admin")) as client:
            await client.namespaces.get("default")
            scheduler_conf = write_kubeconfig(tmp_path / "scheduler.conf", rest, api, tls=tls("scheduler"))
            kubelet_conf = write_kubeconfig(tmp_path / "kubelet.conf", rest, api, tls=tls(f"kubelet/{node}-client"))
            for argv in (["scheduler", "--kubeconfig", str(scheduler_conf)],
                         ["kubelet", "--node-name", node, "--kubeconfig", str(kubelet_conf),
                          "--tls-cert-file", str(root / "kubelet" / f"{node}.crt"),
                          "--tls-private-key-file", str(root / "kubelet" / f"{node}.key"),
                          "--client-ca-file", str(root / "ca.crt"), "--root-dir", str(tmp_path / "k"),
                          "--pod-logs-dir", str(tmp_path / "logs"), "--runc-root", str(tmp_path / "runc"),
                          "--cluster-cidr", cidr]):
                procs.append(subprocess.Popen([sys.executable, "-m", *argv, "--log-level", "WARNING"], env=env,
                                              stdin=subprocess.DEVNULL))
            await client.pods.create(core_pb2.Pod(
                metadata=meta_pb2.ObjectMeta(name="traced", namespace="default"),
                spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
                    name="main", image="busybox", imagePullPolicy="IfNotPresent", command=["sleep", "3600"])])))
            pod = await until(lambda: client.pods.get("traced", "default"), "the traced pod Running", timeout=60,
                              check=lambda p: p.status.phase == "Running")
            trace_id = pod.metadata.annotations[POD_TRACE_ANNOTATION].split("-")[1]
            # A pod created through the REST API (as kubectl does) starts a trace just the same.
            async with aiohttp.ClientSession() as http:
                async with http.post(f"https://{rest}/api/v1/namespaces/default/pods", ssl=admin_ssl, json={
                        "metadata": {"name": "via-rest"}, "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                            {"name": "main", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                             "command": ["sleep", "3600"]}]}}) as reply:
                    assert reply.status == 201
                    rest_trace = (await reply.json())["metadata"]["annotations"][POD_TRACE_ANNOTATION].split("-")[1]
                # ... and one created by server-side apply (kubectl apply --server-side); gated: it stays put.
                async with http.patch(
                        f"https://{rest}/api/v1/namespaces/default/pods/via-apply?fieldManager=test", ssl=admin_ssl,
                        headers={"Content-Type": "application/apply-patch+yaml"}, json={
                            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "via-apply"}, "spec": {
                                "schedulingGates": [{"name": "example.com/hold"}],
                                "containers": [{"name": "main", "image": "busybox"}]}}) as reply:
                    assert reply.status == 201, await reply.text()
                    apply_trace = (await reply.json())["metadata"]["annotations"][POD_TRACE_ANNOTATION].split("-")[1]
            await until(lambda: client.pods.get("via-rest", "default"), "the pod made over REST scheduled", timeout=60,
                        check=lambda p: p.spec.nodeName)
    finally:
        # Pods go through the API while the kubelet runs (it stops them), even when an
        # assertion above failed: nothing may stay running on the machine.
        try:
            async with Client(api, timeout=5, wait_for_ready=False, tls=tls("admin")) as client:
                for name in ("traced", "via-rest", "via-apply"):
                    with contextlib.suppress(errors.NotFound):
                        await client.pods.delete(name, "default")
                await settle(lambda: client.pods.list_all("default"), timeout=30, check=lambda found: not found[0])
        except errors.ApiError:
            pass  # the apiserver never came up: no pod was made
        try:
            for proc in reversed(procs):  # kubelet, scheduler, then the apiserver they talk to
                proc.send_signal(signal.SIGTERM)
                # Waited for off the loop: the collector on this loop must take their last exports.
                await asyncio.to_thread(proc.wait, 30)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            subprocess.run(["ip", "link", "del", bridge_name(node)], capture_output=True)

    via_rest = {(s.service, s.name, bool(s.parent_id)) for s in spans.spans if s.trace_id == rest_trace}
    assert {("apiserver", "POST /api/v1/namespaces/{namespace}/pods", False),
            ("scheduler", "scheduling cycle", True)} <= via_rest, via_rest
    assert ("apiserver", "PATCH /api/v1/namespaces/{namespace}/pods/{name}") in {
        (s.service, s.name) for s in spans.spans if s.trace_id == apply_trace}
    ours = [s for s in spans.spans if s.trace_id == trace_id]
    services = {s.service for s in ours}
    assert {"apiserver", "scheduler", f"kubelet-{node}"} <= services, services
    names = {s.name for s in ours}
    for expected in ("scheduling cycle", "binding cycle", "syncPod", "/kubeling.v1.Pods/Create",
                     "/kubeling.v1.Pods/Bind", "/runtime.v1.RuntimeService/RunPodSandbox",
                     "/runtime.v1.RuntimeService/StartContainer", "cni ADD bridge", "cni ADD loopback",
                     "runc run"):
        assert expected in names, (expected, sorted(names))
    def children(parent: str) -> set[str]:
        """The names of the spans under every span named `parent` (a pod can take several
        scheduling cycles: the first may come before the node registered)."""
        parents = {s.span_id for s in ours if s.name == parent}
        return {s.name for s in ours if s.parent_id in parents}

    # The apiserver's etcd write is a child of the Create; the scheduler's extension points
    # are children of its cycles (one node: scoring is skipped, as upstream does).
    assert "/etcdserverpb.KV/Txn" in children("/kubeling.v1.Pods/Create")
    assert {"PreFilter", "Filter", "Reserve", "Permit", "binding cycle"} <= children("scheduling cycle")
    # Each cycle's plugin results, as span events (what `scheduler.kubeling.io/record` puts on the pod).
    cycles = [s for s in ours if s.name == "scheduling cycle"]
    assert all({"scheduler.kubeling.io/filter-result", "scheduler.kubeling.io/selected-node"} <= set(s.events)
               for s in cycles), [s.events for s in cycles]
    # runc under both CRI calls: the pause's and the container's (through its shim)
    assert "runc run" in children("/runtime.v1.RuntimeService/RunPodSandbox")
    assert "runc run" in children("/runtime.v1.RuntimeService/StartContainer")
    assert {"PreBind", "Bind"} <= children("binding cycle")
    assert "/kubeling.v1.Pods/Bind" in children("Bind")
    ids = {s.span_id for s in ours}
    roots = [s for s in ours if not s.parent_id]
    assert [r.name for r in roots] == ["/kubeling.v1.Pods/Create"]  # the create is the root
    orphans = [(s.service, s.name) for s in ours if s.parent_id and s.parent_id not in ids]
    assert not orphans, f"spans whose parent is missing (left open?): {orphans}"
    assert all(s.ended for s in ours)
    by_id = {s.span_id: s for s in ours}
    cni = next(s for s in ours if s.name == "cni ADD bridge")
    chain = []
    while cni.parent_id:
        cni = by_id[cni.parent_id]
        chain.append(cni.name)
    assert "/runtime.v1.RuntimeService/RunPodSandbox" in chain and "syncPod" in chain
    assert chain[-1] == "/kubeling.v1.Pods/Create"
    # The kubelet's polls (its PLEG lists every second) are no traces of their own: a CRI
    # call outside any trace makes no span, as a gRPC client's would not.
    lone = {s.name for s in spans.spans if s.service == f"kubelet-{node}" and not s.parent_id}
    assert not {name for name in lone if name.startswith("/runtime.v1.")}, lone

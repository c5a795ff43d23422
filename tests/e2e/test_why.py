"""Why this node, through a secured apiserver and `kubeling why` (issue 21): the recorded
results travel with the binding (success) or the failure status update, and read back as
`kubeling why` prints them — the least allocated node's higher NodeResourcesFit score, a
taint's reason, preemption's victims."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from cluster.why import render, results_of
from kubeling import pki
from kubeling.client import Client
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import core_pb2, meta_pb2, scheduling_pb2
from scheduler.framework.results import PREFIX, RECORD
from scheduler.service import SchedulerService
from tests.e2e.conftest import secured_apiserver_config, tls_of
from tests.wait import until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[tuple[APIServer, Client, Path]]:
    certs = tmp_path / "pki"
    pki.ensure(certs, {})
    server = APIServer(secured_apiserver_config(etcd, prefix, certs, rest_listen="127.0.0.1:0"))
    await server.start()
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.rest_address, server.address,
                                  tls=tls_of(certs, "admin"))
    service = SchedulerService(server.address, leader_elect=False,
                               client=Client(server.address, tls=tls_of(certs, "scheduler")))
    await service.start()
    try:
        async with Client(server.address, tls=tls_of(certs, "admin")) as client:
            yield server, client, kubeconfig
    finally:
        await service.stop()
        await server.stop(grace=0)


def _node(name: str, cpu: str, taints: list[core_pb2.Taint] | None = None) -> core_pb2.Node:
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.NodeSpec(taints=taints or []),
                         status=core_pb2.NodeStatus(capacity=capacity, allocatable=capacity))


def _pod(name: str, cpu: str, record: bool = True, priority_class: str = "", node: str = "") -> core_pb2.Pod:
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PodSpec(
        nodeName=node, priorityClassName=priority_class, containers=[core_pb2.Container(
            name="main", image="busybox", resources=core_pb2.ResourceRequirements(requests={"cpu": cpu}))]))
    if record:
        pod.metadata.annotations[RECORD] = "true"
    return pod


async def _results(client: Client, name: str, key: str) -> dict[str, object] | None:
    for _ in range(300):
        pod = await client.pods.get(name)
        if PREFIX + key in pod.metadata.annotations:
            return json.loads(pod.metadata.annotations[PREFIX + key])
        await asyncio.sleep(0.1)
    raise AssertionError(f"pod {name}: no {key} recorded")


async def _why(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "cluster", "why", *args, "--kubeconfig",
                                                str(kubeconfig), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_why_a_pod_landed_where_it_did_or_nowhere(cluster: tuple[APIServer, Client, Path]) -> None:
    _, client, kubeconfig = cluster
    await client.nodes.create(_node("busy", "4"))
    await client.nodes.create(_node("idle", "4"))
    await client.nodes.create(_node("tainted", "64", [core_pb2.Taint(key="dedicated", value="db",
                                                                     effect="NoSchedule")]))
    await client.pods.create(_pod("filler", "3", record=False, node="busy"))

    await client.pods.create(_pod("web", "1"))
    scores = await _results(client, "web", "score-result")
    assert scores is not None
    pod = await client.pods.get("web")
    assert pod.spec.nodeName == "idle" and pod.metadata.annotations[PREFIX + "selected-node"] == "idle"
    fit = {n: s["NodeResourcesFit"] for n, s in scores.items()}  # type: ignore[index]
    assert fit["idle"]["normalized"] > fit["busy"]["normalized"]  # the least allocated node scores higher
    filters = json.loads(pod.metadata.annotations[PREFIX + "filter-result"])
    assert filters["tainted"]["TaintToleration"] == \
        "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: db}"
    code, out, err = await _why(kubeconfig, "web")
    assert code == 0, err
    lines = out.splitlines()
    assert "Selected:    idle" in lines
    winner = next(line for line in lines if line.startswith("*"))
    assert winner.split()[1:3] == ["idle", "passed"]
    assert any(line.split()[:2] == ["tainted", "TaintToleration:"] and "untolerated taint {dedicated: db}" in line
               for line in lines), out
    code, out, _ = await _why(kubeconfig, "web", "-o", "json")
    assert json.loads(out)["selected-node"] == "idle"

    # Nowhere: the failure status update carries the results.
    await client.pods.create(_pod("huge", "32"))
    filters_huge = await _results(client, "huge", "filter-result")
    assert filters_huge is not None
    assert filters_huge["idle"]["NodeResourcesFit"] == "Unschedulable: Insufficient cpu"  # type: ignore[index]
    code, out, _ = await _why(kubeconfig, "huge")
    assert code == 0 and "Selected:    <none>" in out and "NodeResourcesFit: Insufficient cpu" in out

    # Preemption: the victims are named.
    await client.priorityclasses.create(scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="high"),
                                                                     value=1000))
    await client.pods.create(_pod("low", "3", node="idle"))
    await client.pods.create(_pod("urgent", "4", priority_class="high"))
    # The victims never finish terminating here (no kubelet): the next attempt ("not eligible:
    # victims on the nominated node are still terminating") may replace the preempting
    # attempt's results at any moment, so that attempt is rendered from the read that saw it,
    # as `why` renders it.
    async def annotations() -> dict[str, str]:
        return dict((await client.pods.get("urgent")).metadata.annotations)
    snapshot = await until(annotations, "the preempting attempt's results on the pod", timeout=30,
                           check=lambda a: json.loads(a.get(PREFIX + "postfilter-result", "{}")).get("victims"))
    post = json.loads(snapshot[PREFIX + "postfilter-result"])
    assert post["nominatedNode"] in ("busy", "idle")
    assert post["victims"] in (["default/filler"], ["default/low", "default/web"])
    recorded = results_of(snapshot)
    assert recorded is not None and "victims default/" in render("default/urgent", recorded)
    code, out, _ = await _why(kubeconfig, "urgent")
    assert code == 0 and "Pod:         default/urgent" in out, out

    code, _, err = await _why(kubeconfig, "plain-absent")
    assert code == 1 and "NotFound" in err
    await client.pods.create(_pod("unrecorded", "1", record=False))
    code, _, err = await _why(kubeconfig, "unrecorded")
    assert code == 1 and "has no recorded scheduling results" in err

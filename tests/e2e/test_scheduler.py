"""The scheduler against a real apiserver and etcd: it watches, binds, reports. The
apiserver is secured as `kubeling up` runs it (TLS, x509, Node,RBAC): the scheduler uses
its own certificate and lives with upstream's system:kube-scheduler role."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import pki
from kubeling.client import Client
from kubeling.quantity import parse_quantity
from protos.kubeling.v1 import core_pb2, meta_pb2, scheduling_pb2
from scheduler.service import SchedulerService
from tests.e2e.conftest import secured_apiserver_config, tls_of
from tests.wait import until


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    root = tmp_path / "pki"
    pki.ensure(root, {})
    return root


@pytest.fixture
async def apiserver(etcd: EtcdServer, prefix: str, certs: Path) -> AsyncIterator[APIServer]:
    server = APIServer(secured_apiserver_config(etcd, prefix, certs))
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)


@pytest.fixture
async def client(apiserver: APIServer, certs: Path) -> AsyncIterator[Client]:
    async with Client(apiserver.address, tls=tls_of(certs, "admin")) as made:
        yield made


def _scheduler(apiserver: APIServer, *args: Any, **options: Any) -> SchedulerService:
    """A scheduler on its own certificate (CN system:kube-scheduler)."""
    certs = Path(apiserver.config.client_ca_file).parent
    return SchedulerService(apiserver.address, *args,
                            client=Client(apiserver.address, tls=tls_of(certs, "scheduler")), **options)


def _node(name: str, cpu: str, memory: str, pods: str = "110") -> core_pb2.Node:
    return core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name),
                         status=core_pb2.NodeStatus(capacity={"cpu": cpu, "memory": memory, "pods": pods},
                                                    allocatable={"cpu": cpu, "memory": memory, "pods": pods}))


def _pod(name: str, cpu: str, memory: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name),
                        spec=core_pb2.PodSpec(containers=[core_pb2.Container(
                            name="main", image="busybox", resources=core_pb2.ResourceRequirements(
                                requests={"cpu": cpu, "memory": memory}))]))



async def _until(predicate: Any, timeout: float = 60.0) -> None:
    await until(predicate, "the scheduler's outcome", timeout, interval=0.1)


async def test_300_pods_on_20_nodes_all_bound_within_capacity(apiserver: APIServer, client: Client) -> None:
    rng = random.Random(7)
    sizes = {}
    for i in range(20):
        cpu, mem = rng.choice([("2", "4Gi"), ("4", "8Gi"), ("8", "16Gi")])
        sizes[f"node-{i}"] = (parse_quantity(cpu).milli_value(), parse_quantity(mem).int_value())
        await client.nodes.create(_node(f"node-{i}", cpu, mem))
    service = _scheduler(apiserver)
    await service.start()
    try:
        await asyncio.gather(*(client.pods.create(_pod(f"p{i}", rng.choice(["100m", "200m", "250m"]),
                                                       rng.choice(["64Mi", "128Mi"])))
                               for i in range(300)))

        async def all_bound() -> bool:
            items, _ = await client.pods.list_all()
            return all(p.spec.nodeName for p in items)

        await _until(all_bound, 120)
        items, _ = await client.pods.list_all()
        assert len(items) == 300
        used_cpu: Counter[str] = Counter()
        used_mem: Counter[str] = Counter()
        for p in items:
            c = p.spec.containers[0].resources.requests
            used_cpu[p.spec.nodeName] += parse_quantity(c["cpu"]).milli_value()
            used_mem[p.spec.nodeName] += parse_quantity(c["memory"]).int_value()
            cond = {x.type: x for x in p.status.conditions}["PodScheduled"]
            assert cond.status == "True"
        for node, milli_cpu in used_cpu.items():
            assert milli_cpu <= sizes[node][0] and used_mem[node] <= sizes[node][1], node
        assert len(used_cpu) > 10  # spread, not piled on a few nodes
        # Each pod was bound exactly once: one Scheduled event per pod.
        await service.recorder.flush()
        events, _ = await client.events.list_all(field_selector="reason=Scheduled")
        per_pod = Counter(e.involvedObject.name for e in events)
        assert len(per_pod) == 300 and set(per_pod.values()) == {1}
    finally:
        await service.stop()


async def test_unschedulable_pod_reported_then_scheduled_when_a_node_arrives(apiserver: APIServer,
                                                                             client: Client) -> None:
    await client.nodes.create(_node("small", "1", "1Gi"))
    service = _scheduler(apiserver)
    await service.start()
    try:
        await client.pods.create(_pod("big", "4", "1Gi"))

        async def reported() -> bool:
            p = await client.pods.get("big")
            return any(c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions)

        await _until(reported, 30)
        p = await client.pods.get("big")
        cond = {c.type: c for c in p.status.conditions}["PodScheduled"]
        assert cond.reason == "Unschedulable"
        assert cond.message == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                                "available: 1 No preemption victims found for incoming pod..")
        await service.recorder.flush()
        events, _ = await client.events.list_all(field_selector="reason=FailedScheduling,involvedObject.name=big")
        assert events and events[0].type == "Warning"

        await client.nodes.create(_node("large", "8", "8Gi"))

        async def bound() -> bool:
            return (await client.pods.get("big")).spec.nodeName == "large"

        await _until(bound, 30)
    finally:
        await service.stop()


async def test_leader_failover_under_load(apiserver: APIServer, client: Client) -> None:
    from kubeling.leaderelection import ElectionConfig
    election = ElectionConfig(lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)
    for i in range(10):
        await client.nodes.create(_node(f"node-{i}", "8", "16Gi"))
    a = _scheduler(apiserver, election=election, identity="replica-a")
    b = _scheduler(apiserver, election=election, identity="replica-b")
    await a.start()

    async def a_leads() -> bool:
        return a.leading

    await _until(a_leads, 10)
    await b.start()

    async def b_saw_a() -> bool:
        return b.elector is not None and b.elector.observed_holder == "replica-a"

    await _until(b_saw_a, 10)  # b has read the lease a holds ...
    assert a.leading and not b.leading  # ... so one schedules, the other stands by
    crashed = False
    try:
        for i in range(120):
            await client.pods.create(_pod(f"p{i}", "100m", "64Mi"))
            if i == 50:
                await a.stop(release=False)  # the leader dies without releasing its lease
                crashed = True
            await asyncio.sleep(0.01)

        async def all_bound() -> bool:
            items, _ = await client.pods.list_all()
            return len(items) == 120 and all(p.spec.nodeName for p in items)

        await _until(all_bound, 60)
        assert b.leading
        lease = await client.leases.get("kube-scheduler", "kube-system")
        assert lease.spec.holderIdentity == "replica-b" and lease.spec.leaseTransitions >= 1
        await b.recorder.flush()
        events, _ = await client.events.list_all(field_selector="reason=Scheduled")
        per_pod = Counter(e.involvedObject.name for e in events)
        assert len(per_pod) == 120 and set(per_pod.values()) == {1}  # none bound twice
        assert {e.reportingInstance for e in events} == {"replica-a", "replica-b"}
    finally:
        if not crashed:
            await a.stop()
        await b.stop()


async def test_preemption_through_the_apiserver(apiserver: APIServer, client: Client) -> None:
    await client.nodes.create(_node("only", "2", "4Gi"))
    service = _scheduler(apiserver, leader_elect=False)
    await service.start()
    try:
        for i in range(2):
            await client.pods.create(_pod(f"low{i}", "1", "256Mi"))

        async def lows_bound() -> bool:
            pods = [await client.pods.get(f"low{i}") for i in range(2)]
            return all(p.spec.nodeName == "only" for p in pods)

        await _until(lows_bound, 30)
        await client.priorityclasses.create(scheduling_pb2.PriorityClass(
            metadata=meta_pb2.ObjectMeta(name="urgent"), value=1000))
        urgent = _pod("urgent", "1500m", "256Mi")
        urgent.spec.priorityClassName = "urgent"
        await client.pods.create(urgent)

        async def nominated() -> bool:
            return (await client.pods.get("urgent")).status.nominatedNodeName == "only"

        await _until(nominated, 30)
        victims = [p for p in (await client.pods.list_all())[0] if p.metadata.HasField("deletionTimestamp")]
        assert sorted(p.metadata.name for p in victims) == ["low0", "low1"]  # 1500m needs both cores freed
        # play the kubelet: the victims' containers are stopped, it confirms the deletions
        for v in victims:
            await client.pods.delete(v.metadata.name, grace_period_seconds=0)

        async def urgent_bound() -> bool:
            return (await client.pods.get("urgent")).spec.nodeName == "only"

        await _until(urgent_bound, 30)
        await service.recorder.flush()
        events, _ = await client.events.list_all(field_selector="reason=Preempted")
        assert sorted(e.involvedObject.name for e in events) == ["low0", "low1"]
        assert "Preempted by pod default/urgent on node only" in events[0].message
    finally:
        await service.stop()


async def test_profiles_metrics_and_health(apiserver: APIServer, client: Client, tmp_path) -> None:
    import aiohttp

    from kubeling.netutil import free_port
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "- schedulerName: default-scheduler\n"
        "- schedulerName: bin-packing\n"
        "  pluginConfig:\n"
        "  - name: NodeResourcesFit\n"
        "    args: {scoringStrategy: {type: MostAllocated}}\n")
    for name in ("a", "b"):
        await client.nodes.create(_node(name, "4", "8Gi"))
    port = free_port()
    service = _scheduler(apiserver, config, leader_elect=False, metrics_listen=f"127.0.0.1:{port}")
    await service.start()
    try:
        for i in range(4):
            p = _pod(f"packed{i}", "500m", "128Mi")
            p.spec.schedulerName = "bin-packing"
            await client.pods.create(p)
        other = _pod("foreign", "100m", "64Mi")
        other.spec.schedulerName = "someone-else"  # no profile of ours: left alone
        await client.pods.create(other)

        async def packed() -> bool:
            pods = [await client.pods.get(f"packed{i}") for i in range(4)]
            return all(p.spec.nodeName for p in pods)

        await _until(packed, 30)
        nodes = {(await client.pods.get(f"packed{i}")).spec.nodeName for i in range(4)}
        assert len(nodes) == 1  # MostAllocated packs onto one node
        assert (await client.pods.get("foreign")).spec.nodeName == ""
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
                text = await r.text()
            async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                assert r.status == 200 and await r.text() == "leader"
        assert 'scheduler_schedule_attempts_total{profile="bin-packing",result="scheduled"} 4.0' in text
        assert 'scheduler_pending_pods{queue="active"}' in text
        assert "scheduler_framework_extension_point_duration_seconds_bucket" in text
        assert "scheduler_pod_scheduling_attempts_bucket" in text
    finally:
        await service.stop()


async def test_a_leader_stops_promptly_when_the_apiserver_is_gone(etcd: EtcdServer, prefix: str,
                                                                  certs: Path) -> None:
    """Shutdown gives the lease up through the apiserver; with the apiserver stopped first
    (as a supervisor stopping everything at once would) it must still end, soon."""

    from kubeling.leaderelection import ElectionConfig
    from scheduler.service import SHUTDOWN_API_SECONDS

    server = APIServer(secured_apiserver_config(etcd, prefix, certs))
    await server.start()
    service = _scheduler(server, identity="alone",
                               election=ElectionConfig(lease_duration=2.0, renew_deadline=1.5, retry_period=0.2))
    await service.start()
    try:
        async def leads() -> bool:
            return service.leading

        await _until(leads, 10)
    finally:
        await server.stop(grace=0)
    start = asyncio.get_running_loop().time()
    await asyncio.wait_for(service.stop(), SHUTDOWN_API_SECONDS + 10)
    assert asyncio.get_running_loop().time() - start < SHUTDOWN_API_SECONDS + 5

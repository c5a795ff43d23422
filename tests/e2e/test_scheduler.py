"""The scheduler against a real apiserver and etcd: it watches, binds, reports; a Policy in a
ConfigMap configures it. The apiserver is secured as `kubeling up` runs it (TLS, x509,
Node,RBAC): the scheduler uses its own certificate and lives with upstream's
system:kube-scheduler role."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import pki
from kubeling.client import Client
from kubeling.kubeconfig import write_kubeconfig
from kubeling.quantity import parse_quantity
from protos.kubeling.v1 import core_pb2, meta_pb2, rbac_pb2, scheduling_pb2
from scheduler.config import LegacyOptions
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


# ---------------------------------------------------------------- a Policy in a ConfigMap
# The scheduler configured by `--policy-configmap`: it reads the ConfigMap with its own
# certificate once an administrator granted it (upstream's system:kube-scheduler may not read
# ConfigMaps either), schedules by it, takes a changed Policy, keeps its profiles when a change
# is bad and says why in an Event on the ConfigMap; and refuses to start without it.

NAMESPACE, NAME = "kube-system", "scheduler-policy"


def _policy(priority: str, predicates: list[str] | None = None) -> str:
    return json.dumps({"kind": "Policy", "apiVersion": "v1",
                       "predicates": [{"name": p} for p in predicates or ["PodFitsResources"]],
                       "priorities": [{"name": priority, "weight": 1}]})


async def _grant_policy_reading(client: Client) -> None:
    """What an administrator does for a policy ConfigMap: a Role in its namespace, bound to
    the scheduler's user."""
    rule = rbac_pb2.PolicyRule(verbs=["get", "list", "watch"], apiGroups=[""], resources=["configmaps"])
    await client.roles.create(rbac_pb2.Role(metadata=meta_pb2.ObjectMeta(name="scheduler-policy-reader",
                                                                         namespace=NAMESPACE), rules=[rule]))
    await client.rolebindings.create(rbac_pb2.RoleBinding(
        metadata=meta_pb2.ObjectMeta(name="scheduler-policy-reader", namespace=NAMESPACE),
        subjects=[rbac_pb2.Subject(kind="User", apiGroup="rbac.authorization.k8s.io", name="system:kube-scheduler")],
        roleRef=rbac_pb2.RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name="scheduler-policy-reader")))


async def _set_policy(client: Client, data: dict[str, str]) -> None:
    try:
        cm = await client.configmaps.get(NAME, NAMESPACE)
    except Exception:
        await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=NAME, namespace=NAMESPACE),
                                                          data=data))
        return
    cm.data.clear()
    cm.data.update(data)
    await client.configmaps.update(cm)


async def _event(client: Client, reason: str, count: int = 1) -> list[core_pb2.Event]:
    """The scheduler's Events on the ConfigMap with `reason`, once there are `count` of them."""
    found: list[core_pb2.Event] = []

    async def there() -> bool:
        nonlocal found
        events, _ = await client.events.list_all(NAMESPACE, field_selector=f"reason={reason}")
        found = [e for e in events if e.involvedObject.name == NAME]
        return len(found) >= count

    await until(there, f"{count} {reason} event(s) on the policy ConfigMap", 30, interval=0.1)
    return found


async def _place(client: Client, name: str) -> str:
    await client.pods.create(_pod(name, "500m", "256Mi"))
    node = ""

    async def bound() -> bool:
        nonlocal node
        node = (await client.pods.get(name)).spec.nodeName
        return bool(node)

    await until(bound, f"pod {name} bound", 30, interval=0.05)
    return node


async def test_a_policy_configmap_is_read_followed_and_a_bad_change_refused(apiserver: APIServer,
                                                                           client: Client) -> None:
    await _grant_policy_reading(client)
    await _set_policy(client, {"policy.cfg": _policy("MostRequestedPriority")})
    for name in ("a", "b"):
        await client.nodes.create(_node(name, "4", "8Gi"))
    service: SchedulerService = _scheduler(apiserver, leader_elect=False,
                                           legacy=LegacyOptions(policy_configmap=NAME))
    await service.start()
    try:
        profile = service.scheduler.frameworks["default-scheduler"]
        assert profile.points.enabled["score"] == ["NodeResourcesMostAllocated"]
        # MostRequested packs: every pod on the node the first one took
        first = await _place(client, "packed-0")
        assert {await _place(client, f"packed-{i}") for i in (1, 2)} == {first}

        # A changed Policy: the profile is rebuilt; LeastRequested spreads to the emptier node.
        await _set_policy(client, {"policy.cfg": _policy("LeastRequestedPriority")})
        [applied] = await _event(client, "PolicyApplied")
        assert applied.type == "Normal" and "default-scheduler" in applied.message
        assert service.scheduler.frameworks["default-scheduler"].points.enabled["score"] == \
            ["NodeResourcesLeastAllocated"]
        other = await _place(client, "spread-0")
        assert other != first

        # A bad one: refused with upstream's words, the profile kept (the next pod still spreads).
        await _set_policy(client, {"policy.cfg": _policy("LeastRequestedPriority", ["NoSuchPredicate"])})
        [rejected] = await _event(client, "PolicyRejected")
        assert rejected.type == "Warning"
        assert "predicates[0].name: predicate type not found for 'NoSuchPredicate'" in rejected.message
        assert "keeps its previous profiles" in rejected.message
        await _set_policy(client, {"policy.json": _policy("MostRequestedPriority")})
        await _event(client, "PolicyRejected", 2)
        events, _ = await client.events.list_all(NAMESPACE, field_selector="reason=PolicyRejected")
        assert any("missing policy config map value at key 'policy.cfg'" in e.message for e in events)
        assert service.scheduler.frameworks["default-scheduler"].points.enabled["score"] == \
            ["NodeResourcesLeastAllocated"]
        # still LeastRequested: the emptier node, until it holds as much as the other
        assert [await _place(client, f"spread-{i}") for i in (1, 2)] == [other, other]
    finally:
        await service.stop()


def _scheduler_command(kubeconfig: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler", "--kubeconfig", str(kubeconfig), *argv],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


async def test_without_its_policy_the_scheduler_does_not_start(apiserver: APIServer, client: Client,
                                                               certs: Path, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "scheduler.conf", "", apiserver.address, tls=tls_of(certs, "scheduler"))

    async def run(*argv: str) -> tuple[int, str, str]:
        done = await asyncio.to_thread(_scheduler_command, kubeconfig, *argv)
        return done.returncode, done.stdout, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""

    # not readable by the scheduler yet: Forbidden, said in one line
    code, _, last = await run("--policy-configmap", NAME)
    assert code == 2 and last.startswith(f"scheduler: invalid configuration: couldn't get policy config map "
                                         f"{NAMESPACE}/{NAME}: "), last
    assert "forbidden" in last.lower()
    await _grant_policy_reading(client)
    code, _, last = await run("--policy-configmap", NAME)
    assert code == 2 and f"couldn't get policy config map {NAMESPACE}/{NAME}" in last and "not found" in last, last
    await _set_policy(client, {"policy": "{}"})
    code, _, last = await run("--policy-configmap", NAME)
    assert code == 2 and last == (f"scheduler: invalid configuration: policy ConfigMap {NAMESPACE}/{NAME}: missing "
                                  "policy config map value at key 'policy.cfg'"), last
    # --print-config reads it through the apiserver and prints the profile it makes
    await _set_policy(client, {"policy.cfg": _policy("MostRequestedPriority", ["PodFitsResources", "HostName"])})
    code, out, last = await run("--policy-configmap", NAME, "--print-config")
    assert code == 0, last
    printed: dict[str, Any] = yaml.safe_load(out)
    plugins = printed["profiles"][0]["plugins"]
    assert [e["name"] for e in plugins["filter"]["enabled"]] == ["NodeUnschedulable", "NodeName", "NodeResourcesFit",
                                                                "TaintToleration"]
    assert plugins["score"]["enabled"] == [{"name": "NodeResourcesMostAllocated", "weight": 1}]
    assert f"plugins from policy ConfigMap {NAMESPACE}/{NAME}" in out

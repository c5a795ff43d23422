"""Faults on the whole multi-host shape (issue 19): `kubeling up --hosts --nodes 3
--etcd-members 3 --apiservers 2`, pods created and deleted all along, and in turn: an etcd
member, an apiserver, the scheduler and a kubelet killed (SIGKILL; the supervisor brings
each back), then one host partitioned (iptables DROP in its namespace) for longer than the
grace period and healed. After each fault a new pod must run (the recovery time is
printed); at the end every pod that should run runs exactly once with an IP of its own, no
container of a deleted pod is left on any host, the partitioned host is Ready again and
`kubeling down` leaves nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cluster.hosts import bridge_of, netns_name
from cluster.plan import ClusterPlan
from cni import netns
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.wait import WaitTimeout, holds, until

CIDR = f"10.{155 + os.getpid() % 5}.0.0/16"
GRACE = 4  # --node-monitor-grace-period: a partitioned node turns Unknown soon


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _pod(name: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
                            name="main", image="busybox", imagePullPolicy="IfNotPresent",
                            command=["sleep", "3600"])]))


async def _retry(call: Any, timeout: float = 60) -> Any:
    """As every client of a cluster under faults: what is refused (503) is tried again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except (errors.ServiceUnavailable, errors.Timeout):
            assert time.monotonic() < deadline, "the API stayed unavailable"
            await asyncio.sleep(0.2)


async def _running(client: Client, name: str, timeout: float = 120) -> float:
    start = time.monotonic()
    while True:
        try:
            pod = await client.pods.get(name)
            if pod.status.phase == "Running":
                return time.monotonic() - start
        except (errors.ServiceUnavailable, errors.NotFound, errors.Timeout):
            pass
        assert time.monotonic() - start < timeout, f"{name} did not run in {timeout}s"
        await asyncio.sleep(0.2)


def _containers(plan: ClusterPlan, node: str) -> int:
    out = subprocess.run(["runc", "--root", str(plan.runc_root(node)), "list", "--format", "json"],
                         capture_output=True, text=True).stdout
    return len(json.loads(out or "[]") or [])


async def test_the_cluster_survives_each_fault_in_turn(tmp_path: Path) -> None:
    state = tmp_path / "faults"
    prefix = f"f{os.getpid() % 1000}-"
    nodes = [f"{prefix}{i}" for i in (1, 2, 3)]
    netns_before = set(netns.list_names())
    up = _kubeling("up", "--hosts", "--nodes", "3", "--etcd-members", "3", "--apiservers", "2", "--detach",
                   "--state-dir", str(state), "--node-prefix", prefix, "--cluster-cidr", CIDR,
                   "--node-monitor-grace-period", str(GRACE), "--default-unreachable-toleration-seconds", "3")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None
        async with Client.from_kubeconfig(state / "kubeconfig", timeout=10) as client:
            alive: list[str] = []
            churned = [0]

            async def churn() -> None:  # pods created and deleted all along
                i = 0
                while True:
                    name = f"churn-{i}"
                    i += 1
                    await _retry(lambda n=name: _create(client, n))
                    alive.append(name)
                    if len(alive) > 4:
                        old = alive.pop(0)
                        await _retry(lambda n=old: _delete(client, n))
                        churned[0] += 1
                    await asyncio.sleep(0.5)

            churner = asyncio.create_task(churn())
            recovery: dict[str, float] = {}
            faults = [("etcd member", "etcd-1"), ("apiserver", "apiserver-1"), ("scheduler", "scheduler"),
                      ("kubelet", f"kubelet-{nodes[0]}")]
            for k, (what, component) in enumerate(faults):
                pid = (ClusterPlan.load(state) or plan).components[component]
                os.kill(pid, signal.SIGKILL)
                await _retry(lambda n=f"probe-{k}": _create(client, n))
                recovery[what] = await _running(client, f"probe-{k}")
            # Every node Ready and untainted again, and staying so for two grace periods: the
            # kubelets heartbeat often enough for the short grace (they once did every 10 s for
            # this 4 s grace, so every node flapped to Unknown and lost its pods).
            async def all_ready() -> bool:
                return all([_ready_untainted(await client.nodes.get(n)) for n in nodes])
            await _wait(all_ready, "every node Ready and untainted after the faults", 90)
            async def flapped() -> list[str]:
                listed, _ = await _retry(client.nodes.list_all)
                return [n.metadata.name for n in listed if not _ready_untainted(n)]
            await holds(flapped, "every node Ready without a fault", 2 * GRACE, interval=0.3,
                        check=lambda names: not names)
            # One host cut off for longer than the grace period, then healed.
            victim = nodes[2]
            on_victim = {p.metadata.name for p in (await _retry(client.pods.list_all))[0]
                         if p.spec.nodeName == victim}
            assert on_victim, "the scheduler spreads pods: some must be on the third host"
            _partition(victim, True)
            cut = time.monotonic()
            try:
                async def unknown() -> bool:  # and tainted: the scheduler keeps new pods away
                    n = await client.nodes.get(victim)
                    return any(c.type == "Ready" and c.status == "Unknown" for c in n.status.conditions) \
                        and any(t.effect == "NoSchedule" for t in n.spec.taints)
                await _wait(unknown, "the partitioned node to turn Unknown and be tainted")
                await _retry(lambda: _create(client, "probe-partition"))
                recovery["partition (a new pod elsewhere)"] = await _running(client, "probe-partition")

                async def evicted() -> bool:  # past their 3 s toleration (they finish once the host is back)
                    pods, _ = await client.pods.list_all()
                    return all(p.metadata.HasField("deletionTimestamp") for p in pods if p.metadata.name in on_victim)
                await _wait(evicted, "the partitioned host's pods evicted after their toleration")
            finally:
                _partition(victim, False)
            healed = time.monotonic()

            async def ready_again() -> bool:
                return _ready_untainted(await client.nodes.get(victim))
            await _wait(ready_again, "the healed node to be Ready and untainted", 90)
            recovery["partition healed (node Ready)"] = time.monotonic() - healed
            print(f"partitioned for {healed - cut:.1f}s; recovery (s): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in recovery.items()) + f"; {churned[0]} pods churned")
            churner.cancel()

            last: list[str] = []

            async def settled() -> bool:
                pods, _ = await client.pods.list_all()
                last[:] = [f"{p.metadata.name}@{p.spec.nodeName}:{p.status.phase}"
                           f"{'(deleting)' if p.metadata.HasField('deletionTimestamp') else ''}" for p in pods]
                return all(not p.metadata.HasField("deletionTimestamp") and p.status.phase == "Running"
                           for p in pods)
            await _wait(settled, "every pod left to run (the evicted ones removed)", 120, last)
            pods, _ = await client.pods.list_all()
            ips = Counter(p.status.podIP for p in pods)
            assert all(ip and n == 1 for ip, n in ips.items()), ips  # one IP each, none shared
            assert all(p.spec.nodeName in nodes for p in pods)
            for node in nodes:  # a pause and an app container per pod, nothing of deleted pods
                expected = 2 * sum(1 for p in pods if p.spec.nodeName == node)

                async def exact(node: str = node, expected: int = expected) -> bool:
                    return _containers(plan, node) == expected
                await _wait(exact, f"node {node}'s containers to be its pods' only", 60)
            # What ran on the partitioned host was evicted (3 s toleration), not left to run twice.
            assert not {p.metadata.name for p in pods} & on_victim, on_victim
    finally:
        down = _kubeling("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert set(netns.list_names()) == netns_before
    assert str(state) not in Path("/proc/self/mountinfo").read_text()  # no container's rootfs left mounted
    assert subprocess.run(["ip", "link", "show", bridge_of(str(state.resolve()))],
                          capture_output=True).returncode != 0
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""


def _ready_untainted(node: core_pb2.Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions) and not node.spec.taints


async def _create(client: Client, name: str) -> None:
    try:
        await client.pods.create(_pod(name))
    except errors.AlreadyExists:
        pass  # an earlier try went through


async def _delete(client: Client, name: str) -> None:
    try:
        await client.pods.delete(name)
    except errors.NotFound:
        pass


async def _wait(check: Any, what: str, timeout: float = 60, state: list[str] | None = None) -> None:
    try:
        await until(check, what, timeout, interval=0.3, retry_on=(errors.ServiceUnavailable, errors.Timeout))
    except WaitTimeout as err:
        raise AssertionError(f"{err}: {state or ''}") from None


def _partition(node: str, on: bool) -> None:
    for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
        subprocess.run(["ip", "netns", "exec", netns_name(node), "iptables", "-I" if on else "-D", chain, flag,
                        "eth0", "-j", "DROP"], check=True)

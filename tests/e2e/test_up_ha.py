"""`kubeling up --apiservers 2 --etcd-members 3`: two apiservers behind HAProxy on a
3-member etcd. Each apiserver killed in turn (SIGKILL; the supervisor brings it back): the
API stays reachable through HAProxy, an informer watching through it resumes on the other
apiserver from its resourceVersion (no relist) and misses nothing, and the controllers
inside the apiservers (IPAM, finalizer, ServiceAccounts) move to the survivor's."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster.plan import ClusterPlan
from cni import netns
from kubelet.agent import bridge_name
from kubeling import errors
from kubeling.client import Client
from kubeling.informer import Informer
from protos.kubeling.v1 import core_pb2, meta_pb2

CIDR = f"10.{175 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _pod(name: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(schedulingGates=[core_pb2.PodSchedulingGate(name="example.com/hold")],
                                              containers=[core_pb2.Container(name="main", image="busybox")]))


async def _create(client: Client, name: str) -> None:
    """As any client does while an apiserver dies under it: a refused write is retried."""
    for attempt in range(100):
        try:
            await client.pods.create(_pod(name))
            return
        except errors.AlreadyExists:
            return
        except (errors.ServiceUnavailable, errors.Timeout):  # 504: a write etcd did not confirm
            assert attempt < 99
            await asyncio.sleep(0.1)


async def test_two_apiservers_behind_haproxy_survive_each_others_death(tmp_path: Path) -> None:
    state = tmp_path / "ha"
    node = f"h{os.getpid() % 1000}-1"
    netns_before = set(netns.list_names())
    up = _kubeling("up", "--apiservers", "2", "--etcd-members", "3", "--nodes", "1", "--detach",
                   "--state-dir", str(state), "--node-prefix", f"h{os.getpid() % 1000}-", "--cluster-cidr", CIDR)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None and [n for n, _, _ in plan.apiserver_backends] == ["apiserver-1", "apiserver-2"]
        async with Client.from_kubeconfig(state / "kubeconfig", timeout=10) as client:
            assert client.address == plan.apiserver  # HAProxy's
            informer: Informer[core_pb2.Pod] = Informer(client.pods)
            await informer.start()
            await informer.wait_synced(30)
            supervisor_log = state / "logs" / "supervisor.log"
            names: list[str] = []
            for victim in ("apiserver-1", "apiserver-2"):
                before = supervisor_log.read_text().count(f"{victim} restarted")
                pid = (ClusterPlan.load(state) or plan).components[victim]
                killed, killed_at = time.monotonic(), time.time()
                os.kill(pid, signal.SIGKILL)
                for i in range(5):
                    names.append(f"{victim}-{i}")
                    await _create(client, names[-1])
                print(f"{victim} killed: writes through HAProxy again after {time.monotonic() - killed:.2f}s")
                deadline = time.monotonic() + 30
                while not all(informer.store.get(f"default/{n}") for n in names):
                    assert time.monotonic() < deadline, "the informer missed pods"
                    await asyncio.sleep(0.1)
                while supervisor_log.read_text().count(f"{victim} restarted") == before:
                    assert time.monotonic() < deadline, f"{victim} was not restarted"
                    await asyncio.sleep(0.1)
                # Back, and ready (HAProxy's health check sees /readyz) before the next one dies.
                while True:
                    current = ClusterPlan.load(state)
                    backends = {n: g for n, g, _ in plan.apiserver_backends}
                    try:
                        async with Client(f"127.0.0.1:{backends[victim]}", tls=plan.tls("admin"), timeout=2,
                                          wait_for_ready=False) as direct:
                            await direct.namespaces.get("default")
                        break
                    except errors.ApiError:
                        assert current is not None and time.monotonic() < deadline + 30
                        await asyncio.sleep(0.2)
            assert informer.relists == 1  # resumed from its resourceVersion every time
            # The in-apiserver controllers are led again: their Lease is renewed after the
            # last kill (by the survivor, or the restarted one once the lease ran out).
            deadline = time.monotonic() + 40
            while True:
                lease = await client.leases.get("kube-apiserver-controllers", "kube-system")
                if lease.spec.holderIdentity and lease.spec.renewTime.seconds > killed_at:
                    break
                assert time.monotonic() < deadline, lease
                await asyncio.sleep(0.5)
            await informer.stop()
            nodes, _ = await client.nodes.list_all()
            assert [n.metadata.name for n in nodes] == [node] and nodes[0].spec.podCIDR
    finally:
        down = _kubeling("down", "--state-dir", str(state))
        subprocess.run(["ip", "link", "del", bridge_name(node)], capture_output=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert set(netns.list_names()) == netns_before
    assert str(state) not in Path("/proc/self/mountinfo").read_text()  # no container's rootfs left mounted
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""

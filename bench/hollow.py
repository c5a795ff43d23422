"""Hollow nodes (not a test), as kubemark: `python -m bench.hollow --nodes 100,300,1000`.

For each node count, a fresh etcd, apiserver and scheduler run as separate processes (as
deployed) and this process plays every node's kubelet "hollowly": it registers the Node
(4 CPUs, 8 GiB, 110 pods, Ready), renews its Lease every 10 s as a kubelet does, watches
the pods bound to it (one watch per node, `spec.nodeName=<node>`: the kubelet-shaped
fan-out) and "runs" each one by writing its status Running and Ready — no runc, no CNI.
Then `--pods-per-node` pods are created as fast as 64 tasks can and the curve is:

- scheduler_pods_per_s: pods bound per second (the first create to the last pod seen bound);
- create_to_node_p50/p99_ms: from a pod's create to its node's watch seeing it bound
  (scheduling plus the fan-out of the binding to the one watcher it concerns);
- lease_update_p99_ms: the hollow kubelets' Lease renewals (get + update), from the
  pods' creation to one renewal interval after the last pod reached its node;
- apiserver_cpu_ms_per_s and etcd_cpu_ms_per_s: their CPU over the measured window;
- etcd_writes_per_s: etcd revisions per second over the window (every write is one).

The JSON gives the curve; `host_speed` says on what machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.apiserver import _cpu_seconds, _pct, start_server, stop_servers
from bench.output import report
from cluster.etcd import EtcdServer
from kubeling import errors
from kubeling.client import Client, WatchEvent
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2

CONCURRENCY = 64
CHANNELS = 16  # the hollow kubelets share these gRPC channels (a real one has its own)
LEASE_INTERVAL = 10.0


def _node(name: str) -> core_pb2.Node:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    node = core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}),
                         status=core_pb2.NodeStatus(capacity=capacity, allocatable=capacity))
    node.status.conditions.add(type="Ready", status="True", reason="KubeletReady")
    return node


class HollowNode:
    def __init__(self, client: Client, name: str, created: dict[str, float], seen: dict[str, float],
                 lease_latencies: list[float]) -> None:
        self.client, self.name = client, name
        self.created, self.seen, self.lease_latencies = created, seen, lease_latencies
        self.tasks: list[asyncio.Task[None]] = []
        self.relisted = 0  # pods found by a list that their watch never showed

    async def register(self) -> None:
        await self.client.nodes.create(_node(self.name))
        lease = coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(name=self.name, namespace="kube-node-lease"),
                                       spec=coordination_pb2.LeaseSpec(holderIdentity=self.name,
                                                                       leaseDurationSeconds=40))
        lease.spec.renewTime.GetCurrentTime()
        await self.client.leases.create(lease)

    def start(self, offset: float) -> None:
        self.tasks = [asyncio.create_task(self._renew(offset)), asyncio.create_task(self._pods())]

    async def _renew(self, offset: float) -> None:
        await asyncio.sleep(offset)  # renewals spread over the interval, as independent kubelets'
        while True:
            start = time.perf_counter()
            try:
                lease = await self.client.leases.get(self.name, "kube-node-lease")
                lease.spec.renewTime.GetCurrentTime()
                await self.client.leases.update(lease)
                self.lease_latencies.append(time.perf_counter() - start)
            except errors.ApiError:
                pass
            await asyncio.sleep(LEASE_INTERVAL)

    async def _pods(self) -> None:
        # A watch the apiserver ends (a slow consumer's, on a busy machine) is opened again,
        # as a kubelet's informer would: its first events list what is bound now. And
        # every lease interval the node's pods are listed too: a pod whose event never came
        # still starts (see docs/benchmarks.md: on 1,000 nodes a few never did).
        relist = asyncio.create_task(self._relist())
        try:
            while True:
                try:
                    async for ev in self.client.pods.watch(field_selector=f"spec.nodeName={self.name}"):
                        await self._run(ev)
                except errors.ApiError:
                    pass
                await asyncio.sleep(1.0)
        finally:
            relist.cancel()

    async def _relist(self) -> None:
        while True:
            await asyncio.sleep(LEASE_INTERVAL)
            try:
                pods = await self.client.pods.list(field_selector=f"spec.nodeName={self.name}")
            except errors.ApiError:
                continue
            for pod in pods.items:
                if pod.metadata.name not in self.seen:
                    self.relisted += 1
                    await self._run(WatchEvent("ADDED", pod))

    async def _run(self, ev: WatchEvent[core_pb2.Pod]) -> None:
        pod = ev.object
        key = pod.metadata.name
        # ADDED, or (as an informer takes it) MODIFIED for a pod not seen yet
        if ev.type not in ("ADDED", "MODIFIED") or key in self.seen or pod.status.phase == "Running":
            return
        self.seen[key] = time.perf_counter()
        for _ in range(5):  # as a kubelet's status manager: a conflict is retried on the pod as it is now
            pod.status.phase = "Running"
            pod.status.podIP = "10.0.0.1"
            del pod.status.conditions[:]
            pod.status.conditions.add(type="Ready", status="True")
            try:
                await self.client.pods.update_status(pod)
                return
            except errors.NotFound:
                return
            except errors.ApiError:  # a conflict, or a busy apiserver's timeout: again, on the pod as it is
                await asyncio.sleep(0.2)
                try:
                    pod = await self.client.pods.get(key, pod.metadata.namespace)
                except errors.ApiError:
                    return

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _run(count: int, pods_per_node: int, workdir: Path) -> dict[str, object]:
    etcd = EtcdServer(data_dir=workdir / f"etcd-{count}").start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        apiserver, address = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                           "--cluster-cidr", "", "--log-level", "WARNING"], workdir,
                                          f"apiserver-{count}")
        procs.append(apiserver)
        log = open(workdir / f"scheduler-{count}.log", "ab")
        scheduler = subprocess.Popen([sys.executable, "-m", "scheduler", "--apiserver", address, "--leader-elect",
                                      "false", "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        procs.append(scheduler)
        clients = [Client(address, timeout=60) for _ in range(CHANNELS)]
        created: dict[str, float] = {}
        seen: dict[str, float] = {}
        leases: list[float] = []
        nodes = [HollowNode(clients[i % CHANNELS], f"hollow-{i}", created, seen, leases) for i in range(count)]
        sem = asyncio.Semaphore(CONCURRENCY)

        async def register(n: HollowNode) -> None:
            async with sem:
                await n.register()
        await asyncio.gather(*(register(n) for n in nodes))
        for i, n in enumerate(nodes):
            n.start(LEASE_INTERVAL * i / count)
        await asyncio.sleep(LEASE_INTERVAL + 2)  # every watch open, every lease renewed once
        leases.clear()
        total = count * pods_per_node
        names = iter(range(total))
        rev0 = (await clients[0].pods.list(limit=1)).metadata.resourceVersion
        cpu0 = (_cpu_seconds(apiserver.pid), _cpu_seconds(etcd.pid or 0))
        start = time.perf_counter()

        async def creator(c: Client) -> None:
            for i in names:
                name = f"p-{i}"
                created[name] = time.perf_counter()
                await c.pods.create(core_pb2.Pod(
                    metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                    spec=core_pb2.PodSpec(containers=[core_pb2.Container(
                        name="main", image="busybox", resources=core_pb2.ResourceRequirements(
                            requests={"cpu": "10m", "memory": "16Mi"}))])))
        await asyncio.gather(*(creator(clients[i % CHANNELS]) for i in range(CONCURRENCY)))
        deadline = time.monotonic() + 600
        while len(seen) < total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} nodes: only {len(seen)} of {total} pods reached their node")
            await asyncio.sleep(0.1)
        window = time.perf_counter() - start
        rev1 = (await clients[0].pods.list(limit=1)).metadata.resourceVersion
        cpu1 = (_cpu_seconds(apiserver.pid), _cpu_seconds(etcd.pid or 0))
        delays = [(seen[k] - created[k]) * 1000 for k in seen]
        await asyncio.sleep(LEASE_INTERVAL)  # every node's lease renewed at least once more
        lease_ms = [x * 1000 for x in leases]
        for n in nodes:
            await n.stop()
        for c in clients:
            await c.close()
        return {"nodes": count, "pods": total, "watches": count,
                "scheduler_pods_per_s": round(total / window, 1),
                "create_to_node_p50_ms": round(_pct(delays, 50), 1),
                "create_to_node_p99_ms": round(_pct(delays, 99), 1),
                "lease_updates": len(lease_ms),
                "lease_update_p99_ms": round(_pct(lease_ms, 99), 1) if lease_ms else None,
                "apiserver_cpu_ms_per_s": round((cpu1[0] - cpu0[0]) / window * 1000, 1),
                "etcd_cpu_ms_per_s": round((cpu1[1] - cpu0[1]) / window * 1000, 1),
                "etcd_writes_per_s": round((int(rev1) - int(rev0)) / window, 1)}
    finally:
        stop_servers(procs, etcd)


async def run(args: argparse.Namespace) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix="kubeling-hollow-"))
    try:
        curve = [await _run(int(n), args.pods_per_node, workdir) for n in args.nodes.split(",")]
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"benchmark": "hollow", "cpus": os.cpu_count(), "pods_per_node": args.pods_per_node, "curve": curve}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="100,300,1000", help="node counts, comma-separated")
    p.add_argument("--pods-per-node", type=int, default=3)
    p.add_argument("--json", default="")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    args = p.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

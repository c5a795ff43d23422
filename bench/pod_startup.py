"""Pod startup latency (not a test): `python -m bench.pod_startup --pods 100 --rate 10
[--density 110] --json OUT.json`.

`--hooks N` adds N plain pods against N with a postStart exec hook and a readiness probe.

Runs etcd, the apiserver, the scheduler and one kubelet as separate processes, as a
user would, then creates busybox pods (imagePullPolicy IfNotPresent: no pulls) at
the given rate and measures, per pod, from its create call to the moment a watch
shows all its containers running — upstream's pod startup SLI (SLO: p99 <= 5 s).
In the same run, the floor: the same pod start done directly (netns, CNI ADD, the
pause and the app container with runc; `bench.cri`'s floor). `--density N` then
creates N pods at once on the node and reports the time until all run. Everything
it creates is removed. BENCH_LOG_LEVEL=INFO and BENCH_KEEP_LOG=FILE keep the
components' logs for a closer look.

CPU (bench.cpuaccount), over the window from the first create to the last pod running:
`cpu_ms_per_pod` (the machine's busy time per started pod) and its breakdown by part
(each long-lived process's own time, the kubelet's waited-for children: runc, the CNI
plugins and their iptables; the shims; this benchmark's own client; the kernel and the
rest), `exits_per_pod` (programs started and ended per pod, by kind), against the
floor's machine CPU per pod.

`--state-tmpfs` keeps the node's files (the kubelet's and the runtime's state, runc's,
the floor's) on a private tmpfs instead of the disk under TMPDIR; etcd's data stays on
disk. Where the root filesystem is ext4 without a journal (these VMs), every file
created scans the inodes deleted in the last minutes, so each step of `--sustained`
(and the floor before them) slows the next: the floor, measured first, never pays
for what the cluster's steps deleted. `state_on_tmpfs` and `host_speed`'s
`memory_cgroups_dying` say under which conditions a run was made.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import BenchCluster, running_cluster
from bench.cpuaccount import ExecAccounting, machine_busy_seconds, pids_matching, process_seconds
from bench.cri import floor_pod_starts, ms_quantile
from bench.output import report
from kubelet.agent import bridge_name
from kubelet.runtime import Runtime
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.176.0.0/16"
NODE = f"bench{os.getpid() % 10000}"
FLOOR_PODS = 20
SUSTAINED_STEP, SUSTAINED_PODS, SUSTAINED_P99_S, SUSTAINED_MAX = 5.0, 100, 1.0, 100.0
# The floor's own limit: its work, 8 at a time, for as many pods as one sustained step
# holds (every runc call reads the host's mount table, which grows with the pods alike).
FLOOR_MAX_PODS, FLOOR_MAX_CONCURRENCY = SUSTAINED_PODS, 8


def _pod(name: str, hooked: bool = False) -> core_pb2.Pod:
    """`hooked`: with a postStart exec hook and an exec readiness probe (1 s period)."""
    made = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
                            name="main", image="busybox", imagePullPolicy="IfNotPresent",
                            command=["sleep", "3600"])]))
    if hooked:
        main = made.spec.containers[0]
        main.lifecycle.postStart.exec.command.extend(["sh", "-c", "echo started > /tmp/started"])
        main.readinessProbe.exec.command.extend(["cat", "/tmp/started"])
        main.readinessProbe.periodSeconds = 1
    return made


def _all_running(pod: Any) -> bool:
    statuses = pod.status.containerStatuses
    return len(statuses) == len(pod.spec.containers) and all(s.state.HasField("running") for s in statuses)


class _Watcher:
    """Watches pods; records when each first had all its containers running."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.running: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.ready: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        _, rv = await self.client.pods.list_all("default")
        self._task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        async for ev in self.client.pods.watch("default", resource_version=rv):
            pod = ev.object
            if pod.spec.nodeName:
                self.bound.setdefault(pod.metadata.name, time.perf_counter())
            if ev.type in ("ADDED", "MODIFIED") and _all_running(pod):
                self.running.setdefault(pod.metadata.name, time.perf_counter())
                if all(s.ready for s in pod.status.containerStatuses):
                    self.ready.setdefault(pod.metadata.name, time.perf_counter())

    async def wait_ready(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not all(n in self.ready for n in names):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"pods not ready after {timeout}s")
            await asyncio.sleep(0.05)

    async def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not all(n in self.running for n in names):
            if time.perf_counter() > deadline:
                missing = [n for n in names if n not in self.running]
                raise TimeoutError(f"{len(missing)} pods not running after {timeout}s: {missing[:5]}")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, errors.ApiError):
                pass


async def _delete_all(client: Client, runtime: Runtime, timeout: float = 300) -> None:
    """Delete every pod and wait until the kubelet confirmed each (grace > 0) and its
    runtime holds nothing more."""
    pods, _ = await client.pods.list_all("default")
    await asyncio.gather(*(client.pods.delete(p.metadata.name, "default") for p in pods))
    deadline = time.monotonic() + timeout
    while (await client.pods.list_all("default"))[0]:
        if time.monotonic() > deadline:
            raise TimeoutError("pods were not removed")
        await asyncio.sleep(0.2)
    while await runtime.list_sandboxes():
        if time.monotonic() > deadline:
            raise TimeoutError("the kubelet's runtime still has sandboxes")
        await asyncio.sleep(0.2)


@dataclass
class _CpuWindow:
    """CPU seconds by part over a window (bench.cpuaccount), divided by the pods started in it."""

    pids: dict[str, int]
    machine: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    shims: dict[int, float] = field(default_factory=dict)
    accounting: ExecAccounting | None = None

    def _read(self) -> tuple[float, dict[str, float], dict[int, float]]:
        parts = {name: process_seconds(pid) for name, pid in self.pids.items()}
        parts["kubelet_children"] = process_seconds(self.pids["kubelet"], children=True)
        parts["bench_client"] = process_seconds(os.getpid())
        shims = {pid: process_seconds(pid) for pid in pids_matching("cri.shim")}
        return machine_busy_seconds(), parts, shims

    def start(self) -> None:
        self.machine, self.parts, self.shims = self._read()
        try:
            self.accounting = ExecAccounting().__enter__()
        except OSError as exc:
            print(f"no process accounting: {exc}", file=sys.stderr)

    def abandon(self) -> None:
        """The window failed: end the process accounting (it outlives its process) and
        remove its file."""
        if self.accounting is not None:
            self.accounting.__exit__(None, None, None)
            self.accounting = None

    def stop(self, pods: int) -> dict[str, Any]:
        machine, parts, shims = self._read()
        if self.accounting is not None:
            self.accounting.__exit__(None, None, None)
        per_pod = {name: (seconds - self.parts.get(name, 0.0)) * 1000 / pods for name, seconds in parts.items()}
        per_pod["shims"] = sum(s - self.shims.get(pid, 0.0) for pid, s in shims.items()) * 1000 / pods
        total = (machine - self.machine) * 1000 / pods
        per_pod["kernel_and_rest"] = total - sum(per_pod.values())
        out: dict[str, Any] = {"cpu_ms_per_pod": round(total, 1),
                               "cpu_ms_per_pod_by_part": {k: round(v, 1) for k, v in per_pod.items()}}
        ours = ("apiserver", "scheduler", "kubelet", "shims")
        out["our_python_cpu_ms_per_pod"] = round(sum(per_pod[k] for k in ours), 1)
        if self.accounting is not None:
            out["exits_per_pod"] = {k: round(v / pods, 2) for k, v in self.accounting.grouped_exits().items()}
        return out


async def _revision(client: Client) -> int:
    """The store's revision now (a list's resourceVersion)."""
    _, rv = await client.pods.list_all("kube-system")
    return int(rv)


async def _create_at_rate(client: Client, watcher: _Watcher, names: list[str], rate: float,
                          hooked: bool = False) -> dict[str, float]:
    """Create the pods at `rate` per second; wait until all run; when each was created."""
    created: dict[str, float] = {}
    start = time.perf_counter()
    tasks = []
    for i, name in enumerate(names):
        await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        created[name] = time.perf_counter()
        tasks.append(asyncio.create_task(client.pods.create(_pod(name, hooked))))
    await asyncio.gather(*tasks)
    await watcher.wait(names, 600)
    return created


async def _max_sustained(client: Client, runtime: Runtime, watcher: _Watcher) -> dict[str, Any]:
    """Stepped rates (5, 10, 15, … pods/s, SUSTAINED_PODS pods each, the node emptied
    between steps) up to the first whose startup p99 exceeds SUSTAINED_P99_S; then, between
    the last rate that held and that one, 1 pod/s at a time: the highest that held."""
    steps: dict[str, float] = {}

    async def holds(rate: float) -> bool:
        await _delete_all(client, runtime)
        names = [f"s{rate:g}-{i}" for i in range(SUSTAINED_PODS)]
        created = await _create_at_rate(client, watcher, names, rate)
        p99 = ms_quantile([watcher.running[n] - created[n] for n in names], 0.99)
        steps[f"{rate:g}"] = p99
        print(f"sustained: {rate:g} pods/s -> p99 {p99} ms", file=sys.stderr, flush=True)
        return p99 <= SUSTAINED_P99_S * 1000

    coarse = 0.0
    rate = SUSTAINED_STEP
    while rate <= SUSTAINED_MAX and await holds(rate):
        coarse = rate
        rate += SUSTAINED_STEP
    best = coarse
    for fine in range(int(coarse) + 1, int(min(rate, SUSTAINED_MAX + SUSTAINED_STEP))):
        if not await holds(float(fine)):
            break
        best = float(fine)
    return {"max_sustained_pods_per_s": best, "max_sustained_coarse_pods_per_s": coarse,
            "sustained_p99_ms_by_rate": steps}


async def _cluster_run(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    # room for the measured pods next to the warm-up pod, which runs until the first delete
    max_pods = max(110, args.density + 1, args.pods + 1)
    async with running_cluster(work, NODE, CLUSTER_CIDR, max_pods) as cluster:
        client = cluster.client
        runtime = Runtime(f"unix://{cluster.cri_socket}")
        watcher = _Watcher(client)
        await watcher.start()
        try:
            return await _measure(client, runtime, watcher, cluster, args)
        finally:
            # Whatever failed, the node is emptied before the cluster stops: a stopped
            # kubelet leaves its pods running.
            await watcher.stop()
            await _delete_all(client, runtime)
            await runtime.close()


async def _measure(client: Client, runtime: Runtime, watcher: _Watcher, cluster: BenchCluster,
                   args: argparse.Namespace) -> dict[str, Any]:
    # One pod first, not measured: the first container start warms caches (layers unpacked).
    await client.pods.create(_pod("warmup"))
    await watcher.wait(["warmup"], 120)

    names = [f"p{i}" for i in range(args.pods)]
    cpu = _CpuWindow(cluster.pids)
    revision = await _revision(client)
    cpu.start()
    try:
        created = await _create_at_rate(client, watcher, names, args.rate)
    except BaseException:
        cpu.abandon()
        raise
    cpu_result = cpu.stop(args.pods)
    # every write (pods, their status, bindings, events, leases) is one etcd revision
    cpu_result["api_writes_per_pod"] = round((await _revision(client) - revision) / args.pods, 2)
    startup = [watcher.running[n] - created[n] for n in names]
    bound = [watcher.bound[n] - created[n] for n in names]
    result: dict[str, Any] = {
        "startup_p50_ms": ms_quantile(startup, 0.5), "startup_p99_ms": ms_quantile(startup, 0.99),
        "startup_max_ms": ms_quantile(startup, 1.0),
        # where it goes: create -> bound (apiserver + scheduler), bound -> running (kubelet)
        "bound_p50_ms": ms_quantile(bound, 0.5),
        "kubelet_p50_ms": ms_quantile([watcher.running[n] - watcher.bound[n] for n in names], 0.5),
        "startup_ms_in_creation_order": [round(x * 1000) for x in startup], **cpu_result}
    if args.density:
        await _delete_all(client, runtime)
        dense = [f"d{i}" for i in range(args.density)]
        start = time.perf_counter()
        await asyncio.gather(*(client.pods.create(_pod(n)) for n in dense))
        await watcher.wait(dense, 600)
        result["density_pods"] = args.density
        result["density_all_running_s"] = round(max(watcher.running[n] for n in dense) - start, 2)
    if args.hooks:
        result.update(await _hooks_against_plain(client, runtime, watcher, args.hooks, args.rate))
    if args.sustained:
        result.update(await _max_sustained(client, runtime, watcher))
    return result


async def _hooks_against_plain(client: Client, runtime: Runtime, watcher: _Watcher, pods: int,
                               rate: float) -> dict[str, Any]:
    """`pods` plain pods, then as many with a postStart exec hook and a readiness probe, at
    the same rate on an emptied node: create -> Running for both, -> Ready for the hooked."""
    out: dict[str, Any] = {}
    for kind, hooked in (("plain", False), ("hooked", True)):
        await _delete_all(client, runtime)
        names = [f"{kind}-{i}" for i in range(pods)]
        created = await _create_at_rate(client, watcher, names, rate, hooked)
        out[f"{kind}_running_p50_ms"] = ms_quantile([watcher.running[n] - created[n] for n in names], 0.5)
        out[f"{kind}_running_p99_ms"] = ms_quantile([watcher.running[n] - created[n] for n in names], 0.99)
        if hooked:
            await watcher.wait_ready(names, 120)
            out["hooked_ready_p50_ms"] = ms_quantile([watcher.ready[n] - created[n] for n in names], 0.5)
    out["hooked_over_plain_running_p50"] = round(out["hooked_running_p50_ms"] / out["plain_running_p50_ms"], 2)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    # SIGTERM, and SIGINT where a shell started the run in the background (which ignores
    # it there), cancel the run: the cleanup below still removes the pods and the node.
    # Only the first: a second would interrupt that cleanup.
    this, loop = asyncio.current_task(), asyncio.get_running_loop()
    assert this is not None

    def cancel_once() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: None)
        this.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, cancel_once)
    work = Path(tempfile.mkdtemp(prefix="kbstart-"))
    floor_bridge, max_bridge = f"kbp{os.getpid() % 100000}", f"kbq{os.getpid() % 100000}"
    floors: dict[str, Any] = {}
    mounted = False
    try:
        if args.state_tmpfs:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8g,mode=0700", "kubeling-bench", str(work)],
                           check=True)
            mounted = True
        if not args.no_floor:
            sequential: dict[str, float] = {}
            floor = await floor_pod_starts(work, FLOOR_PODS, floor_bridge, phase=sequential)
            concurrent: dict[str, float] = {}
            await floor_pod_starts(work, FLOOR_MAX_PODS, max_bridge, FLOOR_MAX_CONCURRENCY, "floor-max",
                                   "10.194.0.0/16", concurrent)
            floors = {"floor_p50_ms": ms_quantile(floor, 0.5),
                      # the same work done directly, one pod at a time (its Python driver included)
                      "floor_cpu_ms_per_pod": round(sequential["machine_cpu"] * 1000 / FLOOR_PODS, 1),
                      "floor_driver_cpu_ms_per_pod": round(sequential["driver_cpu"] * 1000 / FLOOR_PODS, 1),
                      # no node starts pods faster than this here
                      "floor_max_pods_per_s": round(FLOOR_MAX_PODS / concurrent["wall"], 1)}
        measured = await _cluster_run(work, args)
    finally:
        for bridge in (floor_bridge, max_bridge, bridge_name(NODE)):
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        if mounted:
            subprocess.run(["umount", str(work)], check=True)
        shutil.rmtree(work, ignore_errors=True)
    result = {"benchmark": "pod_startup", "pods": args.pods, "rate": args.rate, "state_on_tmpfs": args.state_tmpfs,
              **measured, **floors,
              "target_p99_ms": 1000, "target_p50_over_floor": 3.0}
    if floors:
        result["p50_over_floor"] = round(measured["startup_p50_ms"] / floors["floor_p50_ms"], 2)
        result["our_python_over_floor_cpu"] = round(measured["our_python_cpu_ms_per_pod"]
                                                    / floors["floor_cpu_ms_per_pod"], 2)
        if "max_sustained_pods_per_s" in measured:
            result["sustained_over_floor_max"] = round(measured["max_sustained_pods_per_s"]
                                                       / floors["floor_max_pods_per_s"], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="pods created per second")
    parser.add_argument("--density", type=int, default=0, help="then this many pods at once on the node")
    parser.add_argument("--hooks", type=int, default=0,
                        help="then this many plain pods against as many with a postStart hook and a readiness probe")
    parser.add_argument("--sustained", action="store_true",
                        help="then max_sustained_pods_per_s: rates stepped by 5 pods/s, 100 pods each, "
                             "until startup p99 exceeds 1 s")
    parser.add_argument("--no-floor", action="store_true",
                        help="leave the floor out (quicker, for comparing two commits' cluster figures)")
    parser.add_argument("--state-tmpfs", action="store_true",
                        help="keep the node's state (the kubelet's and the runtime's files, the floor's) on a "
                             "private tmpfs, as /run is on most hosts; etcd stays on disk")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

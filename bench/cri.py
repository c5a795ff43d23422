"""CRI benchmark (not a test): `python -m bench.cri --pods 20 --json OUT.json`.

Starts the CRI server as its own process (`python -m cri`) with a bridge
network on a private subnet, then per pod, sequentially, through the socket:
RunPodSandbox + CreateContainer + StartContainer (`cri_pod_start_*`, and each RPC
apart). The floor is the same work done directly, with nothing in between: a netns,
CNI ADD (loopback + the bridge), then, as the CRI server does, the pause container
(overlay mount of the pause image, runc create + start) and the app container
(overlay mount of busybox, runc create + start, joining the pause's namespaces)
(`floor_*`).
`ratio` = cri_pod_start_p50_ms / floor_p50_ms. `cpu_ms_per_pod`: the machine's busy CPU
over the starts, this process's own (the client) left out.

`--endpoint unix:///…` measures another CRI runtime through the same sequence.
`--vs-containerd [--runs 2]`: ours and a private Debian containerd (bench/containerd.py)
both up, runs alternating, `p50_ratio` and `cpu_ratio` = ours / containerd.
Everything it creates is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.containerd import private_containerd
from bench.cpuaccount import machine_busy_seconds, process_seconds
from bench.output import report
from cni import netns
from cri.images.builtin import BUSYBOX_IMAGE, PAUSE_IMAGE, build_builtins
from cri.images.store import ImageStore
from cri.network import NetworkPluginManager, PodNetwork
from cri.oci_spec import SandboxContext, container_spec, pause_spec
from cri.rootfs import mount_overlay, unmount
from cri.runc import Runc
from protos.runtime.v1 import api_pb2, api_pb2_grpc


def ms_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def _conflist(work: Path, bridge: str, subnet: str) -> str:
    return json.dumps({"cniVersion": "1.0.0", "name": "bench", "plugins": [{
        "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "dataDir": str(work / "ipam"), "ranges": [[{"subnet": subnet}]]}}]})


@dataclass
class Sequence:
    """One run of the start sequence against a CRI endpoint: each pod's times (`total` and
    per RPC), and the machine's busy CPU seconds over the starts without this process's
    own (the gRPC client), i.e. what the runtime and the kernel spent."""

    times: dict[str, list[float]]
    cpu_seconds: float


async def start_sequence(endpoint: str, pods: int, work: Path, prefix: str) -> Sequence:
    """RunPodSandbox + CreateContainer + StartContainer for `pods` busybox pods, one after
    another, as crictl runp/create/start do; then every sandbox removed."""
    times: dict[str, list[float]] = {"total": [], "run_pod_sandbox": [], "create_container": [],
                                     "start_container": []}
    channel = grpc.aio.insecure_channel(endpoint)
    try:
        async with asyncio.timeout(60):
            await channel.channel_ready()
        runtime = api_pb2_grpc.RuntimeServiceStub(channel)
        sandboxes: list[str] = []
        busy, own = machine_busy_seconds(), process_seconds(os.getpid())
        try:
            for i in range(pods):
                logs = work / "logs" / f"{prefix}{i}"
                logs.mkdir(parents=True)
                config = api_pb2.PodSandboxConfig(
                    metadata=api_pb2.PodSandboxMetadata(name=f"{prefix}{i}", namespace="bench", uid=f"{prefix}-{i}"),
                    hostname=f"{prefix}{i}", log_directory=str(logs))
                container = api_pb2.ContainerConfig(
                    metadata=api_pb2.ContainerMetadata(name="app"), image=api_pb2.ImageSpec(image=BUSYBOX_IMAGE),
                    command=["sleep", "3600"], log_path="app/0.log")
                t0 = time.perf_counter()
                sandbox_id = (await runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id
                sandboxes.append(sandbox_id)
                t1 = time.perf_counter()
                cid = (await runtime.CreateContainer(api_pb2.CreateContainerRequest(
                    pod_sandbox_id=sandbox_id, config=container, sandbox_config=config))).container_id
                t2 = time.perf_counter()
                await runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
                t3 = time.perf_counter()
                for key, value in (("total", t3 - t0), ("run_pod_sandbox", t1 - t0), ("create_container", t2 - t1),
                                   ("start_container", t3 - t2)):
                    times[key].append(value)
            cpu = (machine_busy_seconds() - busy) - (process_seconds(os.getpid()) - own)
        finally:
            for sandbox_id in sandboxes:
                await runtime.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
                await runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
    finally:
        await channel.close()
    return Sequence(times, cpu)


@contextlib.asynccontextmanager
async def our_runtime(work: Path, bridge: str, subnet: str = "10.196.0.0/16") -> AsyncIterator[str]:
    """`python -m cri` as its own process, pods on a bridge; yields its endpoint."""
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "net.d"
    conf.mkdir()
    (conf / "10-bench.conflist").write_text(_conflist(work, bridge, subnet))
    socket = work / "cri.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "cri", "--socket", str(socket), "--state-dir", str(work / "state"),
         "--cni-conf-dir", str(conf), "--runc-root", str(work / "runc"), "--cni-cache-dir", str(work / "cache"),
         "--log-level", "WARNING"], stdin=subprocess.DEVNULL)
    try:
        yield f"unix://{socket}"
    finally:
        server.terminate()
        server.wait(30)


async def floor_pod_starts(work: Path, pods: int, bridge: str, concurrency: int = 1,
                           prefix: str = "floor", subnet: str = "10.195.0.0/16",
                           phase: dict[str, float] | None = None) -> list[float]:
    """The floor: `pods` pod starts done directly (netns, CNI ADD, pause and app with runc),
    `concurrency` at a time; each one's duration. Into `phase`, for the starts alone (image
    setup and cleanup left out): `wall` seconds, the machine's busy CPU seconds
    (`machine_cpu`) and this process's own (`driver_cpu`). Everything is removed at the end."""
    work = work / prefix
    conf = work / "floor-net.d"
    conf.mkdir(parents=True)
    (conf / "10-bench.conflist").write_text(_conflist(work, bridge, subnet))
    network = NetworkPluginManager(conf, ["/usr/lib/cni"], cache_dir=work / "floor-cache")
    store = ImageStore(work / "floor-images")
    build_builtins(store)
    pause, busybox = store.get(PAUSE_IMAGE), store.get("busybox")
    assert pause is not None and busybox is not None
    pause_layers, busybox_layers = store.unpack(pause), store.unpack(busybox)
    runc = Runc(work / "floor-runc")
    app = api_pb2.ContainerConfig(metadata=api_pb2.ContainerMetadata(name="app"), command=["sleep", "3600"])
    times: list[float] = []
    made: list[tuple[str, PodNetwork]] = []
    mounted: list[Path] = []
    devnull = os.open(os.devnull, os.O_WRONLY)
    slots = asyncio.Semaphore(concurrency)

    async def start_one(i: int) -> None:
        async with slots:
            name, sid, cid = f"kubeling-bench-{prefix}-{os.getpid()}-{i}", f"floor-{i}", f"floor-{i}-app"
            config = api_pb2.PodSandboxConfig(metadata=api_pb2.PodSandboxMetadata(name=f"f{i}", namespace="bench",
                                                                                 uid=f"f{i}"), hostname=f"f{i}")
            sandbox_dir, app_dir = work / "floor" / sid, work / "floor" / cid
            etc = sandbox_dir / "etc"
            etc.mkdir(parents=True)
            app_dir.mkdir(parents=True)
            t = time.perf_counter()
            path = await netns.create(name)
            pod = PodNetwork("bench", f"f{i}", f"f{i}", sid, path)
            made.append((name, pod))
            await network.set_up_pod(pod)
            rootfs = await mount_overlay(pause_layers, sandbox_dir)
            mounted.append(sandbox_dir)
            (sandbox_dir / "config.json").write_text(json.dumps(pause_spec(sid, config, pause.run_config,
                                                                            rootfs, path)))
            await runc.create(sid, sandbox_dir, stdout=devnull, stderr=devnull, pid_file=sandbox_dir / "pid")
            await runc.start(sid)
            # The sandbox's cgroup parent, as the CRI server passes it (SandboxContext's own
            # default made a /kubeling parent in every hierarchy that runc delete leaves).
            context = SandboxContext(hostname=f"f{i}", pause_pid=int((sandbox_dir / "pid").read_text()),
                                     netns_path=path, etc_dir=etc, cgroup_parent=config.linux.cgroup_parent)
            rootfs = await mount_overlay(busybox_layers, app_dir)
            mounted.append(app_dir)
            (app_dir / "config.json").write_text(json.dumps(container_spec(cid, app, busybox.run_config,
                                                                            rootfs, context)))
            await runc.create(cid, app_dir, stdout=devnull, stderr=devnull)
            await runc.start(cid)
            times.append(time.perf_counter() - t)

    try:
        began, busy, own = time.perf_counter(), machine_busy_seconds(), process_seconds(os.getpid())
        if concurrency == 1:
            for i in range(pods):
                await start_one(i)
        else:
            await asyncio.gather(*(start_one(i) for i in range(pods)))
        if phase is not None:
            phase.update(wall=time.perf_counter() - began, machine_cpu=machine_busy_seconds() - busy,
                         driver_cpu=process_seconds(os.getpid()) - own)
    finally:
        os.close(devnull)
        async def delete(container_id: str) -> None:
            async with deleting:
                await runc.delete(container_id, force=True)

        deleting = asyncio.Semaphore(8)  # a forced delete mostly waits for the kill: overlap them
        await asyncio.gather(*(delete(state.id) for state in await runc.list_containers()))
        for name, pod in made:
            await network.tear_down_pod(pod)
            await netns.delete(name)
        for directory in mounted:
            await unmount(directory)
    return times


def _figures(runs: list[Sequence]) -> dict[str, object]:
    """p50/p99 over every pod of the runs, each RPC's p50, CPU per pod (each run's, and all)."""
    total = [t for r in runs for t in r.times["total"]]
    return {"pod_start_p50_ms": ms_quantile(total, 0.5), "pod_start_p99_ms": ms_quantile(total, 0.99),
            "pod_start_mean_ms": round(statistics.mean(total) * 1000, 1),
            **{f"{rpc}_p50_ms": ms_quantile([t for r in runs for t in r.times[rpc]], 0.5)
               for rpc in ("run_pod_sandbox", "create_container", "start_container")},
            "cpu_ms_per_pod": _cpu_ms_per_pod(runs),
            "runs_p50_ms": [ms_quantile(r.times["total"], 0.5) for r in runs],
            "runs_cpu_ms_per_pod": [_cpu_ms_per_pod([r]) for r in runs]}


def _cpu_ms_per_pod(runs: list[Sequence]) -> float:
    return round(sum(r.cpu_seconds for r in runs) * 1000 / sum(len(r.times["total"]) for r in runs), 1)


def _p50(runs: list[Sequence]) -> float:
    return ms_quantile([t for r in runs for t in r.times["total"]], 0.5)


async def _vs_containerd(work: Path, args: argparse.Namespace, bridges: tuple[str, str]) -> dict[str, object]:
    """Both runtimes up together, runs alternating (ours first, then containerd, …) so
    that the host's drift falls on both."""
    ours: list[Sequence] = []
    theirs: list[Sequence] = []
    async with our_runtime(work / "ours", bridges[0]) as our_endpoint, \
            private_containerd(work / "containerd", _conflist(work / "containerd", bridges[1], "10.197.0.0/16")) \
            as containerd_endpoint:
        for run_index in range(args.runs):
            ours.append(await start_sequence(our_endpoint, args.pods, work, f"k{run_index}-"))
            theirs.append(await start_sequence(containerd_endpoint, args.pods, work, f"c{run_index}-"))
    return {"benchmark": "cri_vs_containerd", "pods": args.pods, "runs": args.runs,
            "containerd_version": _containerd_version(), "kubeling": _figures(ours), "containerd": _figures(theirs),
            "p50_ratio": round(_p50(ours) / _p50(theirs), 2),
            "cpu_ratio": round(_cpu_ms_per_pod(ours) / _cpu_ms_per_pod(theirs), 2),
            "target_ratio_max": 1.0}


def _containerd_version() -> str:
    result = subprocess.run(["containerd", "--version"], capture_output=True, text=True)
    return result.stdout.strip()


async def run(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="kbcri-"))
    bridges = (f"kbc{os.getpid() % 100000}", f"kbf{os.getpid() % 100000}")
    try:
        if args.vs_containerd:
            return await _vs_containerd(work, args, bridges)
        floor = await floor_pod_starts(work, args.pods, bridges[1])
        if args.endpoint:
            runs = [await start_sequence(args.endpoint, args.pods, work, f"e{i}-") for i in range(args.runs)]
        else:
            async with our_runtime(work / "ours", bridges[0]) as endpoint:
                runs = [await start_sequence(endpoint, args.pods, work, f"k{i}-") for i in range(args.runs)]
    finally:
        for bridge in bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    figures = _figures(runs)
    floor_p50 = ms_quantile(floor, 0.5)
    return {
        "benchmark": "cri", "endpoint": args.endpoint or "cri (started here)", "pods": args.pods,
        "runs": args.runs, **{f"cri_{k}" if k.startswith("pod_start") else k: v for k, v in figures.items()},
        "floor_p50_ms": floor_p50, "floor_p99_ms": ms_quantile(floor, 0.99),
        "ratio": round(_p50(runs) / floor_p50, 2), "target_ratio": 1.5,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1,
                        help="sequences of --pods pods (alternating with --vs-containerd)")
    parser.add_argument("--endpoint", default="", help="measure this CRI runtime (unix:///…) instead of ours")
    parser.add_argument("--vs-containerd", action="store_true",
                        help="ours and a private Debian containerd (installed if missing), side by side")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    if args.endpoint and args.vs_containerd:
        parser.error("--endpoint and --vs-containerd exclude each other")
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

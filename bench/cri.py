"""CRI benchmark (not a test): `python -m bench.cri --pods 20 --json OUT.json`.

Starts the CRI server as its own process (`python -m kubelet.cri`) with a bridge
network on a private subnet, then per pod, sequentially, through the socket:
RunPodSandbox + CreateContainer + StartContainer (`cri_pod_start_*`, and each RPC
apart). The floor is the same work done directly, with nothing in between: a netns,
CNI ADD (loopback + the bridge), then, as the CRI server does, the pause container
(overlay mount of the pause image, runc create + start) and the app container
(overlay mount of busybox, runc create + start, joining the pause's namespaces)
(`floor_*`).
`ratio` = cri_pod_start_p50_ms / floor_p50_ms. Everything it creates is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.cpuaccount import machine_busy_seconds, process_seconds
from bench.output import report
from cni import netns
from cni.manager import NetworkPluginManager, PodNetwork
from kubelet.cri.images.builtin import PAUSE_IMAGE, build_builtins
from kubelet.cri.images.store import ImageStore
from kubelet.cri.oci_spec import SandboxContext, container_spec, pause_spec
from kubelet.cri.rootfs import mount_overlay, unmount
from kubelet.cri.runc import Runc
from protos.runtime.v1 import api_pb2, api_pb2_grpc


def ms_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def _conflist(work: Path, bridge: str, subnet: str) -> str:
    return json.dumps({"cniVersion": "1.0.0", "name": "bench", "plugins": [{
        "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "dataDir": str(work / "ipam"), "ranges": [[{"subnet": subnet}]]}}]})


async def _cri(work: Path, pods: int, bridge: str) -> dict[str, list[float]]:
    conf = work / "net.d"
    conf.mkdir()
    (conf / "10-bench.conflist").write_text(_conflist(work, bridge, "10.196.0.0/16"))
    socket = work / "cri.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "kubelet.cri", "--socket", str(socket), "--state-dir", str(work / "state"),
         "--cni-conf-dir", str(conf), "--runc-root", str(work / "runc"), "--cni-cache-dir", str(work / "cache"),
         "--log-level", "WARNING"], stdin=subprocess.DEVNULL)
    times: dict[str, list[float]] = {"total": [], "run_pod_sandbox": [], "create_container": [],
                                     "start_container": []}
    try:
        channel = grpc.aio.insecure_channel(f"unix://{socket}")
        await asyncio.wait_for(channel.channel_ready(), 60)
        runtime = api_pb2_grpc.RuntimeServiceStub(channel)
        sandboxes: list[str] = []
        for i in range(pods):
            config = api_pb2.PodSandboxConfig(
                metadata=api_pb2.PodSandboxMetadata(name=f"p{i}", namespace="bench", uid=f"uid-{i}"),
                hostname=f"p{i}", log_directory=str(work / "logs" / f"p{i}"))
            container = api_pb2.ContainerConfig(
                metadata=api_pb2.ContainerMetadata(name="app"), image=api_pb2.ImageSpec(image="busybox"),
                command=["sleep", "3600"], log_path="app/0.log")
            t0 = time.perf_counter()
            sandbox_id = (await runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id
            t1 = time.perf_counter()
            cid = (await runtime.CreateContainer(api_pb2.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=container, sandbox_config=config))).container_id
            t2 = time.perf_counter()
            await runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
            t3 = time.perf_counter()
            for key, value in (("total", t3 - t0), ("run_pod_sandbox", t1 - t0), ("create_container", t2 - t1),
                               ("start_container", t3 - t2)):
                times[key].append(value)
            sandboxes.append(sandbox_id)
        for sandbox_id in sandboxes:
            await runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        await channel.close()
    finally:
        server.terminate()
        server.wait(30)
    return times


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
            context = SandboxContext(hostname=f"f{i}", pause_pid=int((sandbox_dir / "pid").read_text()),
                                     netns_path=path, etc_dir=etc)
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
        for state in await runc.list_containers():
            await runc.delete(state.id, force=True)
        for name, pod in made:
            await network.tear_down_pod(pod)
            await netns.delete(name)
        for directory in mounted:
            await unmount(directory)
    return times


async def run(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="kbcri-"))
    bridges = (f"kbc{os.getpid() % 100000}", f"kbf{os.getpid() % 100000}")
    try:
        floor = await floor_pod_starts(work, args.pods, bridges[1])
        rpcs = await _cri(work, args.pods, bridges[0])
    finally:
        for bridge in bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    cri = rpcs["total"]
    cri_p50, floor_p50 = ms_quantile(cri, 0.5), ms_quantile(floor, 0.5)
    return {
        "benchmark": "cri", "pods": args.pods,
        "cri_pod_start_p50_ms": cri_p50, "cri_pod_start_p99_ms": ms_quantile(cri, 0.99),
        "cri_pod_start_mean_ms": round(statistics.mean(cri) * 1000, 1),
        **{f"{rpc}_p50_ms": ms_quantile(values, 0.5) for rpc, values in rpcs.items() if rpc != "total"},
        "floor_p50_ms": floor_p50, "floor_p99_ms": ms_quantile(floor, 0.99),
        "ratio": round(cri_p50 / floor_p50, 2), "target_ratio": 1.5,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CRI benchmark (not a test): `python -m bench.cri --pods 20 --json OUT.json`.

Starts the CRI server as its own process (`python -m kubelet.cri`) with a bridge
network on a private subnet, then per pod, sequentially, through the socket:
RunPodSandbox + CreateContainer + StartContainer (`cri_pod_start_*`). The floor is
the same work done directly: a netns, CNI ADD (loopback + the bridge) and runc
create + start of one container from a ready bundle (`floor_*`).
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

from bench.output import report
from cni import netns
from cni.manager import NetworkPluginManager, PodNetwork
from kubelet.cri.images.builtin import PAUSE_IMAGE, build_builtins
from kubelet.cri.images.store import ImageStore
from kubelet.cri.oci_spec import pause_spec
from kubelet.cri.rootfs import mount_overlay, unmount
from kubelet.cri.runc import Runc
from protos.runtime.v1 import api_pb2, api_pb2_grpc


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def _conflist(work: Path, bridge: str, subnet: str) -> str:
    return json.dumps({"cniVersion": "1.0.0", "name": "bench", "plugins": [{
        "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "dataDir": str(work / "ipam"), "ranges": [[{"subnet": subnet}]]}}]})


async def _cri(work: Path, pods: int, bridge: str) -> list[float]:
    conf = work / "net.d"
    conf.mkdir()
    (conf / "10-bench.conflist").write_text(_conflist(work, bridge, "10.196.0.0/16"))
    socket = work / "cri.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "kubelet.cri", "--socket", str(socket), "--state-dir", str(work / "state"),
         "--cni-conf-dir", str(conf), "--runc-root", str(work / "runc"), "--cni-cache-dir", str(work / "cache"),
         "--log-level", "WARNING"], stdin=subprocess.DEVNULL)
    times: list[float] = []
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
            t = time.perf_counter()
            sandbox_id = (await runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id
            cid = (await runtime.CreateContainer(api_pb2.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=container, sandbox_config=config))).container_id
            await runtime.StartContainer(api_pb2.StartContainerRequest(container_id=cid))
            times.append(time.perf_counter() - t)
            sandboxes.append(sandbox_id)
        for sandbox_id in sandboxes:
            await runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        await channel.close()
    finally:
        server.terminate()
        server.wait(30)
    return times


async def _floor(work: Path, pods: int, bridge: str) -> list[float]:
    conf = work / "floor-net.d"
    conf.mkdir()
    (conf / "10-bench.conflist").write_text(_conflist(work, bridge, "10.195.0.0/16"))
    network = NetworkPluginManager(conf, ["/usr/lib/cni"], cache_dir=work / "floor-cache")
    store = ImageStore(work / "floor-images")
    build_builtins(store)
    pause = store.get(PAUSE_IMAGE)
    assert pause is not None
    bundle = work / "floor-bundle"
    rootfs = await mount_overlay(store.unpack(pause), bundle)
    runc = Runc(work / "floor-runc")
    times: list[float] = []
    made: list[tuple[str, PodNetwork]] = []
    try:
        for i in range(pods):
            name, cid = f"kubeling-bench-floor-{os.getpid()}-{i}", f"floor-{i}"
            config = api_pb2.PodSandboxConfig(metadata=api_pb2.PodSandboxMetadata(name=f"f{i}", namespace="bench",
                                                                                 uid=f"f{i}"), hostname=f"f{i}")
            t = time.perf_counter()
            path = await netns.create(name)
            pod = PodNetwork("bench", f"f{i}", f"f{i}", cid, path)
            made.append((name, pod))
            await network.set_up_pod(pod)
            container_dir = work / "floor" / cid
            container_dir.mkdir(parents=True)
            (container_dir / "config.json").write_text(json.dumps(pause_spec(cid, config, pause.run_config,
                                                                              rootfs, path)))
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                await runc.create(cid, container_dir, stdout=devnull, stderr=devnull)
            finally:
                os.close(devnull)
            await runc.start(cid)
            times.append(time.perf_counter() - t)
    finally:
        for state in await runc.list_containers():
            await runc.delete(state.id, force=True)
        for name, pod in made:
            await network.tear_down_pod(pod)
            await netns.delete(name)
        await unmount(bundle)
    return times


async def run(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="kbcri-"))
    bridges = (f"kbc{os.getpid() % 100000}", f"kbf{os.getpid() % 100000}")
    try:
        floor = await _floor(work, args.pods, bridges[1])
        cri = await _cri(work, args.pods, bridges[0])
    finally:
        for bridge in bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    cri_p50, floor_p50 = _ms(cri, 0.5), _ms(floor, 0.5)
    return {
        "benchmark": "cri", "pods": args.pods,
        "cri_pod_start_p50_ms": cri_p50, "cri_pod_start_p99_ms": _ms(cri, 0.99),
        "cri_pod_start_mean_ms": round(statistics.mean(cri) * 1000, 1),
        "floor_p50_ms": floor_p50, "floor_p99_ms": _ms(floor, 0.99),
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

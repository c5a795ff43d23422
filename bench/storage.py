"""Storage (not a test): `python -m bench.storage [--rounds 20] [--cycles 100] --json OUT.json`.

Runs etcd, the apiserver, the scheduler, the controller manager, one kubelet and its
hostpath CSI driver as separate processes (bench.cluster), with the default StorageClass
`standard` as `kubeling up` installs it (WaitForFirstConsumer, Delete), and measures:

- pod start with a provisioned claim against the same pod with an emptyDir, in the same
  run, one pod at a time, alternating (`--rounds` of each): from the pod's create call (the
  claim is created just before it) to a watch showing its container running. The
  claim's path is the scheduler's VolumeBinding (selected-node), the provisioner's
  CreateVolume, the binder, then the kubelet's NodeStage and NodePublish. `ratio_p50`
  compares the medians (goal <= 1.5);
- claim to Bound: from the claim's create to its phase Bound (with its pod created at
  once, as a StatefulSet does);
- what `--cycles` pods mounting one claim, one after the other, leave behind: mount points
  under the kubelet's directories and published volume directories once every pod is
  gone (goal 0), and the staging mount's count while no pod runs (0 too).

The host-speed figure (bench.hostspeed) goes with the result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cluster import running_cluster
from bench.output import report
from csi.addon import install_default_class
from csi.hostpath import DRIVER_NAME
from kubelet.agent import bridge_name
from kubeling import errors, mounts
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.177.0.0/16"
NODE = f"bstor{os.getpid() % 10000}"
GOAL_RATIO = 1.5


def _pod(name: str, volume: core_pb2.Volume) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PodSpec(
        terminationGracePeriodSeconds=0, volumes=[volume], containers=[core_pb2.Container(
            name="main", image="busybox", imagePullPolicy="IfNotPresent", command=["sleep", "3600"],
            volumeMounts=[core_pb2.VolumeMount(name=volume.name, mountPath="/data")])]))


def _claim(name: str) -> core_pb2.PersistentVolumeClaim:
    return core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            accessModes=["ReadWriteOnce"], resources=core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"})))


def _claim_volume(claim: str) -> core_pb2.Volume:
    return core_pb2.Volume(name="data", persistentVolumeClaim=core_pb2.PersistentVolumeClaimVolumeSource(
        claimName=claim))


async def _until(check: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("a storage benchmark step did not finish in time")
        await asyncio.sleep(0.02)


async def _running(client: Client, name: str) -> bool:
    pod = await client.pods.get(name, "default")
    statuses = pod.status.containerStatuses
    return bool(statuses) and statuses[0].state.HasField("running")


async def _gone(get: Any) -> bool:
    try:
        await get()
    except errors.NotFound:
        return True
    return False


async def _start(client: Client, pod: core_pb2.Pod, claim: core_pb2.PersistentVolumeClaim | None) -> dict[str, float]:
    """Seconds from the create calls to the container running (and the claim Bound)."""
    begin = time.monotonic()
    if claim is not None:
        await client.persistentvolumeclaims.create(claim)
    await client.pods.create(pod)
    bound_at = 0.0

    async def done() -> bool:
        nonlocal bound_at
        if claim is not None and not bound_at:
            c = await client.persistentvolumeclaims.get(claim.metadata.name, "default")
            if c.status.phase == "Bound":
                bound_at = time.monotonic()
        return await _running(client, pod.metadata.name) and (claim is None or bound_at > 0)
    await _until(done)
    out = {"start_s": time.monotonic() - begin}
    if claim is not None:
        out["bound_s"] = bound_at - begin
    return out


async def _delete(client: Client, pod: str, claim: str = "") -> None:
    await client.pods.delete(pod, "default", grace_period_seconds=0)
    await _until(lambda: _gone(lambda: client.pods.get(pod, "default")))
    if claim:
        await client.persistentvolumeclaims.delete(claim, "default")
        await _until(lambda: _gone(lambda: client.persistentvolumeclaims.get(claim, "default")))


def _volume_mounts(kubelet_state: Path) -> list[Path]:
    return mounts.mount_points(kubelet_state / "pods") + mounts.mount_points(kubelet_state / "plugins")


async def run(rounds: int, cycles: int, work: Path) -> dict[str, Any]:
    async with running_cluster(work, NODE, CLUSTER_CIDR, controllers=True, csi=True) as cluster:
        client = cluster.client
        state = work / "kubelet" / NODE
        await install_default_class(client, DRIVER_NAME)
        warm = _pod("warm-up", core_pb2.Volume(name="data", emptyDir=core_pb2.EmptyDirVolumeSource()))
        await _start(client, warm, None)  # the image's layers, the first sandbox: not measured
        await _delete(client, "warm-up")
        empty, claimed, bound = [], [], []
        for i in range(rounds):
            e = await _start(client, _pod(f"empty-{i}", core_pb2.Volume(
                name="data", emptyDir=core_pb2.EmptyDirVolumeSource())), None)
            empty.append(e["start_s"])
            await _delete(client, f"empty-{i}")
            c = await _start(client, _pod(f"claimed-{i}", _claim_volume(f"claim-{i}")), _claim(f"claim-{i}"))
            claimed.append(c["start_s"])
            bound.append(c["bound_s"])
            await _delete(client, f"claimed-{i}", f"claim-{i}")
        await _until(lambda: _no_volumes(client))
        # One claim mounted by pod after pod: every publish and stage taken down again.
        await client.persistentvolumeclaims.create(_claim("cycled"))
        staged_between = 0
        began = time.monotonic()
        for i in range(cycles):
            await _start(client, _pod(f"cycle-{i}", _claim_volume("cycled")), None)
            await _delete(client, f"cycle-{i}")
            await _until(lambda: _settled(state))
            staged_between = max(staged_between, len(_volume_mounts(state)))
        cycle_s = (time.monotonic() - began) / max(1, cycles)
        await client.persistentvolumeclaims.delete("cycled", "default")
        await _until(lambda: _no_volumes(client))
        left_mounts = [str(p) for p in _volume_mounts(state)]
        left_dirs = [str(p) for p in (state / "pods").glob("*/volumes/kubernetes.io~csi/*")]
        left_volumes = sorted(os.listdir(work / "csi" / "volumes"))
    p50_empty, p50_claimed = statistics.median(empty), statistics.median(claimed)
    return {
        "benchmark": "storage", "rounds": rounds, "cycles": cycles,
        "emptydir_pod_start_ms": {"p50": round(p50_empty * 1000, 1), "max": round(max(empty) * 1000, 1)},
        "claim_pod_start_ms": {"p50": round(p50_claimed * 1000, 1), "max": round(max(claimed) * 1000, 1)},
        "ratio_p50": round(p50_claimed / p50_empty, 2), "goal_ratio": GOAL_RATIO,
        "meets_goal": p50_claimed / p50_empty <= GOAL_RATIO,
        "claim_to_bound_ms": {"p50": round(statistics.median(bound) * 1000, 1), "max": round(max(bound) * 1000, 1)},
        "cycle_ms": round(cycle_s * 1000, 1),
        "mounts_between_cycles_max": staged_between,
        "mounts_left": left_mounts, "published_dirs_left": left_dirs, "volume_dirs_left": left_volumes,
        "leaks": len(left_mounts) + len(left_dirs) + len(left_volumes),
    }


async def _no_volumes(client: Client) -> bool:
    return not (await client.persistentvolumes.list_all())[0]


async def _settled(state: Path) -> bool:
    """The last pod's volume unpublished and unstaged (its kubelet finishes after the API delete)."""
    return not _volume_mounts(state)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20, help="pods of each kind measured (default 20)")
    p.add_argument("--cycles", type=int, default=100, help="pods mounting one claim, one after the other "
                                                           "(default 100)")
    p.add_argument("--json", default="", help="also write the result here")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kubeling-bench-storage-"))
    try:
        result = asyncio.run(run(args.rounds, args.cycles, work))
    finally:
        for point in reversed(mounts.mount_points(work)):
            mounts.unmount(point, lazy=True)
        subprocess.run(["ip", "link", "del", bridge_name(NODE)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    report(result, args.json)
    return 0 if result["meets_goal"] and result["leaks"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

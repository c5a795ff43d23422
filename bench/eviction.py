"""Node-pressure eviction reaction time (not a test): `python -m bench.eviction --runs 3
--json OUT.json`.

Runs etcd, the apiserver, the scheduler and one kubelet as processes, the kubelet's
`memory.available` hard threshold set 600 MiB below what the machine has free at the
start, then, once per run, a BestEffort pod that takes 1000 MiB (`dd bs=1000M` into a pipe
nobody reads). This benchmark watches /proc/meminfo every 20 ms: `crossed` is when the
machine went below the threshold — the earliest any eviction manager could know — and
`evicted` when a watch shows the pod Failed with reason Evicted. The reaction (evicted −
crossed) is compared with its anchor, the kubelet's eviction monitoring period (10 s, as
upstream's): a reaction within one period means the manager acted at its first look.
Between runs the pod is deleted and the node's MemoryPressure left to clear.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cluster import running_cluster
from bench.cri import ms_quantile
from bench.output import report
from kubelet.agent import bridge_name
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.177.0.0/16"
NODE = f"evict{os.getpid() % 10000}"
HOG_MIB, MARGIN_MIB = 1000, 600
MONITORING_PERIOD_S = 10.0  # the kubelet's eviction manager looks this often (upstream's)
TRANSITION_S = 5


def _available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise RuntimeError("no MemAvailable")


def _hog(name: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PodSpec(
        terminationGracePeriodSeconds=1, restartPolicy="Never", containers=[core_pb2.Container(
            name="hog", image="busybox", command=["sh", "-c", f"dd if=/dev/zero bs={HOG_MIB}M count=1 | sleep 3600"])]))


async def _one(client: Client, name: str, threshold_kib: int) -> dict[str, float]:
    crossed: float | None = None
    start = time.perf_counter()
    await client.pods.create(_hog(name))
    while True:
        if crossed is None and _available_kib() < threshold_kib:
            crossed = time.perf_counter()
        found = await client.pods.get(name, "default")
        if found.status.phase == "Failed":
            assert found.status.reason == "Evicted", found.status
            evicted = time.perf_counter()
            break
        if time.perf_counter() - start > 120:
            raise TimeoutError(f"{name} not evicted within 120 s")
        await asyncio.sleep(0.02)
    if crossed is None:
        raise RuntimeError("evicted before this benchmark saw the threshold crossed")
    await client.pods.delete(name, "default")
    while True:
        try:
            await client.pods.get(name, "default")
        except errors.NotFound:
            break
        await asyncio.sleep(0.1)
    while True:  # the next hog would be turned away while the node reports MemoryPressure
        node = await client.nodes.get(NODE)
        if all(c.status != "True" for c in node.status.conditions if c.type == "MemoryPressure"):
            break
        await asyncio.sleep(0.2)
    return {"create_to_evicted_s": evicted - start, "reaction_s": evicted - crossed}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    threshold = _available_kib() - MARGIN_MIB * 1024
    work = Path(tempfile.mkdtemp(prefix="kbevict-"))
    runs = []
    try:
        async with running_cluster(work, NODE, CLUSTER_CIDR, kubelet_args=(
                "--eviction-hard", f"memory.available<{threshold}Ki",
                "--eviction-pressure-transition-period", str(TRANSITION_S))) as cluster:
            for i in range(args.runs):
                runs.append(await _one(cluster.client, f"hog-{i}", threshold))
                print(f"run {i}: {runs[-1]}", flush=True)
    finally:
        subprocess.run(["ip", "link", "del", bridge_name(NODE)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    reaction = [r["reaction_s"] for r in runs]
    p50_ms = ms_quantile(reaction, 0.5)
    return {"benchmark": "eviction", "runs": args.runs, "hog_mib": HOG_MIB, "threshold_kib": threshold,
            "reaction_p50_ms": p50_ms, "reaction_max_ms": ms_quantile(reaction, 1.0),
            "create_to_evicted_p50_ms": ms_quantile([r["create_to_evicted_s"] for r in runs], 0.5),
            "anchor_monitoring_period_ms": int(MONITORING_PERIOD_S * 1000),
            "reaction_over_monitoring_period": round(p50_ms / (MONITORING_PERIOD_S * 1000), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

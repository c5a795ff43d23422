"""Backup and restore of a cluster holding N objects (not a test): `python -m bench.restore
[--objects 1000] [--json OUT.json]`.

Brings up a control plane (`kubeling up --nodes 0 --detach`, in a scratch state dir and
KUBELING_HOME of its own), creates N ConfigMaps of 1 KiB, then times, as an operator runs
them: `kubeling backup`, `kubeling restore` into a new state dir, and `kubeling up` on it
until all N are listed. The anchor, measured in the same run on the same snapshot, is
etcd's own `etcdctl snapshot restore` — the floor of any restore of etcd's data — beside
what starting any `kubeling` command costs (`restore --help`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.output import report
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.178.0.0/16"


def _kubeling(env: dict[str, str], *args: str) -> float:
    """Run a kubeling command; its wall time (it must succeed)."""
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"kubeling {' '.join(args)}: {done.stdout}{done.stderr}")
    return time.monotonic() - began


async def _fill(kubeconfig: Path, count: int) -> None:
    async with Client.from_kubeconfig(kubeconfig) as client:
        async def one(i: int) -> None:
            await client.configmaps.create(core_pb2.ConfigMap(
                metadata=meta_pb2.ObjectMeta(name=f"cm-{i:05d}", namespace="default"), data={"v": "x" * 1024}))
        for start in range(0, count, 50):
            await asyncio.gather(*(one(i) for i in range(start, min(start + 50, count))))


async def _listed(kubeconfig: Path, count: int, began: float) -> float:
    async with Client.from_kubeconfig(kubeconfig) as client:
        while True:
            try:
                items, _ = await client.configmaps.list_all("default")
                if sum(1 for cm in items if cm.metadata.name.startswith("cm-")) >= count:
                    return time.monotonic() - began
            except Exception:  # noqa: BLE001 (not serving yet)
                pass
            await asyncio.sleep(0.1)


def run(objects: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="kubeling-bench-restore-"))
    env = {**os.environ, "KUBELING_HOME": str(scratch / "home")}
    first, second = scratch / "first", scratch / "second"
    archive = scratch / "cluster.kbk"
    up = ["up", "--nodes", "0", "--detach", "--name", "bench-restore", "--cluster-cidr", CLUSTER_CIDR,
          "--no-registry", "--no-ingress", "--kubeconfig", str(scratch / "user-kubeconfig")]
    running: list[Path] = []
    try:
        _kubeling(env, *up, "--state-dir", str(first))
        running.append(first)
        asyncio.run(_fill(first / "kubeconfig", objects))
        backup_s = _kubeling(env, "backup", "--state-dir", str(first), str(archive))
        _kubeling(env, "down", "--state-dir", str(first))
        running.remove(first)
        restore_s = _kubeling(env, "restore", str(archive), "--state-dir", str(second))
        began = time.monotonic()
        _kubeling(env, *up, "--state-dir", str(second))
        running.append(second)
        up_s = asyncio.run(_listed(second / "kubeconfig", objects, began))
        # the anchor: etcd's own restore of the same snapshot
        with tarfile.open(archive) as tar:
            tar.extract("etcd.db", scratch / "anchor")
        began = time.monotonic()
        subprocess.run(["etcdctl", "snapshot", "restore", str(scratch / "anchor" / "etcd.db"), "--data-dir",
                        str(scratch / "anchor" / "data")], check=True, capture_output=True,
                       env={**os.environ, "ETCDCTL_API": "3"})
        anchor_s = time.monotonic() - began
        startup_s = _kubeling(env, "restore", "--help")  # what any kubeling command costs before its work
        return {"benchmark": "restore", "objects": objects, "backup_seconds": round(backup_s, 2),
                "backup_bytes": archive.stat().st_size, "restore_seconds": round(restore_s, 2),
                "etcdctl_snapshot_restore_seconds": round(anchor_s, 2),
                "restore_over_etcdctl": round(restore_s / anchor_s, 2) if anchor_s else None,
                "kubeling_command_startup_seconds": round(startup_s, 2),
                "up_until_all_listed_seconds": round(up_s, 2)}
    finally:
        for state in running:
            subprocess.run([sys.executable, "-m", "cluster", "down", "--state-dir", str(state)], env=env,
                           capture_output=True, timeout=300)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    report(run(args.objects), args.json)


if __name__ == "__main__":
    main()

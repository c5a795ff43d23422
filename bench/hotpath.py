"""The apiserver's cost per request for the calls that dominate a big cluster (not a test):
`python -m bench.hotpath [--seconds 8] [--json OUT.json]`.

At thousands of nodes almost every request is a kubelet's: a Lease renewal every 10 s (an
update of the Lease it last wrote) and a read of its Node every 10 s (from the watch cache,
resourceVersion "0"). For each, against an apiserver process on a fresh etcd, 64 clients
over 8 gRPC channels for `--seconds`: requests/s and the apiserver process's CPU per
request (`<call>_us`, µs, both its threads: the event loop and gRPC's poller). A GET from etcd shows
what the cache saves. The anchor, measured in the same run: bench/grpc_floor.py, a bare
grpc.aio server whose Create does only the etcd transaction — its CPU per create is what
gRPC and the etcd client cost before any apiserver logic (`*_over_floor`).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.apiserver import _cpu_seconds, _pod, start_server, stop_servers
from bench.output import report
from cluster.etcd import EtcdServer
from kubeling.client import Client
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2

CHANNELS, TASKS, OBJECTS = 8, 64, 256


async def _phase(name: str, pid: int, seconds: float, call: Callable[[int], Awaitable[None]]) -> dict[str, float]:
    stop = time.monotonic() + seconds
    count = 0

    async def worker(i: int) -> None:
        nonlocal count
        while time.monotonic() < stop:
            await call(i)
            count += 1

    cpu0, start = _cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(TASKS)))
    elapsed, cpu = time.perf_counter() - start, _cpu_seconds(pid) - cpu0
    return {f"{name}_per_s": round(count / elapsed, 1), f"{name}_us": round(cpu / count * 1e6, 1)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-hotpath-"))
    etcd = EtcdServer(data_dir=work / "etcd").start()
    procs = []
    try:
        floor, floor_address = start_server(["-m", "bench.grpc_floor", etcd.endpoint], work, "floor")
        procs.append(floor)
        apiserver, _ = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                     "--cluster-cidr", "", "--log-level", "WARNING"], work, "apiserver")
        procs.append(apiserver)
        address = f"127.0.0.1:{(work / 'apiserver.port').read_text().split()[0]}"
        clients = [Client(address, timeout=60) for _ in range(CHANNELS)]
        leases: list[coordination_pb2.Lease] = []
        for i in range(OBJECTS):
            c = clients[i % CHANNELS]
            await c.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=f"node-{i}")))
            leases.append(await c.leases.create(coordination_pb2.Lease(
                metadata=meta_pb2.ObjectMeta(name=f"node-{i}", namespace="kube-node-lease"),
                spec=coordination_pb2.LeaseSpec(holderIdentity=f"node-{i}", leaseDurationSeconds=40))))

        async def renew(i: int) -> None:
            lease = leases[i % OBJECTS]
            lease.spec.renewTime.GetCurrentTime()
            leases[i % OBJECTS] = await clients[i % CHANNELS].leases.update(lease)

        async def get_cached(i: int) -> None:
            await clients[i % CHANNELS].nodes.get(f"node-{i % OBJECTS}", resource_version="0")

        async def get_latest(i: int) -> None:
            await clients[i % CHANNELS].nodes.get(f"node-{i % OBJECTS}")

        phases = {"lease_update": renew, "node_get_cached": get_cached, "node_get_etcd": get_latest}
        result: dict[str, Any] = {}
        for name, call in phases.items():
            result |= await _phase(name, apiserver.pid, args.seconds, call)
        for c in clients:
            await c.close()

        floor_clients = [Client(floor_address) for _ in range(CHANNELS)]
        created = iter(range(10**9))

        async def floor_create(i: int) -> None:
            await floor_clients[i % CHANNELS].pods.create(_pod(f"floor-{next(created)}"))

        result |= await _phase("floor_create", floor.pid, args.seconds, floor_create)
        for c in floor_clients:
            await c.close()
        for name in phases:
            result[f"{name}_over_floor"] = round(result[f"{name}_us"] / result["floor_create_us"], 2)
        return {"benchmark": "hotpath", "seconds": args.seconds, "tasks": TASKS, "channels": CHANNELS, **result}
    finally:
        stop_servers(procs, etcd)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=8.0, help="each phase's length")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    if args.seconds <= 0:
        p.error("--seconds must be above 0")
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

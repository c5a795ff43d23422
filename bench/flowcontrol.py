"""API Priority and Fairness under a LIST flood (not a test): `python -m bench.flowcontrol
--json OUT.json` (also `python -m bench.apiserver --apf`).

An apiserver (its own process, token authentication) holds 5,000 pods; 50 hollow nodes,
each with its own `system:nodes` identity, renew their Leases in kube-node-lease over
REST every second (the protected flow: the suggested `system-node-high` schema). Quiet:
the renewals alone; flood: the same while 20 tasks of one user LIST all 5,000 pods in a
loop (the `global-default` level, ten seats per list). Measured for an apiserver with
Priority and Fairness and for one started with `--enable-priority-and-fairness=false`:
the renewals' p50/p99 quiet and under the flood, their ratio, the noisy client's lists
served and refused (429); with APF also a burst of 400 such tasks, more than the noisy
flow's queues hold, which the default configuration refuses in part with 429s. The anchor
is each run's own quiet p99."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.apiserver import _pct, start_server
from bench.output import report
from cluster.etcd import EtcdServer

NODES = 50
NOISY_TASKS = 20
# the same client with more requests at once than its queues hold (upstream's global-default:
# a flow's hand of six queues of 50): refused with 429s under the default configuration
BURST_TASKS = 400
ADMIN = "bench-admin"


def _tokens(path: Path) -> None:
    lines = [f'{ADMIN},admin,uid-admin,"system:masters"', 'noisy-token,noisy,uid-noisy']
    lines += [f'node-{i}-token,system:node:n{i},uid-n{i},"system:nodes"' for i in range(NODES)]
    path.write_text("\n".join(lines) + "\n")


def _pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:05d}", "labels": {"app": "bench"}},
            "spec": {"nodeName": f"n{i % NODES}", "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def _lease(i: int) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": f"n{i}", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": f"n{i}",
                                                                   "leaseDurationSeconds": 40}}


async def _setup(session: aiohttp.ClientSession, base: str, pods: int) -> None:
    headers = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    sem = asyncio.Semaphore(32)

    async def post(path: str, body: dict[str, Any]) -> None:
        async with sem, session.post(base + path, data=json.dumps(body), headers=headers) as resp:
            if resp.status not in (201, 409):
                raise RuntimeError(f"POST {path}: {resp.status} {await resp.text()}")

    await asyncio.gather(*(post("/api/v1/namespaces/default/pods", _pod(i)) for i in range(pods)))
    await asyncio.gather(*(post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", _lease(i))
                           for i in range(NODES)))


async def _renew(session: aiohttp.ClientSession, base: str, i: int, stop: asyncio.Event,
                 latencies: list[float]) -> None:
    """One hollow node: a Lease renewal a second, as a kubelet's (update of the stored object)."""
    headers = {"Authorization": f"Bearer node-{i}-token", "Content-Type": "application/json"}
    path = f"{base}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n{i}"
    await asyncio.sleep(i / NODES)  # spread over the second
    while not stop.is_set():
        body = _lease(i)
        body["spec"]["renewTime"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        started = time.perf_counter()
        async with session.put(path, data=json.dumps(body), headers=headers) as resp:
            await resp.read()
            if resp.status == 200:
                latencies.append((time.perf_counter() - started) * 1000)
        try:
            async with asyncio.timeout(1.0):
                await stop.wait()
        except TimeoutError:
            pass


async def _flood(session: aiohttp.ClientSession, base: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    headers = {"Authorization": "Bearer noisy-token"}
    while not stop.is_set():
        async with session.get(f"{base}/api/v1/pods", headers=headers) as resp:
            await resp.read()
            key = "served" if resp.status == 200 else "refused" if resp.status == 429 else f"other_{resp.status}"
            counts[key] = counts.get(key, 0) + 1
            if resp.status == 429:
                await asyncio.sleep(float(resp.headers.get("Retry-After", "1")))


async def _flood_for(base: str, seconds: float, tasks_count: int) -> dict[str, int]:
    """The noisy client, in a process of its own (`--flood`): reading its big answers
    must not delay the renewals' own timing in this one."""
    stop = asyncio.Event()
    counts: dict[str, int] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        tasks = [asyncio.create_task(_flood(session, base, stop, counts)) for _ in range(tasks_count)]
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*tasks)
    return counts


async def _phase(session: aiohttp.ClientSession, base: str, seconds: float, flood: int) -> dict[str, Any]:
    """Renewals for `seconds`, with `flood` noisy tasks LISTing meanwhile (0: quiet)."""
    stop = asyncio.Event()
    latencies: list[float] = []
    noisy = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.flowcontrol", "--flood", base, "--seconds", str(seconds),
        "--noisy-tasks", str(flood), stdout=asyncio.subprocess.PIPE) if flood else None
    tasks = [asyncio.create_task(_renew(session, base, i, stop, latencies)) for i in range(NODES)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    out: dict[str, Any] = {"renewals": len(latencies), "renew_p50_ms": round(_pct(latencies, 50), 1),
                           "renew_p99_ms": round(_pct(latencies, 99), 1)}
    if noisy is not None:
        printed, _ = await noisy.communicate()
        counts = json.loads(printed)
        out["noisy_lists_served"] = counts.get("served", 0)
        out["noisy_lists_refused_429"] = counts.get("refused", 0)
    return out


async def _one(etcd: str, workdir: Path, apf: bool, pods: int, seconds: float, seats: int) -> dict[str, Any]:
    name = "apf" if apf else "no-apf"
    proc, _ = start_server(["-m", "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0", "--rest-listen",
                            "127.0.0.1:0", "--log-level", "WARNING", "--etcd-prefix", f"/{name}",
                            "--token-auth-file", str(workdir / "tokens.csv"),
                            "--enable-priority-and-fairness", "true" if apf else "false",
                            "--max-requests-inflight", str(seats * 2 // 3),
                            "--max-mutating-requests-inflight", str(seats - seats * 2 // 3)], workdir, name)
    try:
        rest_port = (workdir / f"{name}.port").read_text().split()[1]  # gRPC's, then REST's
        base = f"http://127.0.0.1:{rest_port}"
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
            await _setup(session, base, pods)
            quiet = await _phase(session, base, seconds, flood=0)
            flood = await _phase(session, base, seconds, flood=NOISY_TASKS)
            burst = await _phase(session, base, seconds, flood=BURST_TASKS) if apf else None
    finally:
        proc.terminate()
        proc.wait(10)
    out = {"quiet": quiet, "flood": flood,
           "flood_over_quiet_p99": round(flood["renew_p99_ms"] / max(quiet["renew_p99_ms"], 0.1), 2)}
    if burst is not None:
        out["burst"] = {**burst, "noisy_tasks": BURST_TASKS,
                        "burst_over_quiet_p99": round(burst["renew_p99_ms"] / max(quiet["renew_p99_ms"], 0.1), 2)}
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="kubeling-bench-apf-"))
    etcd = EtcdServer(data_dir=workdir / "etcd").start()
    try:
        _tokens(workdir / "tokens.csv")
        with_apf = await _one(etcd.endpoint, workdir, True, args.pods, args.seconds, args.seats)
        without = await _one(etcd.endpoint, workdir, False, args.pods, args.seconds, args.seats)
    finally:
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"benchmark": "flowcontrol", "cpus": os.cpu_count(), "pods": args.pods, "server_seats": args.seats,
            "nodes": NODES, "noisy_tasks": NOISY_TASKS, "seconds": args.seconds,
            "with_apf": with_apf, "without_apf": without,
            "flood_p99_without_over_with": round(without["flood"]["renew_p99_ms"]
                                                 / max(with_apf["flood"]["renew_p99_ms"], 0.1), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="", help="write the result here too")
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=15.0, help="each phase's length")
    p.add_argument("--seats", type=int, default=90, help="the server's seats: --max-requests-inflight plus "
                                                         "--max-mutating-requests-inflight (default: the apiserver's "
                                                         "90; upstream's are 600)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (etcd data, logs)")
    p.add_argument("--flood", default="", help=argparse.SUPPRESS)  # the noisy client's own process: its base URL
    p.add_argument("--noisy-tasks", type=int, default=NOISY_TASKS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.flood:
        print(json.dumps(asyncio.run(_flood_for(args.flood, args.seconds, args.noisy_tasks))))
        return 0
    result = asyncio.run(run(args))
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

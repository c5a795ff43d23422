"""REST facade benchmark (not a test): `python -m bench.rest --json OUT.json`.

Starts etcd and the apiserver (gRPC and REST listeners) as separate processes and
measures, from this load-generating process:

- rest_create_per_s / grpc_create_per_s: pod creates, 64 in flight, through the REST API
  (JSON over HTTP/1.1, 64 keep-alive connections) and through gRPC (8 channels);
  rest_vs_grpc is their ratio; *_p50_ms the median latency;
- rest_get_p50_ms: single-pod GETs, 64 in flight;
- *_apiserver_cpu_us_per_create: the apiserver process's CPU time per create, each way;
- rest_list_ms / rest_table_ms: one list of every pod (a consistent read from etcd, as
  kubectl lists) as JSON and as a kubectl Table;
- rest_watch_p50_ms / rest_watch_p99_ms: 50 REST watchers of the namespace while pods are
  created at --rate per second over gRPC: from the create call to the line received.
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench.apiserver import CONCURRENCY, _cpu_seconds, _pct, _pod, bench_creates
from bench.output import report
from cluster.etcd import EtcdServer
from kubeling.client import Client

_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _rest_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.35", "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


async def _timed_workers(total: int, call: Any) -> tuple[float, float]:
    counter = iter(range(total))
    latencies: list[float] = []

    async def worker() -> None:
        for i in counter:
            t = time.perf_counter()
            await call(i)
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return total / (time.perf_counter() - start), statistics.median(latencies) * 1000


async def bench_rest(base: str, creates: int, pid: int) -> dict[str, float]:
    pods = f"{base}/api/v1/namespaces/default/pods"
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def create(i: int) -> None:
            async with http.post(pods, json=_rest_pod(f"rest-{i}")) as r:
                if r.status != 201:
                    raise RuntimeError(f"create answered {r.status}: {await r.text()}")
                await r.read()

        async def get(i: int) -> None:
            async with http.get(f"{pods}/rest-{i % creates}") as r:
                if r.status != 200:
                    raise RuntimeError(f"get answered {r.status}")
                await r.read()

        cpu = _cpu_seconds(pid)
        create_rate, create_p50 = await _timed_workers(creates, create)
        create_cpu = (_cpu_seconds(pid) - cpu) / creates
        _, get_p50 = await _timed_workers(creates, get)
        timings = {}
        for name, accept in (("list", "application/json"), ("table", _TABLE)):
            t = time.perf_counter()
            async with http.get(pods, headers={"Accept": accept}) as r:  # a consistent read, as kubectl's
                body = json.loads(await r.read())
            timings[name] = (time.perf_counter() - t) * 1000
            count = len(body.get("items", body.get("rows", [])))
    return {"rest_create_per_s": round(create_rate, 1), "rest_create_p50_ms": round(create_p50, 2),
            "rest_apiserver_cpu_us_per_create": round(create_cpu * 1e6),
            "rest_get_p50_ms": round(get_p50, 2), "listed_pods": count,
            "rest_list_ms": round(timings["list"], 1), "rest_table_ms": round(timings["table"], 1)}


async def bench_rest_watch(base: str, grpc: str, watchers: int, rate: float, seconds: float) -> dict[str, float]:
    sent: dict[str, float] = {}
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http, Client(grpc) as client:
        rv = (await client.pods.list(limit=1)).metadata.resourceVersion

        async def watch() -> None:
            url = f"{base}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"
            async with http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as r:
                async for line in r.content:
                    event = json.loads(line)
                    name = event["object"]["metadata"]["name"]
                    if name in sent:
                        latencies.append(time.perf_counter() - sent[name])

        tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
        await asyncio.sleep(1.0)
        total = int(rate * seconds)
        start = time.perf_counter()
        for i in range(total):
            name = f"watched-{i}"
            sent[name] = time.perf_counter()
            await client.pods.create(_pod(name))
            delay = start + (i + 1) / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        deadline = time.monotonic() + 10
        while len(latencies) < total * watchers and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    ms = [x * 1000 for x in latencies]
    return {"rest_watchers": watchers, "rest_watch_rate_per_s": rate, "rest_watch_delivered": len(ms),
            "rest_watch_expected": total * watchers, "rest_watch_p50_ms": round(_pct(ms, 50), 2),
            "rest_watch_p99_ms": round(_pct(ms, 99), 2)}


def _start_apiserver(etcd: str, workdir: Path, extra_args: Sequence[str] = ()
                     ) -> tuple[subprocess.Popen[bytes], str, str]:
    port_file = workdir / "apiserver.port"
    log = open(workdir / "apiserver.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0",
                             "--rest-listen", "127.0.0.1:0", "--log-level", "WARNING", "--port-file", str(port_file),
                             *extra_args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    ports: list[str] = []
    while len(ports) < 2:  # the port file names the gRPC port, then the REST one
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the apiserver did not start; see {workdir / 'apiserver.log'}")
        time.sleep(0.05)
        ports = port_file.read_text().split() if port_file.exists() else []
    grpc_port, rest_port = ports
    return proc, f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{rest_port}"


@contextlib.contextmanager
def apiserver_on_etcd(name: str, extra_args: Sequence[str] = ()) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """etcd in a temporary directory and the apiserver on it (with `extra_args`), as
    processes: (the apiserver's process, its gRPC address, its REST base URL); both gone
    afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix=f"kubeling-bench-{name}-"))
    etcd = EtcdServer(data_dir=workdir / "etcd").start()
    proc = None
    try:
        proc, grpc, base = _start_apiserver(etcd.endpoint, workdir, extra_args)
        yield proc, grpc, base
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


async def run(args: argparse.Namespace) -> dict[str, object]:
    with apiserver_on_etcd("rest") as (proc, grpc, base):
        cpu = _cpu_seconds(proc.pid)
        grpc_rate, grpc_p50 = await bench_creates(grpc, args.creates)
        grpc_cpu = (_cpu_seconds(proc.pid) - cpu) / args.creates
        rest = await bench_rest(base, args.creates, proc.pid)
        watch = await bench_rest_watch(base, grpc, args.watchers, args.rate, args.seconds)
    return {"benchmark": "rest", "cpus": os.cpu_count(), "concurrency": CONCURRENCY, "creates": args.creates,
            "grpc_create_per_s": round(grpc_rate, 1), "grpc_create_p50_ms": round(grpc_p50, 2),
            "grpc_apiserver_cpu_us_per_create": round(grpc_cpu * 1e6), **rest,
            "rest_vs_grpc": round(float(rest["rest_create_per_s"]) / grpc_rate, 3), **watch}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="", help="write the result here too")
    p.add_argument("--creates", type=int, default=3000)
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--rate", type=float, default=100.0, help="pod creates per second during the watch phase")
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

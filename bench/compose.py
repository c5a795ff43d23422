"""docker-compose against `kubeling up`, on one machine in one run (not a test):
`python -m bench.compose [--pods 100] [--rate 10] [--runs 1] [--json OUT]`.

Each side brings up two nodes — the compose deployment (deploy/, under a Docker engine:
bench.dockerengine, its image built by deploy/build-image.sh) and `kubeling up --nodes 2
--detach` — and is measured the same way: the time from the command to both nodes Ready,
then `--pods` busybox pods created at `--rate` per second and spread over the two nodes
by the scheduler, each from its create call to all its containers running (as
bench.pod_startup measures it); then everything is removed and the side taken down. The
sides alternate `--runs` times. Reported: both sides' figures, compose / `kubeling up`
ratios (startup p50 and p99, time to Ready) and the image's size.
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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.cri import ms_quantile
from bench.dockerengine import DockerEngine, docker_engine
from bench.output import report
from bench.pod_startup import _create_at_rate, _Watcher
from kubeling.client import Client
from kubeling.netutil import free_port

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "kubeling:bench"
UP_CLUSTER_CIDR = "10.177.0.0/16"  # kubeling up's pods, on this machine's own network


async def _nodes_ready(client: Client, count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            nodes, _ = await client.nodes.list_all()
            if sum(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes) == count:
                return
        except Exception:  # the apiserver is not up yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} nodes not Ready after {timeout}s")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def _compose(engine: DockerEngine, work: Path) -> AsyncIterator[tuple[str, float]]:
    """The compose cluster: (its gRPC address, seconds from `up -d` to 2 nodes Ready)."""
    api = free_port()
    env = {**os.environ, "KUBELING_IMAGE": IMAGE, "KUBELING_API_PORT": str(api),
           "KUBELING_REST_PORT": str(free_port()), "KUBELING_TRACES_PORT": str(free_port())}
    base = ["docker-compose", "-p", f"kbbench{os.getpid()}", "-f", str(ROOT / "deploy" / "docker-compose.yml"),
            "-f", str(ROOT / "deploy" / "docker-compose.otlp.yml")]
    start = time.monotonic()
    try:
        subprocess.run([*base, "up", "-d"], env=env, check=True, capture_output=True, timeout=300)
        async with Client(f"127.0.0.1:{api}") as client:
            await _nodes_ready(client, 2)
        yield f"127.0.0.1:{api}", time.monotonic() - start
    finally:
        subprocess.run([*base, "down", "-v"], env=env, capture_output=True, timeout=300)


@asynccontextmanager
async def _kubeling_up(work: Path) -> AsyncIterator[tuple[str, float]]:
    """`kubeling up --nodes 2 --detach`: (its gRPC address, seconds to 2 nodes Ready)."""
    state = work / "state"
    start = time.monotonic()
    try:
        subprocess.run([sys.executable, "-m", "cluster", "up", "--nodes", "2", "--detach", "--state-dir", str(state),
                        "--cluster-cidr", UP_CLUSTER_CIDR], check=True, capture_output=True, timeout=300)
        plan = json.loads((state / "cluster.json").read_text())
        address = f"127.0.0.1:{plan['apiserver_port']}"
        async with Client(address) as client:
            await _nodes_ready(client, 2)
        yield address, time.monotonic() - start
    finally:
        subprocess.run([sys.executable, "-m", "cluster", "down", "--state-dir", str(state)], capture_output=True,
                       timeout=300)
        shutil.rmtree(state, ignore_errors=True)


async def _startup(address: str, pods: int, rate: float) -> dict[str, float]:
    async with Client(address) as client:
        watcher = _Watcher(client)
        await watcher.start()
        try:
            names = [f"p{i}" for i in range(pods)]
            created = await _create_at_rate(client, watcher, names, rate)
            startup = [watcher.running[n] - created[n] for n in names]
        finally:
            await watcher.stop()
            await _delete_all(client)
    return {"startup_p50_ms": ms_quantile(startup, 0.5), "startup_p99_ms": ms_quantile(startup, 0.99)}


async def _delete_all(client: Client, timeout: float = 300) -> None:
    pods, _ = await client.pods.list_all("default")
    await asyncio.gather(*(client.pods.delete(p.metadata.name, "default", grace_period_seconds=1) for p in pods))
    deadline = time.monotonic() + timeout
    while (await client.pods.list_all("default"))[0]:
        if time.monotonic() > deadline:
            raise TimeoutError("pods were not removed")
        await asyncio.sleep(0.2)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kbcompose-"))
    engine = docker_engine(work)
    try:
        # DOCKER_CONFIG: the build's client state (BuildKit's .buildNodeID) in the work dir, not ~/.docker
        subprocess.run([str(ROOT / "deploy" / "build-image.sh")], check=True, timeout=1800,
                       env={**os.environ, "IMAGE": IMAGE, "DOCKER": engine.docker,
                            "DOCKER_CONFIG": str(work / "docker-config")})
        size = int(engine.run("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout)
        sides: dict[str, list[dict[str, float]]] = {"compose": [], "kubeling_up": []}
        for _ in range(args.runs):
            for side in sides:
                cluster = _compose(engine, work) if side == "compose" else _kubeling_up(work)
                async with cluster as (address, ready_s):
                    figures = await _startup(address, args.pods, args.rate)
                sides[side].append({"nodes_ready_s": round(ready_s, 2), **figures})
                print(f"{side}: {sides[side][-1]}", file=sys.stderr, flush=True)
    finally:
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)

    def median(side: str, key: str) -> float:
        return round(statistics.median(r[key] for r in sides[side]), 2)

    keys = ("nodes_ready_s", "startup_p50_ms", "startup_p99_ms")
    result: dict[str, Any] = {"benchmark": "compose", "pods": args.pods, "rate": args.rate, "runs": args.runs,
                              "image_mb": round(size / 1e6), **{side: runs for side, runs in sides.items()}}
    for key in keys:
        result[f"{key}_compose_over_up"] = round(median("compose", key) / median("kubeling_up", key), 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="pods created per second")
    parser.add_argument("--runs", type=int, default=1, help="each side this many times, alternating")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    if args.pods <= 0 or args.rate <= 0 or args.runs <= 0:
        parser.error("--pods, --rate and --runs must be positive")
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

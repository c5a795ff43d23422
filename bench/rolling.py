"""The write availability gap of a rolling restart of two apiservers behind HAProxy — what
an in-place upgrade does to them (not a test): `python -m bench.rolling [--json OUT.json]`.

Brings up a control plane with two apiservers (`kubeling up --apiservers 2 --nodes 0`, its
own state dir and KUBELING_HOME) and a client writing ConfigMaps one after another through
HAProxy, as a client with retries does: a write that fails with 503/504 or a broken
connection is tried again (up to 5 times, 0.2 s apart; AlreadyExists on a retry means the
earlier try was applied). Then each apiserver in turn gets SIGTERM — the supervisor starts
it again, as it would start new code — and the next waits until it serves again. Reported:
the writes' failed tries, the writes failed even after their retries (goal: none), and the
longest gap between two successful writes, against its anchor: the longest gap of the same
writer in the steady seconds before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.output import report
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2

CLUSTER_CIDR = "10.180.0.0/16"
RETRIES, RETRY_WAIT = 5, 0.2


@dataclass
class Writer:
    client: Client
    successes: list[float] = field(default_factory=list)  # when each write succeeded
    failed_tries: int = 0
    failed_writes: list[str] = field(default_factory=list)
    seq: int = 0

    async def write(self) -> None:
        self.seq += 1
        cm = core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=f"w-{self.seq:06d}", namespace="default"),
                                data={"v": str(self.seq)})
        for attempt in range(RETRIES):
            try:
                await self.client.configmaps.create(cm)
                break
            except errors.AlreadyExists:
                if attempt == 0:
                    raise
                break  # an earlier try went through
            except (errors.ServiceUnavailable, errors.Timeout) as err:
                self.failed_tries += 1
                if attempt == RETRIES - 1:
                    self.failed_writes.append(f"w-{self.seq:06d}: {err.message}")
                    return
                await asyncio.sleep(RETRY_WAIT)
        self.successes.append(time.monotonic())

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.write()


def _gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    if len(inside) < 2:
        return end - start
    return max(b - a for a, b in zip(inside, inside[1:], strict=False))


def _kubeling(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, env=env,
                          timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"kubeling {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")


async def _restart(state: Path, name: str, writer: Writer) -> None:
    """SIGTERM to one apiserver; back when the supervisor has started it again and the
    writer has gone on for two more seconds."""
    plan = json.loads((state / "cluster.json").read_text())
    old = plan["components"][name]
    os.kill(old, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = json.loads((state / "cluster.json").read_text())["components"].get(name)
        if now and now != old:
            break
        await asyncio.sleep(0.2)
    else:
        raise RuntimeError(f"{name} was not started again")
    await asyncio.sleep(2.0)
    wanted = len(writer.successes) + 10
    while len(writer.successes) < wanted and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def _measure(state: Path, steady: float) -> dict[str, Any]:
    async with Client.from_kubeconfig(state / "kubeconfig", timeout=10) as client:
        writer = Writer(client)
        stop = asyncio.Event()
        task = asyncio.create_task(writer.run(stop))
        began = time.monotonic()
        await asyncio.sleep(steady)
        steady_end = time.monotonic()
        steady_writes = len(writer.successes)
        for name in ("apiserver-1", "apiserver-2"):
            await _restart(state, name, writer)
        end = time.monotonic()
        stop.set()
        await task
    return {"writes": len(writer.successes), "steady_writes_per_s": round(steady_writes / steady, 1),
            "failed_tries": writer.failed_tries, "failed_writes_after_retries": len(writer.failed_writes),
            "failed_examples": writer.failed_writes[:5],
            "longest_gap_during_rolling_restart_s": round(_gap(writer.successes, steady_end, end), 3),
            "anchor_longest_gap_steady_s": round(_gap(writer.successes, began, steady_end), 3),
            "retry_policy": f"{RETRIES} tries, {RETRY_WAIT} s apart, on 503/504"}


def run(steady: float) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="kubeling-bench-rolling-"))
    env = {**os.environ, "KUBELING_HOME": str(scratch / "home")}
    state = scratch / "cluster"
    try:
        _kubeling(env, "up", "--nodes", "0", "--apiservers", "2", "--detach", "--name", "bench-rolling",
                  "--state-dir", str(state), "--cluster-cidr", CLUSTER_CIDR, "--no-registry", "--no-ingress",
                  "--kubeconfig", str(scratch / "user-kubeconfig"))
        return {"benchmark": "rolling", **asyncio.run(_measure(state, steady))}
    finally:
        subprocess.run([sys.executable, "-m", "cluster", "down", "--state-dir", str(state)], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    report(run(args.steady_seconds), args.json)


if __name__ == "__main__":
    main()

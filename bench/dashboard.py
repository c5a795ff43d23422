"""The dashboard in a browser (not a test): `python -m bench.dashboard [--loads 10] [--pods 20]
[--json OUT.json]`. A one-node `kubeling up` (its own $KUBELING_HOME), `kubeling dashboard`
on it, headless Chromium (bench.browser):

- first paint: the overview loaded `--loads` times, the browser's first-contentful-paint
  and the time until the page has drawn the snapshot's tables (medians);
- update latency: `--pods` pods created one after another while the overview is open,
  from the create call to the pod's row on the page; anchor: the same pods' events on a
  watch this process holds (the floor any watcher of the API sees); the page's latency
  over the anchor's is what the informer, the server-sent event and the page's
  rendering add.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.browser import Browser
from bench.output import report
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2


def _kubeling(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "cluster", *args], env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"kubeling {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")


def _pod(name: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(nodeName="none", containers=[
                            core_pb2.Container(name="main", image="busybox")]))


async def _measure(state: Path, url: str, loads: int, pods: int) -> dict[str, Any]:
    paints, drawn = [], []
    async with Browser() as browser, Client.from_kubeconfig(state / "kubeconfig") as client:
        for _ in range(loads):
            started = time.time() * 1000
            await browser.open(url)
            at = await browser.wait_for("window.__kubeling.snapshotAt", "the snapshot drawn")
            drawn.append(at - started)
            paint = await browser.evaluate(
                "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || 0")
            paints.append(paint)
        watched: dict[str, float] = {}

        async def watch() -> None:
            async for event in client.pods.watch("default", resource_version="0"):
                watched.setdefault(event.object.metadata.name, time.time() * 1000)
        watcher = asyncio.create_task(watch())
        page, anchor = [], []
        try:
            await asyncio.sleep(0.5)  # the watch's initial state delivered
            for i in range(pods):
                name = f"bench-{i}"
                started = time.time() * 1000
                # bound to a node that does not exist: no kubelet acts, only the API and the page
                await client.pods.create(_pod(name))
                shown = await browser.wait_for(
                    f"(window.__kubeling.updates.find(u => u.id === 'default/{name}') || {{}}).at", f"pod {name}")
                while name not in watched:
                    await asyncio.sleep(0.005)
                page.append(shown - started)
                anchor.append(watched[name] - started)
        finally:
            watcher.cancel()
            for i in range(pods):
                try:
                    await client.pods.delete(f"bench-{i}", "default", grace_period_seconds=0)
                except Exception:  # noqa: BLE001 (best effort: the cluster is torn down next)
                    pass
    page_ms, anchor_ms = statistics.median(page), statistics.median(anchor)
    return {"loads": loads, "first_contentful_paint_ms_median": round(statistics.median(paints), 1),
            "snapshot_drawn_ms_median": round(statistics.median(drawn), 1),
            "pods": pods, "update_on_page_ms_median": round(page_ms, 1),
            "update_on_page_ms_p90": round(sorted(page)[int(0.9 * (len(page) - 1))], 1),
            "anchor_watch_event_ms_median": round(anchor_ms, 1),
            "page_over_watch": round(page_ms / anchor_ms, 2) if anchor_ms else None}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubeling-dashboard-bench-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "KUBELING_HOME": str(work / "home"), "KUBECONFIG": str(work / "kubeconfig")}
        state = work / "state"
        _kubeling(env, "up", "--detach", "--state-dir", str(state), "--nodes", "1", "--no-registry", "--no-ingress",
                  "--no-network-policy")
        dashboard = subprocess.Popen([sys.executable, "-m", "cluster", "dashboard", "--listen", "127.0.0.1:0",
                                      "--kubeconfig", str(state / "kubeconfig")], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        try:
            assert dashboard.stdout is not None
            url = dashboard.stdout.readline().split()[2]
            result = {"benchmark": "dashboard", **asyncio.run(_measure(state, url, args.loads, args.pods))}
        finally:
            dashboard.terminate()
            try:
                dashboard.wait(15)
            except subprocess.TimeoutExpired:
                dashboard.kill()
                dashboard.wait()
            _kubeling(env, "down", "--state-dir", str(state))
    report(result, args.json)


if __name__ == "__main__":
    main()

"""CNI benchmark (not a test): `python -m bench.cni --json OUT.json`.

Per sandbox, sequentially: create a netns, SetUpPod (loopback + bridge/host-local on a
private subnet), TearDownPod, delete the netns; then the same for N sandboxes at once.
Reports medians in milliseconds. Everything it creates is removed.
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
from pathlib import Path

from bench.output import report
from cni import netns
from cri.network import NetworkPluginManager, PodNetwork


async def run(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-bench-cni-"))
    bridge = f"kbb{os.getpid() % 100000}"
    conf = work / "net.d"
    conf.mkdir()
    (conf / "10-bench.conflist").write_text(json.dumps({"cniVersion": "1.0.0", "name": "bench", "plugins": [{
        "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "dataDir": str(work / "ipam"), "ranges": [[{"subnet": "10.198.0.0/16"}]]}}]}))
    mgr = NetworkPluginManager(conf, ["/usr/lib/cni"], cache_dir=work / "cache")
    t_ns, t_up, t_down = [], [], []
    try:
        for i in range(args.count):
            name = f"kubeling-bench-{os.getpid()}-{i}"
            t = time.perf_counter()
            path = await netns.create(name)
            t_ns.append(time.perf_counter() - t)
            pod = PodNetwork("default", f"p{i}", f"u{i}", f"s{i}", path)
            t = time.perf_counter()
            await mgr.set_up_pod(pod)
            t_up.append(time.perf_counter() - t)
            t = time.perf_counter()
            await mgr.tear_down_pod(pod)
            t_down.append(time.perf_counter() - t)
            await netns.delete(name)
        names = [f"kubeling-bench-{os.getpid()}-c{i}" for i in range(args.concurrent)]
        t = time.perf_counter()
        paths = await asyncio.gather(*(netns.create(n) for n in names))
        pods = [PodNetwork("default", f"c{i}", f"cu{i}", f"cs{i}", p) for i, p in enumerate(paths)]
        await asyncio.gather(*(mgr.set_up_pod(p) for p in pods))
        concurrent_up = time.perf_counter() - t
        t = time.perf_counter()
        await asyncio.gather(*(mgr.tear_down_pod(p) for p in pods))
        await asyncio.gather(*(netns.delete(n) for n in names))
        concurrent_down = time.perf_counter() - t
    finally:
        for n in netns.list_names(f"kubeling-bench-{os.getpid()}-"):
            await netns.delete(n)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    def ms(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1000, 1)

    return {"benchmark": "cni", "sandboxes": args.count, "netns_create_ms": ms(t_ns),
            "setup_pod_ms": ms(t_up), "teardown_pod_ms": ms(t_down),
            "concurrent_sandboxes": args.concurrent,
            "concurrent_setup_s": round(concurrent_up, 2), "concurrent_teardown_s": round(concurrent_down, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--concurrent", type=int, default=20)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

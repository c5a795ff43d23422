"""How fast this host is, in fixed work: so results from different hosts can be compared.

- `python_loop_ms`: a fixed pure-Python loop (5 M iterations of an add and a compare):
  the interpreter's speed, what our components mostly spend.
- `sha256_mib_s`: hashlib over 64 MiB: the CPU's raw speed.
- `etcd_txn_burst_ms`: 500 create-if-absent transactions, one after another, through the
  same client the apiserver uses, against a private etcd on loopback: fsync, etcd's own
  CPU and the gRPC round trip.
- `memory_cgroups_dying`: memory cgroups removed but still held by the kernel (cgroup v1:
  /proc/cgroups' count minus the directories). Not a speed but the host's state, whatever
  commit runs: a runtime that removes containers whose pages are still charged leaves one
  per container (cri.runc's delete empties them first; containerd 1.6 does not),
  each kept and walked by the kernel's memory accounting.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["host_speed"]

_LOOP = 5_000_000
_TXNS = 500


def _python_loop_ms() -> float:
    start = time.perf_counter()
    total = 0
    for i in range(_LOOP):
        total += i
        if total < 0:
            break
    return (time.perf_counter() - start) * 1000


def _sha256_mib_s() -> float:
    data = b"k" * (64 << 20)
    start = time.perf_counter()
    hashlib.sha256(data).digest()
    return 64 / (time.perf_counter() - start)


async def _etcd_burst_ms() -> float:
    from apiserver.storage.etcd import Storage
    from cluster.etcd import EtcdServer

    with EtcdServer() as etcd:
        storage = await Storage.connect(etcd.endpoint)
        try:
            await storage.create(b"/hostspeed/warmup", b"x")
            start = time.perf_counter()
            for i in range(_TXNS):
                await storage.create(f"/hostspeed/{i}".encode(), b"x" * 100)
            return (time.perf_counter() - start) * 1000
        finally:
            await storage.close()


def memory_cgroups_dying() -> int | None:
    """Removed memory cgroups the kernel still holds (cgroup v1); None without a v1 memory hierarchy."""
    root = Path("/sys/fs/cgroup/memory")
    try:
        counted = next(int(line.split()[2]) for line in Path("/proc/cgroups").read_text().splitlines()
                       if line.split()[:1] == ["memory"])
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    if not root.is_dir():
        return None
    present = sum(1 for _ in os.walk(root))  # one entry per directory, the root included
    return max(counted - present, 0)


def host_speed() -> dict[str, Any]:
    """The three figures (the best of three for the CPU ones: least disturbed by neighbours)."""
    loop_ms = min(_python_loop_ms() for _ in range(3))
    sha = max(_sha256_mib_s() for _ in range(3))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        etcd_ms: float | None = asyncio.run(_etcd_burst_ms())
    else:  # called from inside a loop: run the burst in a thread with its own loop
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            etcd_ms = pool.submit(asyncio.run, _etcd_burst_ms()).result()
    return {"python_loop_ms": round(loop_ms, 1), "sha256_mib_s": round(sha, 1),
            "etcd_txn_burst_ms": round(etcd_ms, 1) if etcd_ms is not None else None,
            "memory_cgroups_dying": memory_cgroups_dying()}


if __name__ == "__main__":
    import json
    print(json.dumps(host_speed(), indent=2))

"""The plan's processes found again by pid when the supervisor that started them is gone."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

from cluster.plan import ClusterPlan, commands

__all__ = ["alive", "orphans", "terminate_pids"]

log = logging.getLogger("kubeling.up")


def alive(pid: int) -> bool:
    """pid runs (a zombie does not: an orphan's exit waits for whoever adopted it to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def orphans(plan: ClusterPlan) -> dict[str, int]:
    """The plan's components still running: a pid counts only when its command line is the
    one the supervisor started (a recycled pid belongs to somebody else)."""
    argv = commands(plan)
    out = {}
    for name, pid in plan.components.items():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if name in argv and [a.decode() for a in cmdline] == argv[name]:
            out[name] = pid
    return out


def terminate_pids(pids: dict[str, int], timeout: float = 30.0) -> None:
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for name, pid in pids.items():
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            log.warning("%s did not stop in %.0fs; killing it", name, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

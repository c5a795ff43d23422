"""Launching container shims (kubelet/cri/shim.py) and reading what they leave behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kubelet.cri.shim import EXIT_FILE, SHIM_PID_FILE


class ShimError(RuntimeError):
    pass


@dataclass(frozen=True)
class ExitInfo:
    exit_code: int
    signal: int
    finished_at: int
    oom_killed: bool = False


def read_exit(state: Path) -> ExitInfo | None:
    """The container's exit as its shim recorded it, or None while it runs."""
    try:
        data = json.loads((state / EXIT_FILE).read_text())
    except FileNotFoundError:
        return None
    return ExitInfo(int(data["exitCode"]), int(data.get("signal", 0)), int(data["finishedAt"]),
                    bool(data.get("oomKilled", False)))


def reopen_log(state: Path) -> bool:
    """Ask a running shim to reopen the container's log (after rotation); False if it is gone."""
    if read_exit(state) is not None:
        return False
    try:
        pid = int((state / SHIM_PID_FILE).read_text())
        # A pid can be reused once the shim is gone: signal only our shim.
        if b"kubelet.cri.shim" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        os.kill(pid, signal.SIGUSR1)
    except (OSError, ValueError):
        return False
    return True


@dataclass
class ShimLauncher:
    runc_root: Path
    runc: str = "runc"
    _waiters: set[asyncio.Task[int]] = field(default_factory=set)

    async def launch(self, container_id: str, bundle: Path, log_path: Path, state: Path) -> int:
        """Start the shim, which runs `runc create`; return the container's init pid."""
        state.mkdir(parents=True, exist_ok=True)
        with open(state / "shim.log", "ab") as shim_log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kubelet.cri.shim", "--runc-root", str(self.runc_root),
                "--id", container_id, "--bundle", str(bundle), "--log", str(log_path), "--state", str(state),
                "--runc", self.runc, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=shim_log, start_new_session=True)  # its own session: a server restart spares it
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode(errors="replace").strip()
        if not line.startswith("created "):
            await proc.wait()
            detail = line.removeprefix("error ") or f"shim exited {proc.returncode}; see {state / 'shim.log'}"
            raise ShimError(f"runc create {container_id}: {detail}")
        # Reap the shim when it ends (after the container), without making callers wait.
        waiter = asyncio.ensure_future(proc.wait())
        self._waiters.add(waiter)
        waiter.add_done_callback(self._waiters.discard)
        return int(line.split()[1])

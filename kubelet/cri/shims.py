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
    _waiters: set[asyncio.Future[int]] = field(default_factory=set)
    _spare: asyncio.subprocess.Process | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        # Its own session: a server stop or restart spares it (and its container).
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubelet.cri.shim", "--stdin-args", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)

    async def launch(self, container_id: str, bundle: Path, log_path: Path, state: Path) -> int:
        """Hand the container to a shim, which runs `runc create`; return the container's init pid."""
        state.mkdir(parents=True, exist_ok=True)
        # Take the spare before any await: concurrent launches must not drop one another's.
        proc, self._spare = self._spare, None
        if proc is None:
            proc = await self._spawn()
        assert proc.stdin is not None and proc.stdout is not None
        args = {"runc_root": str(self.runc_root), "id": container_id, "bundle": str(bundle),
                "log": str(log_path), "state": str(state), "runc": self.runc}
        proc.stdin.write(json.dumps(args).encode() + b"\n")
        await proc.stdin.drain()
        proc.stdin.close()
        # Warm the next one while this one runs runc create; launches that ran
        # meanwhile may have left one already, and there is room for one only.
        replacement = await self._spawn()
        if self._spare is None:
            self._spare = replacement
        else:
            await self._end(replacement)
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

    async def close(self) -> None:
        """End the idle spare (running shims are left alone: they own containers)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await self._end(spare)

    @staticmethod
    async def _end(spare: asyncio.subprocess.Process) -> None:
        if spare.stdin is not None:
            spare.stdin.close()  # EOF before arguments: the spare exits
        await spare.wait()

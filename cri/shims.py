"""Launching container shims (cri/shim.py) and reading what they leave behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cri.shim import EXIT_FILE, SHIM_PID_FILE, write_exit


class ShimError(RuntimeError):
    pass


# A container whose start failed, as containerd reports it: exited, with this code and reason.
START_ERROR_EXIT_CODE, START_ERROR_REASON = 128, "StartError"


@dataclass(frozen=True)
class ExitInfo:
    exit_code: int
    signal: int
    finished_at: int
    oom_killed: bool = False
    reason: str = ""  # set when the runtime, not the process, ended it (StartError)
    message: str = ""


def read_exit(state: Path) -> ExitInfo | None:
    """The container's exit as its shim (or a failed start) recorded it, or None while it runs."""
    try:
        data = json.loads((state / EXIT_FILE).read_text())
    except FileNotFoundError:
        return None
    return ExitInfo(int(data["exitCode"]), int(data.get("signal", 0)), int(data["finishedAt"]),
                    bool(data.get("oomKilled", False)), str(data.get("reason", "")), str(data.get("message", "")))


def record_start_failure(state: Path, message: str) -> None:
    """The container never ran: record it as exited, so that it is not CREATED forever."""
    write_exit(state, START_ERROR_EXIT_CODE, reason=START_ERROR_REASON, message=message)


def _shim_pid(state: Path) -> int | None:
    """The container's shim, if it still runs (a pid can be reused: only our shim counts)."""
    try:
        pid = int((state / SHIM_PID_FILE).read_text())
        if b"cri.shim" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
    except (OSError, ValueError):
        return None
    return pid


def shim_running(state: Path) -> bool:
    return _shim_pid(state) is not None


def record_lost_shim(state: Path) -> bool:
    """The shim died (with a runtime killed while it started the container): no one will
    write the exit, so it is written here once the container is gone (containerd's
    "shim lost": the exit code unknown, 255). False when the shim had written one (a shim
    ends right after it records the exit: its absence alone proves nothing)."""
    if read_exit(state) is not None:
        return False
    write_exit(state, 255, reason="Unknown", message="the container's shim is gone; its exit status is unknown")
    return True


def reopen_log(state: Path) -> bool:
    """Ask a running shim to reopen the container's log (after rotation); False if it is gone."""
    if read_exit(state) is not None:
        return False
    pid = _shim_pid(state)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return False
    return True


@dataclass
class ShimLauncher:
    """Starts shims through a zygote process (`python -m cri.shim --zygote`) that
    forks one per container; the zygote is started on first use and again if it died."""

    runc_root: Path
    runc: str = "runc"
    _zygote: asyncio.subprocess.Process | None = None
    _socket: socket.socket | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def _start_zygote(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # Its own session: a server stop or restart spares it and the shims it forked.
            # The runc root in its command line tells whose zygote (and shims) it is.
            self._zygote = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cri.shim", "--zygote", "--socket-fd", str(theirs.fileno()),
                "--runc-root", str(self.runc_root), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self._socket = ours
        return ours

    async def _send(self, request: bytes, report_w: int) -> None:
        async with self._lock:
            for attempt in range(2):
                sock = self._socket or await self._start_zygote()
                try:
                    socket.send_fds(sock, [request], [report_w])
                    return
                except OSError:
                    if attempt:
                        raise
                    await self._stop_zygote()  # it died: start another

    async def launch(self, container_id: str, bundle: Path, log_path: Path, state: Path, *, stdin: bool = False,
                     stdin_once: bool = False, tty: bool = False, run: bool = False) -> int:
        """Hand the container to a shim, which runs `runc create` (with `run`: `runc run
        --detach`, the container started); return the container's init pid."""
        state.mkdir(parents=True, exist_ok=True)
        args = {"runc_root": str(self.runc_root), "id": container_id, "bundle": str(bundle),
                "log": str(log_path), "state": str(state), "runc": self.runc, "stdin": stdin,
                "stdin_once": stdin_once, "tty": tty, "run": run}
        report_r, report_w = os.pipe()
        try:
            try:
                await self._send(json.dumps(args).encode(), report_w)
            finally:
                os.close(report_w)  # the shim holds the only write end now: EOF when it is done
            line = (await _read_until_eof(report_r)).decode(errors="replace").strip()
        finally:
            os.close(report_r)
        if not line.startswith("created "):
            detail = line.removeprefix("error ") or f"the shim ended without a word; see {state / 'shim.log'}"
            raise ShimError(f"runc {'run' if run else 'create'} {container_id}: {detail}")
        return int(line.split()[1])

    async def _stop_zygote(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()  # EOF: the zygote exits
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            await zygote.wait()

    async def close(self) -> None:
        """End the zygote (running shims are left alone: they own containers)."""
        await self._stop_zygote()


async def _read_until_eof(fd: int) -> bytes:
    """What is written to the pipe until its write end closes, read on the event loop
    (a thread per container start costs more than the read)."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    chunks: list[bytes] = []

    def readable() -> None:
        try:
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        except BlockingIOError:
            return  # more to come
        except OSError as exc:
            if not done.done():
                done.set_exception(exc)
            return
        if not done.done():
            done.set_result(b"".join(chunks))

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)

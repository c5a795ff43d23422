"""A driver for the runc command line (runc 1.1), as containerd's go-runc.

Every call names its own state root (`--root`), so kubeling's containers stay apart
from anyone else's runc containers. runc's own errors go to a per-call JSON log
rather than stderr: during `create` stderr belongs to the container.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal as signals
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cri.runclog import last_error
from kubeling.telemetry import tracer

_TRACER = tracer(__name__)

log = logging.getLogger(__name__)

EXEC_OUTPUT_CAP = 16 * 1024 * 1024  # CRI caps ExecSync output at 16 MiB (CVE-2022-1708)
_LIST_ATTEMPTS = 10  # each failed listing needs a removal of its own to race it


class RuncError(Exception):
    def __init__(self, command: str, container_id: str, message: str) -> None:
        super().__init__(f"runc {command} {container_id}: {message}")
        self.command, self.container_id, self.message = command, container_id, message

    @property
    def not_found(self) -> bool:
        return "does not exist" in self.message or "not exist" in self.message


@dataclass(frozen=True)
class ContainerState:
    id: str
    pid: int
    status: str  # created, running, paused, stopped
    bundle: str
    created: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContainerState:
        return cls(id=data["id"], pid=int(data.get("pid") or 0), status=data["status"],
                   bundle=data.get("bundle", ""), created=data.get("created", ""))


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False


class Runc:
    def __init__(self, root: Path, binary: str = "runc", timeout: float = 60.0) -> None:
        self.root = Path(root)
        self.binary = binary
        self.timeout = timeout
        self.root.mkdir(parents=True, exist_ok=True)
        # runc's --log files, reused (emptied) call after call: a file made and removed per
        # call churned the filesystem's inodes, which made every later file creation on
        # the node slower (ext4 scans for recently deleted inodes).
        self._free_logs: list[Path] = []
        self._log_count = 0
        self._remove_dead_processes_logs()

    def _remove_dead_processes_logs(self) -> None:
        """The pooled log files of drivers whose process has ended (a restarted server)."""
        for path in self.root.glob(".runc-log-*-*"):
            pid = path.name.split("-")[2]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                path.unlink(missing_ok=True)

    def _take_log(self) -> Path:
        if self._free_logs:
            return self._free_logs.pop()
        self._log_count += 1
        path = self.root / f".runc-log-{os.getpid()}-{self._log_count}"
        path.touch()
        return path

    def _give_back_log(self, path: Path) -> None:
        """Empty the log file of a finished call and keep it for the next."""
        try:
            os.truncate(path, 0)
        except OSError:
            return  # gone (the root was cleaned): the next call makes another
        self._free_logs.append(path)

    async def _run(self, command: str, container_id: str, *args: str, stdin: int = asyncio.subprocess.DEVNULL,
                   stdout: int = asyncio.subprocess.PIPE, stderr: int = asyncio.subprocess.DEVNULL,
                   timeout: float | None = None) -> bytes:
        with _TRACER.start_as_current_span(f"runc {command}", attributes={"runc.container_id": container_id}):
            return await self._exec(command, container_id, *args, stdin=stdin, stdout=stdout, stderr=stderr,
                                    timeout=timeout)

    async def _exec(self, command: str, container_id: str, *args: str, stdin: int, stdout: int, stderr: int,
                    timeout: float | None) -> bytes:
        log_path = self._take_log()
        proc: asyncio.subprocess.Process | None = None
        try:
            proc = await asyncio.create_subprocess_exec(
                self.binary, "--root", str(self.root), "--log", str(log_path), "--log-format", "json",
                command, *args, stdin=stdin, stdout=stdout, stderr=stderr)
            try:
                async with asyncio.timeout(timeout or self.timeout):
                    out, _ = await proc.communicate()
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                raise RuncError(command, container_id, f"timed out after {timeout or self.timeout}s") from None
            if proc.returncode != 0:
                raise RuncError(command, container_id,
                                last_error(log_path) or f"exit status {proc.returncode}")
            return out or b""
        finally:
            if proc is None or proc.returncode is not None:
                self._give_back_log(log_path)
            else:  # cancelled while runc runs on: it may still write there, the file is its
                log_path.unlink(missing_ok=True)

    async def create(self, container_id: str, bundle: Path, *, stdout: int, stderr: int,
                     pid_file: Path | None = None) -> None:
        """Create the container; its stdio are the given descriptors (files or pipes
        whose read ends the caller keeps: runc does not wait for them to close)."""
        args = ["--bundle", str(bundle)]
        if pid_file is not None:
            args += ["--pid-file", str(pid_file)]
        await self._run("create", container_id, *args, container_id, stdout=stdout, stderr=stderr)

    async def start(self, container_id: str) -> None:
        await self._run("start", container_id, container_id)

    async def run_detached(self, container_id: str, bundle: Path, *, stdout: int, stderr: int,
                           pid_file: Path) -> None:
        """Create and start the container in one runc call (`run --detach`), for a container
        nothing has to happen to between the two; a failed start leaves nothing behind."""
        await self._run("run", container_id, "--detach", "--bundle", str(bundle), "--pid-file", str(pid_file),
                        container_id, stdout=stdout, stderr=stderr)

    async def state(self, container_id: str) -> ContainerState | None:
        """The container's state, or None when runc does not know it."""
        try:
            out = await self._run("state", container_id, container_id)
        except RuncError as exc:
            if exc.not_found:
                return None
            raise
        return ContainerState.from_json(json.loads(out))

    async def list_containers(self) -> list[ContainerState]:
        # runc 1.1 (Debian 12's) reads the root directory, then stats each entry and gives up
        # on the first that is gone: a container deleted meanwhile fails the whole listing.
        # That entry is gone for good, so listing again is the answer.
        for attempt in range(_LIST_ATTEMPTS):
            try:
                out = await self._run("list", "", "--format", "json")
            except RuncError as exc:
                if attempt + 1 < _LIST_ATTEMPTS and self._lost_entry(exc):
                    log.debug("runc list raced a removal (%s): listing again", exc.message)
                    continue
                raise
            return [ContainerState.from_json(item) for item in json.loads(out or b"null") or []]
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _lost_entry(self, exc: RuncError) -> bool:
        """Whether runc failed on an entry of its root that vanished while it listed."""
        return exc.message.startswith(f"stat {self.root}/") and exc.message.endswith(": no such file or directory")

    async def kill(self, container_id: str, sig: int = signals.SIGTERM, all_processes: bool = False) -> None:
        args = ["--all"] if all_processes else []
        await self._run("kill", container_id, *args, container_id, str(int(sig)))

    async def delete(self, container_id: str, force: bool = False) -> None:
        """Delete the container; deleting one runc does not know succeeds."""
        await asyncio.to_thread(self._empty_memory_cgroup, container_id)
        try:
            await self._run("delete", container_id, *(["--force"] if force else []), container_id)
        except RuncError as exc:
            if not exc.not_found:
                raise

    def _empty_memory_cgroup(self, container_id: str) -> None:
        """Reclaim what is still charged to the container's memory cgroup (v1) before runc
        removes it. A removed memory cgroup whose pages (page cache, the metadata of the
        files its processes made on a disk) are still charged lives on in the kernel as a
        dying cgroup, kept and walked by its memory accounting: one per removed container
        (650 after an hour of benchmarks on this kind of host). Best effort: the cgroup may
        be gone or still hold processes (EBUSY)."""
        try:
            state = json.loads((self.root / container_id / "state.json").read_bytes())
            memory = state.get("cgroup_paths", {}).get("memory")
            if memory:
                Path(memory, "memory.force_empty").write_bytes(b"0")
        except (OSError, ValueError, AttributeError) as exc:
            log.debug("container %s: memory cgroup not emptied: %s", container_id[:13], exc)

    async def update(self, container_id: str, resources: dict[str, Any]) -> None:
        """Apply OCI linux.resources to a running container (runc update -r)."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.root) as spec:
            json.dump(resources, spec)
            spec.flush()
            await self._run("update", container_id, "--resources", spec.name, container_id)

    async def stats(self, container_id: str) -> dict[str, Any]:
        """One `runc events --stats` sample: cgroup cpu, memory, pids figures."""
        out = await self._run("events", container_id, "--stats", container_id)
        return dict(json.loads(out).get("data") or {})

    async def exec(self, container_id: str, args: list[str], timeout: float = 0,
                   env: list[str] | None = None, cwd: str | None = None) -> ExecResult:
        """Run a command in the container and wait for it (CRI ExecSync).

        Output goes to files, not pipes: a command that leaves a background child
        would otherwise hold the pipe open past its own exit.
        """
        extra: list[str] = []
        for item in env or []:
            extra += ["--env", item]
        if cwd:
            extra += ["--cwd", cwd]
        with tempfile.TemporaryFile(dir=self.root) as out, tempfile.TemporaryFile(dir=self.root) as err, \
                tempfile.TemporaryDirectory(dir=self.root) as scratch:
            pid_file = Path(scratch) / "pid"
            proc = await asyncio.create_subprocess_exec(
                self.binary, "--root", str(self.root), "exec", "--pid-file", str(pid_file), *extra,
                container_id, *args, stdin=asyncio.subprocess.DEVNULL, stdout=out.fileno(), stderr=err.fileno())
            timed_out = False
            try:
                async with asyncio.timeout(timeout if timeout > 0 else None):
                    await proc.wait()
            except asyncio.TimeoutError:
                timed_out = True
                # SIGKILL to runc itself would orphan the command inside the
                # container: kill the command, and runc exec returns.
                try:
                    os.kill(int(pid_file.read_text()), signals.SIGKILL)
                except (FileNotFoundError, ValueError, ProcessLookupError):
                    proc.kill()
                await proc.wait()
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(EXEC_OUTPUT_CAP), err.read(EXEC_OUTPUT_CAP)
        code = proc.returncode if proc.returncode is not None else -1
        if code < 0:  # killed by a signal: report as a shell would
            code = 128 - code
        return ExecResult(exit_code=code, stdout=stdout, stderr=stderr, timed_out=timed_out)

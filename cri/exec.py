"""Interactive exec (CRI Exec, through the streaming server): `runc exec` wired to the
client's streams.

Without a terminal the process gets pipes. With one, `runc exec -t` (in the
foreground: runc takes --console-socket only when it detaches, and then nobody could
wait for the process) makes the container's terminal and relays it to its own stdio,
which is a pty of ours, put in raw mode by runc: our master carries both directions,
and a resize is TIOCSWINSZ on it plus SIGWINCH to runc, which copies the size over.
When the process exits its output is drained for a short while: a child it left in
the background may hold the pipes open for ever. If the caller is cancelled (the
client left), the process is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from cri.console import read_master, set_size
from cri.runclog import last_error
from cri.streaming.runtime import ExecError, InputStream, OutputStream, Streams, TerminalSize

log = logging.getLogger(__name__)

OUTPUT_DRAIN = 2.0  # seconds the output may lag the process's exit
INITIAL_SIZE_WAIT = 0.1  # seconds to wait for the client's terminal size before starting
RUNC_FAILED = 255  # runc's status when the process could not be started at all


async def _copy_out(read: asyncio.StreamReader, out: OutputStream | None) -> None:
    while data := await read.read(64 * 1024):
        if out is not None:
            await out.write(data)


async def _copy_in(source: InputStream, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read():
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass  # the process closed its stdin
    finally:
        sink.close()
        # Retrieve what the close left (a process that ended early: BrokenPipeError), or
        # Python 3.11 logs it as never retrieved.
        with contextlib.suppress(ConnectionError, OSError):
            await sink.wait_closed()


async def _terminal_io(master: int, runc_pid: int,
                       streams: Streams) -> tuple[asyncio.Task[None], list[asyncio.Task[None]]]:
    """Tasks copying between our terminal and the streams: (output, [input, resize])."""
    loop = asyncio.get_running_loop()
    os.set_blocking(master, False)
    readable: asyncio.Queue[None] = asyncio.Queue()
    loop.add_reader(master, readable.put_nowait, None)

    async def output() -> None:
        try:
            while True:
                await readable.get()
                try:
                    data = read_master(master)
                except BlockingIOError:
                    continue
                if not data:
                    return
                if streams.stdout is not None:
                    await streams.stdout.write(data)
        finally:
            loop.remove_reader(master)

    async def write_all(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(master, view):]
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(master, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(master)

    async def typing() -> None:
        assert streams.stdin is not None
        try:
            while data := await streams.stdin.read():
                await write_all(data)
        except OSError:
            pass

    async def resizing() -> None:
        assert streams.resize is not None
        while (size := await streams.resize.get()) is not None:
            try:
                set_size(master, size.width, size.height)
                os.kill(runc_pid, signal.SIGWINCH)  # runc copies its terminal's size to the container's
            except OSError:
                return

    helpers = []
    if streams.stdin is not None:
        helpers.append(asyncio.create_task(typing()))
    if streams.resize is not None:
        helpers.append(asyncio.create_task(resizing()))
    return asyncio.create_task(output()), helpers


async def _initial_size(master: int, sizes: asyncio.Queue[TerminalSize | None]) -> None:
    """A client sends its terminal's size as soon as its streams are up. Give our terminal
    that size before runc starts, so its first copy to the container's terminal (made
    right after the command starts, as runc does) is right; a command that reads its
    size in its first milliseconds can still see 0x0, as under any runc-based runtime."""
    try:
        async with asyncio.timeout(INITIAL_SIZE_WAIT):
            size = await sizes.get()
    except asyncio.TimeoutError:
        return
    if size is None:
        sizes.put_nowait(None)  # no more sizes: the resize task must see that too
        return
    set_size(master, size.width, size.height)


@contextlib.asynccontextmanager
async def _scratch(root: Path) -> AsyncIterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix=".exec-", dir=root))
    try:
        yield directory
    finally:
        for child in directory.iterdir():
            child.unlink(missing_ok=True)
        directory.rmdir()


async def exec_streams(runc: str, runc_root: Path, container_id: str, cmd: list[str], streams: Streams) -> int:
    """Run cmd in the container wired to streams; its exit code (ExecError if it never started)."""
    async with _scratch(runc_root) as scratch:
        runc_log = scratch / "runc.log"
        command = [runc, "--root", str(runc_root), "--log", str(runc_log), "--log-format", "json", "exec",
                   "--pid-file", str(scratch / "pid")]
        master = slave = -1
        if streams.tty:
            master, slave = os.openpty()
            command.append("--tty")
            if streams.resize is not None:
                await _initial_size(master, streams.resize)
        devnull = asyncio.subprocess.DEVNULL
        pipe = asyncio.subprocess.PIPE
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, container_id, *cmd,
                stdin=slave if streams.tty else pipe if streams.stdin is not None else devnull,
                stdout=slave if streams.tty else pipe, stderr=slave if streams.tty else pipe)
        except BaseException:
            if master >= 0:
                os.close(master)
            raise
        finally:
            if slave >= 0:
                os.close(slave)  # runc holds it now: our master reads EIO once runc is gone
        helpers: list[asyncio.Task[None]] = []
        output: list[asyncio.Task[None]] = []
        try:
            if streams.tty:
                copy, helpers = await _terminal_io(master, proc.pid, streams)
                output.append(copy)
            else:
                assert proc.stdout is not None and proc.stderr is not None
                output = [asyncio.create_task(_copy_out(proc.stdout, streams.stdout)),
                          asyncio.create_task(_copy_out(proc.stderr, streams.stderr))]
                if streams.stdin is not None and proc.stdin is not None:
                    helpers.append(asyncio.create_task(_copy_in(streams.stdin, proc.stdin)))
            code = await proc.wait()
            if output:
                _, pending = await asyncio.wait(output, timeout=OUTPUT_DRAIN)
                if pending:
                    log.info("exec %s in %s: output still open %.0fs after exit (a background child?); "
                             "closing it", cmd, container_id[:13], OUTPUT_DRAIN)
            # An output task that failed could only write to a client that left: the
            # server sees that on its own; the exit code still stands.
        except BaseException:
            if proc.returncode is None:
                _kill_exec(scratch / "pid", proc)
                await proc.wait()
            raise
        finally:
            for task in (*helpers, *output):
                task.cancel()
            await asyncio.gather(*helpers, *output, return_exceptions=True)
            if master >= 0:
                os.close(master)
        if code == RUNC_FAILED:
            failure = last_error(runc_log)
            if failure:
                raise ExecError(failure)
        return code if code >= 0 else 128 - code


def _kill_exec(pid_file: Path, runc: asyncio.subprocess.Process) -> None:
    """Kill the exec'd process (runc exec then returns); runc itself if the pid is unknown."""
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        return
    except (OSError, ValueError):
        pass
    try:
        runc.kill()
    except ProcessLookupError:
        pass

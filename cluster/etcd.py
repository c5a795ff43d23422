"""Start and stop a private etcd (Debian's etcd-server) on loopback.

Used by the tests, the benchmarks and `kubeling up`: free ports chosen at run time,
a data dir of its own, ended by PID.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubeling.netutil import free_port

__all__ = ["EtcdCluster", "EtcdServer", "EtcdNotFound", "etcd_args", "etcd_binary"]


class EtcdNotFound(RuntimeError):
    pass


def etcd_binary() -> str:
    path = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if path is None:
        raise EtcdNotFound("etcd is not installed: apt-get install etcd-server (or run `make test`)")
    return path


def etcd_args(binary: str, name: str, data_dir: Path, client_port: int, peer_port: int,
              pki: Path | None = None, initial_cluster: str = "") -> list[str]:
    """One member's command line: clients on loopback (TLS with client certificates when
    given the cluster PKI), its peer URL on loopback; `initial_cluster` names every member
    (name=peer URL, comma-separated) of a cluster made together, default this one alone."""
    scheme = "https" if pki is not None else "http"
    client, peer = f"{scheme}://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    args = [binary, "--name", name, "--data-dir", str(data_dir), "--listen-client-urls", client,
            "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", initial_cluster or f"{name}={peer}", "--log-level", "warn"]
    if initial_cluster:
        args += ["--initial-cluster-state", "new", "--initial-cluster-token", "kubeling"]
    if pki is not None:
        args += ["--cert-file", str(pki / "etcd" / "server.crt"), "--key-file", str(pki / "etcd" / "server.key"),
                 "--trusted-ca-file", str(pki / "ca.crt"), "--client-cert-auth"]
    return args


@dataclass
class EtcdServer:
    """One etcd member. `data_dir=None` makes a temporary dir, removed on stop."""

    data_dir: Path | None = None
    name: str = "kubeling"
    client_port: int = 0
    peer_port: int = 0
    log_path: Path | None = None
    # The cluster PKI (kubeling.pki): clients over TLS with verified client certificates
    # (etcd's --client-cert-auth), etcd/server.crt serving; None: plain text.
    pki: Path | None = None
    initial_cluster: str = ""  # every member of a cluster started together (EtcdCluster)
    extra_args: tuple[str, ...] = ()  # more of etcd's flags (e.g. a small --quota-backend-bytes)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _tmp: Path | None = field(default=None, init=False, repr=False)
    _log_path: Path | None = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, timeout: float = 20.0) -> EtcdServer:
        self.launch()
        self.wait_healthy(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting (a cluster's members wait for each other)."""
        binary = etcd_binary()
        if self.data_dir is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="kubeling-etcd-"))
            self.data_dir = self._tmp / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.client_port = self.client_port or free_port()
        self.peer_port = self.peer_port or free_port()
        self._log_path = self.log_path or self.data_dir.parent / f"etcd-{self.client_port}.log"
        args = etcd_args(binary, self.name, self.data_dir, self.client_port, self.peer_port, self.pki,
                         self.initial_cluster) + list(self.extra_args)
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_healthy(self, timeout: float = 20.0) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._proc.returncode}; see {self._log_path}")
            if self._healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not become healthy in {timeout}s; see {self._log_path}")

    def kill(self) -> None:
        """SIGKILL, as a crash (for fault tests); stop() still cleans up after it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def _healthy(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.5) as raw:
                s = raw
                if self.pki is not None:
                    ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
                    ctx.load_cert_chain(self.pki / "etcd" / "server.crt", self.pki / "etcd" / "server.key")
                    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                return b'"health":"true"' in s.recv(4096)
        except OSError:
            return False

    def stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class EtcdCluster:
    """Several members started together (real Raft), in one temporary dir."""

    size: int = 3
    pki: Path | None = None
    members: list[EtcdServer] = field(default_factory=list)
    _tmp: Path | None = field(default=None, init=False, repr=False)

    @property
    def endpoints(self) -> str:
        """HOST:PORT of every member, comma-separated (the apiserver's --etcd)."""
        return ",".join(m.endpoint for m in self.members)

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        self._tmp = Path(tempfile.mkdtemp(prefix="kubeling-etcd-cluster-"))
        self.members = [EtcdServer(data_dir=self._tmp / f"m{i}", name=f"m{i}", client_port=free_port(),
                                   peer_port=free_port(), pki=self.pki) for i in range(1, self.size + 1)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial
            m.launch()
        try:
            for m in self.members:
                m.wait_healthy(timeout)
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for m in self.members:
            m.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

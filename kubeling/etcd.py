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

__all__ = ["EtcdServer", "EtcdNotFound", "etcd_args", "etcd_binary"]


class EtcdNotFound(RuntimeError):
    pass


def etcd_binary() -> str:
    path = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if path is None:
        raise EtcdNotFound("etcd is not installed: apt-get install etcd-server (or run `make test`)")
    return path


def etcd_args(binary: str, name: str, data_dir: Path, client_port: int, peer_port: int,
              pki: Path | None = None) -> list[str]:
    """One member's command line: clients on loopback (TLS with client certificates when
    given the cluster PKI), its peer URL on loopback."""
    scheme = "https" if pki is not None else "http"
    client, peer = f"{scheme}://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    args = [binary, "--name", name, "--data-dir", str(data_dir), "--listen-client-urls", client,
            "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{name}={peer}", "--log-level", "warn"]
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
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _tmp: Path | None = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 20.0) -> EtcdServer:
        binary = etcd_binary()
        if self.data_dir is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="kubeling-etcd-"))
            self.data_dir = self._tmp / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.client_port = self.client_port or free_port()
        self.peer_port = self.peer_port or free_port()
        log_path = self.log_path or self.data_dir.parent / f"etcd-{self.client_port}.log"
        args = etcd_args(binary, self.name, self.data_dir, self.client_port, self.peer_port, self.pki)
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._proc.returncode}; see {log_path}")
            if self._healthy():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not become healthy in {timeout}s; see {log_path}")

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

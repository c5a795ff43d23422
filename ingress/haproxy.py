"""HAProxy as the ingress controller runs it: the configuration rendered from a Routing, and
the process in master-worker mode (`-W`), reloaded without dropping a connection: the new
configuration is checked (`haproxy -c`) before it replaces the old, the master re-executes
on SIGUSR2 and its new worker takes the listening sockets over from the old one (the
stats socket's `expose-fd listeners`), which finishes the requests it holds."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ingress.model import Route, Routing
from kubeling.atomicfile import replace_file

__all__ = ["HAProxy", "render", "DEFAULT_404"]

log = logging.getLogger(__name__)

DEFAULT_404 = "default_404"


def _host_match(host: str) -> str:
    if host.startswith("*."):
        # one label, then the rest; `[.]`, as HAProxy's parser would eat a backslash
        return "{ var(txn.host) -m reg ^[^.]+" + host[1:].replace(".", "[.]") + "$ }"
    return "{ var(txn.host) -m str " + host + " }"


def _path_matches(route: Route) -> list[str]:
    """The alternatives (ORed) a route's path matches as."""
    if route.exact:
        return ["{ path -m str " + route.path + " }"]
    if route.path == "/":
        return [""]
    return ["{ path -m str " + route.path + " }", "{ path -m beg " + route.path + "/ }"]


def _rules(routing: Routing) -> list[str]:
    lines = ["    http-request set-var(txn.host) req.hdr(host),field(1,:),lower"]
    for host in routing.hosts:
        lines.append("    acl known_host " + _host_match(host)[2:-2])
    for route in routing.routes:
        host = _host_match(route.host) if route.host else ("!known_host" if routing.hosts else "")
        alternatives = [" ".join(p for p in (host, path) if p) for path in _path_matches(route)]
        condition = " || ".join(a for a in alternatives if a)
        lines.append(f"    use_backend {route.backend}" + (f" if {condition}" if condition else "")
                     + f"  # {route.ingress}")
    lines.append(f"    default_backend {routing.default_backend or DEFAULT_404}")
    return lines


def render(routing: Routing, http: str, https: str, state_dir: Path) -> str:
    """The whole configuration: an HTTP frontend on `http`, an HTTPS one on `https` (SNI
    picks the certificate from the crt-list), a backend per Service port."""
    rules = _rules(routing)
    out = ["global",
           "    maxconn 4096",
           f"    stats socket {state_dir / 'haproxy.sock'} mode 600 level admin expose-fd listeners",
           "",
           "defaults",
           "    mode http",
           "    option forwardfor",
           "    timeout connect 5s",
           "    timeout client 60s",
           "    timeout server 60s",
           "    timeout http-request 10s",
           "",
           "frontend http",
           f"    bind {http}",
           *rules,
           "",
           "frontend https",
           f"    bind {https} ssl crt-list {state_dir / 'crt-list'}",
           "    http-request set-header X-Forwarded-Proto https",
           *rules,
           ""]
    for backend in sorted(routing.backends.values(), key=lambda b: b.name):
        out += [f"backend {backend.name}  # {backend.service}", "    balance roundrobin"]
        out += [f"    server s{i} {s.address}:{s.port}" for i, s in enumerate(backend.servers)]
        out.append("")
    out += [f"backend {DEFAULT_404}",
            '    http-request return status 404 content-type text/plain string "default backend - 404"', ""]
    return "\n".join(out)


@dataclass
class HAProxy:
    state_dir: Path
    binary: str = "haproxy"
    _proc: asyncio.subprocess.Process | None = None
    _config: str = ""
    reloads: int = 0
    _certificates: dict[str, bytes] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.state_dir / "haproxy.cfg"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def write_certificates(self, certificates: dict[str, tuple[bytes, tuple[str, ...]]], default: bytes) -> bool:
        """The PEM files (0600) and the crt-list (the default certificate first: HAProxy
        answers with it when no SNI filter matches); whether anything changed."""
        wanted = {"default": default, **{name: pem for name, (pem, _) in certificates.items()}}
        lines = [f"{self.state_dir / 'certs' / 'default.pem'}"]
        lines += [f"{self.state_dir / 'certs' / (name + '.pem')} {' '.join(hosts)}".rstrip()
                  for name, (_, hosts) in sorted(certificates.items())]
        crt_list = ("\n".join(lines) + "\n").encode()
        if wanted == self._certificates and (self.state_dir / "crt-list").exists() and \
                (self.state_dir / "crt-list").read_bytes() == crt_list:
            return False
        certs = self.state_dir / "certs"
        certs.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, pem in wanted.items():
            replace_file(certs / f"{name}.pem", pem, 0o600)
        for stale in certs.glob("*.pem"):
            if stale.stem not in wanted:
                stale.unlink(missing_ok=True)
        replace_file(self.state_dir / "crt-list", crt_list, 0o600)
        self._certificates = wanted
        return True

    async def apply(self, config: str, *, force: bool = False) -> bool:
        """Check `config`, then start HAProxy with it or reload; False when HAProxy refused
        it (the old one keeps serving)."""
        if config == self._config and not force and self._proc is not None and self._proc.returncode is None:
            return True
        candidate = self.state_dir / "haproxy.cfg.new"
        replace_file(candidate, config.encode(), 0o600)
        checked = await asyncio.to_thread(subprocess.run, [self.binary, "-c", "-q", "-f", str(candidate)],
                                          capture_output=True, text=True)
        if checked.returncode != 0:
            log.warning("HAProxy refused the new configuration: %s", (checked.stderr or checked.stdout).strip())
            return False
        os.replace(candidate, self.config_path)
        self._config = config
        if self._proc is None or self._proc.returncode is not None:
            # HAProxy dies with its controller, even a killed one (the parent-death signal
            # survives the master's re-executions): a successor never meets an orphan
            # holding the ports with an old configuration
            guard = ["setpriv", "--pdeathsig", "TERM"] if shutil.which("setpriv") else []
            self._proc = await asyncio.create_subprocess_exec(
                *guard, self.binary, "-W", "-db", "-f", str(self.config_path), stdin=asyncio.subprocess.DEVNULL)
            log.info("HAProxy started (pid %d)", self._proc.pid)
        else:
            self._proc.send_signal(signal.SIGUSR2)
            self.reloads += 1
            log.info("HAProxy reloaded (%d so far)", self.reloads)
        return True

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)  # the master stops its workers
        try:
            async with asyncio.timeout(10):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()

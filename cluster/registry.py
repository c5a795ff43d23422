"""The cluster's local registry, kind's documented pattern (a registry container beside the
nodes, containerd's hosts.toml pointing at it): Debian's docker-registry on the underlay's
gateway address, where every node's runtime reaches it, with its data kept in
`<state-dir>/registry/data` across `up`s. The machine's own clients push to
`localhost:<port>` (Docker and skopeo speak plain HTTP to loopback registries unasked):
an HAProxy in TCP mode relays loopback to the underlay address, since docker-registry
listens on one address only. The nodes' runtimes get a hosts.toml directory in which
`localhost:<port>`, `127.0.0.1:<port>` and the cluster's registry name (default
`kubeling-registry:5000`, as kind's `kind-registry:5000`) all mean that registry; the
user's own `--registry-config-dir` entries are linked in beside them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubeling.atomicfile import replace_file

__all__ = ["DEFAULT_NAME", "LocalRegistry"]

DEFAULT_NAME = "kubeling-registry:5000"


@dataclass(frozen=True)
class LocalRegistry:
    base: Path  # <state-dir>/registry
    host: str  # the underlay's gateway address (loopback for a plan without an underlay)
    port: int
    name: str  # the extra name ("": none)
    user_config_dir: str = ""  # the user's --registry-config-dir, linked in

    @property
    def hosts_dir(self) -> Path:
        """The hosts.toml directory the nodes' runtimes read."""
        return self.base / "hosts.d"

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def aliases(self) -> list[str]:
        """Every name by which pods' images may name the local registry."""
        return [f"localhost:{self.port}", f"127.0.0.1:{self.port}", *([self.name] if self.name else [])]

    def write_config(self) -> None:
        """docker-registry's configuration, the loopback relay's, and the hosts.toml directory."""
        base = self.base
        (base / "data").mkdir(parents=True, exist_ok=True)
        # delete enabled: `skopeo delete` and garbage collection work as on a registry one runs oneself
        replace_file(base / "config.yml", (
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {base / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.listen}\n  headers:\n    X-Content-Type-Options: [nosniff]\n").encode(), 0o644)
        replace_file(base / "haproxy.cfg", (
            "global\n    maxconn 1000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 10m\n"
            "    timeout server 10m\n\n"
            f"frontend registry\n    bind 127.0.0.1:{self.port}\n    default_backend registry\n\n"
            f"backend registry\n    server registry {self.listen}\n").encode(), 0o644)
        hosts = self.hosts_dir
        hosts.mkdir(parents=True, exist_ok=True)
        ours = set(self.aliases)
        for entry in hosts.iterdir():  # what an earlier `up` wrote or linked (its port, the user's entries)
            if entry.is_symlink():
                entry.unlink()
            elif entry.name not in ours and entry.is_dir():
                for child in entry.iterdir():
                    child.unlink()
                entry.rmdir()
        for alias in self.aliases:
            (hosts / alias).mkdir(exist_ok=True)
            replace_file(hosts / alias / "hosts.toml",
                         f'# kubeling up: the local registry\nserver = "http://{self.listen}"\n'.encode(), 0o644)
        if self.user_config_dir:
            for entry in Path(self.user_config_dir).iterdir():
                if entry.name not in ours:
                    (hosts / entry.name).symlink_to(entry.resolve())

    def commands(self) -> dict[str, list[str]]:
        out = {"registry": ["docker-registry", "serve", str(self.base / "config.yml")]}
        if self.host != "127.0.0.1":
            out["registry-loopback"] = ["haproxy", "-f", str(self.base / "haproxy.cfg"), "-db"]
        return out

"""Registry hosts: where a registry's images are pulled from, in containerd's
`hosts.toml` format (containerd docs/hosts.md), for mirrors, pull-through caches and
air-gapped clusters.

    <config dir>/<registry>/hosts.toml      e.g. certs.d/gcr.io/hosts.toml
    <config dir>/_default/hosts.toml        for registries without their own

    server = "https://registry.example.com"     # the fallback, tried last (default: the registry)
    ca = "ca.crt"                               # server-level TLS settings
    [host."http://10.0.0.5:5000"]               # mirrors, tried first, in file order
      capabilities = ["pull", "resolve"]        # default: pull, resolve, push
      skip_verify = false                       # TLS: do not verify the mirror's certificate
      ca = "/etc/certs/mirror.pem"              # or a list; relative paths are relative to the file
      client = [["client.cert", "client.key"]]
      override_path = false                     # true: the URL's path is the API root (no /v2)
      [host."http://10.0.0.5:5000".header]
        x-custom = "value"

A registry with a port is looked up as `host_port_`, then `host:port`. A directory with
no hosts.toml may hold Docker-style certificates (`*.crt` CAs, `*.cert`/`*.key` pairs)
for the registry itself. Tags are resolved only by hosts with `resolve`; content by
digest comes from hosts with `pull`. A mirror gets the registry as the `ns` query
parameter. The image keeps its own name whichever host served it.
"""

from __future__ import annotations

import ssl
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cri.images import reference

PULL, RESOLVE, PUSH = "pull", "resolve", "push"
ALL_CAPABILITIES = frozenset({PULL, RESOLVE, PUSH})
DOCKER_HUB_API = "registry-1.docker.io"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_DIR = "_default"


class HostsConfigError(ValueError):
    """A hosts.toml that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class RegistryHost:
    url: str  # scheme://host[:port][/path]
    capabilities: frozenset[str] = ALL_CAPABILITIES
    ca_files: tuple[str, ...] = ()
    client_certs: tuple[tuple[str, str], ...] = ()  # (certificate, key; "" when the key is in the certificate)
    skip_verify: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    override_path: bool = False
    mirror_of: str = ""  # the registry this host stands in for ("" when it is the registry)

    def api(self, path: str) -> str:
        """The URL of an API path such as `library/busybox/manifests/latest`."""
        base = self.url.rstrip("/") if self.override_path else f"{self.url.rstrip('/')}/v2"
        url = f"{base}/{path}"
        return f"{url}?ns={self.mirror_of}" if self.mirror_of else url

    @property
    def plain_http(self) -> bool:
        return self.url.startswith("http://")

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What aiohttp's `ssl=` wants for this host: False skips verification."""
        if self.plain_http:
            return True
        if self.skip_verify:
            return False
        if not self.ca_files and not self.client_certs:
            return True
        context = ssl.create_default_context()
        for ca in self.ca_files:
            context.load_verify_locations(cafile=ca)
        for cert, key in self.client_certs:
            context.load_cert_chain(cert, key or None)
        return context


def _default_server(registry: str, insecure: tuple[str, ...]) -> str:
    """The registry itself: HTTPS, or HTTP for loopback and insecure registries (as containerd)."""
    host = registry[1:registry.index("]")] if registry.startswith("[") else registry.split(":")[0]
    plain = host in LOOPBACK_HOSTS or registry in insecure
    api = DOCKER_HUB_API if registry == reference.DEFAULT_DOMAIN else registry
    return f"{'http' if plain else 'https'}://{api}"


def _as_url(value: str) -> str:
    return value if "://" in value else f"https://{value}"


def _paths(value: Any, base: Path, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise HostsConfigError(f"{where}: must be a path or a list of paths")
    return tuple(str(p if Path(p).is_absolute() else base / p) for p in items)


def _clients(value: Any, base: Path, where: str) -> tuple[tuple[str, str], ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise HostsConfigError(f"{where}: must be a path, a list of paths, or a list of [cert, key] pairs")
    out = []
    for item in value:
        pair = [item, ""] if isinstance(item, str) else item
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise HostsConfigError(f"{where}: {item!r} is neither a path nor a [cert, key] pair")
        cert, key = (str(p if not p or Path(p).is_absolute() else base / p) for p in pair)
        out.append((cert, key))
    return tuple(out)


def _host(url: str, table: dict[str, Any], base: Path, where: str, mirror_of: str) -> RegistryHost:
    known = {"capabilities", "ca", "client", "skip_verify", "header", "override_path", "dial_timeout", "proxy",
             "host", "server"}
    unknown = set(table) - known
    if unknown:
        raise HostsConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
    capabilities = table.get("capabilities")
    if capabilities is None:
        caps = ALL_CAPABILITIES
    elif isinstance(capabilities, list) and set(capabilities) <= ALL_CAPABILITIES:
        caps = frozenset(capabilities)
    else:
        raise HostsConfigError(f"{where}.capabilities: must be a list of {sorted(ALL_CAPABILITIES)}")
    headers: list[tuple[str, str]] = []
    for name, value in (table.get("header") or {}).items():
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise HostsConfigError(f"{where}.header.{name}: must be a string or a list of strings")
        headers += [(name, v) for v in values]
    for flag in ("skip_verify", "override_path"):
        if not isinstance(table.get(flag, False), bool):
            raise HostsConfigError(f"{where}.{flag}: must be true or false")
    return RegistryHost(url=_as_url(url), capabilities=caps,
                        ca_files=_paths(table["ca"], base, f"{where}.ca") if "ca" in table else (),
                        client_certs=_clients(table["client"], base, f"{where}.client") if "client" in table else (),
                        skip_verify=bool(table.get("skip_verify", False)), headers=tuple(headers),
                        override_path=bool(table.get("override_path", False)), mirror_of=mirror_of)


def parse_hosts_toml(text: str, registry: str, base: Path, where: str,
                     insecure: tuple[str, ...] = ()) -> list[RegistryHost]:
    """The hosts of one hosts.toml for registry, in the order they are tried."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HostsConfigError(f"{where}: not TOML: {exc}") from None
    server = doc.get("server")
    if server is not None and not isinstance(server, str):
        raise HostsConfigError(f"{where}.server: must be a URL")
    server_url = _as_url(server) if server else _default_server(registry, insecure)
    mirrors = doc.get("host") or {}
    if not isinstance(mirrors, dict):
        raise HostsConfigError(f"{where}.host: must be a table of [host.\"URL\"] sections")
    hosts = []
    for url, table in mirrors.items():
        if not isinstance(table, dict):
            raise HostsConfigError(f"{where}.host.{url!r}: must be a table")
        hosts.append(_host(url, table, base, f"{where} host.{url!r}", mirror_of=registry))
    server_table = {k: v for k, v in doc.items() if k not in ("host", "server")}
    hosts.append(_host(server_url, server_table, base, where, mirror_of=""))
    return hosts


def _docker_certs(directory: Path) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    cas = tuple(str(p) for p in sorted(directory.glob("*.crt")))
    clients = tuple((str(cert), str(cert.with_suffix(".key"))) for cert in sorted(directory.glob("*.cert"))
                    if cert.with_suffix(".key").exists())
    return cas, clients


@dataclass
class RegistryHosts:
    """The hosts to try per registry, read from a config directory (re-read on each pull:
    changes need no restart, as containerd's)."""

    config_dir: Path | None = None
    insecure_registries: tuple[str, ...] = ()  # HTTP for these, when nothing is configured for them
    _cache: dict[Path, tuple[float, list[RegistryHost]]] = field(default_factory=dict)

    def _namespaces(self, registry: str) -> list[str]:
        names = [registry.replace(":", "_") + "_", registry] if ":" in registry and not registry.startswith("[") \
            else [registry]
        return [*names, DEFAULT_DIR]

    def deliberate(self, registry: str) -> bool:
        """Whether this registry is one the machine's owner runs on purpose — on a loopback
        address, or configured by a hosts.toml of its own (not `_default`) — and so is asked
        again for a tag whose image is already in the store (a pushed `:latest` is seen)."""
        host = registry[1:registry.index("]")] if registry.startswith("[") else registry.split(":")[0]
        if host in LOOPBACK_HOSTS:
            return True
        if self.config_dir is None:
            return False
        return any((self.config_dir / name / "hosts.toml").is_file()
                   for name in self._namespaces(registry) if name != DEFAULT_DIR)

    def hosts_for(self, registry: str) -> list[RegistryHost]:
        default = RegistryHost(url=_default_server(registry, self.insecure_registries))
        if self.config_dir is None:
            return [default]
        for name in self._namespaces(registry):
            directory = self.config_dir / name
            config = directory / "hosts.toml"
            if config.is_file():
                stamp = config.stat().st_mtime
                cached = self._cache.get(config)
                if cached is None or cached[0] != stamp or name == DEFAULT_DIR:
                    hosts = parse_hosts_toml(config.read_text(), registry, directory, str(config),
                                             self.insecure_registries)
                    self._cache[config] = (stamp, hosts)
                    return hosts
                return cached[1]
            if name != DEFAULT_DIR and directory.is_dir():
                cas, clients = _docker_certs(directory)
                if cas or clients:
                    return [RegistryHost(url=default.url, ca_files=cas, client_certs=clients)]
        return [default]

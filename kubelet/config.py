"""The kubelet's configuration: flags, or a YAML/JSON file with the same keys
(upstream KubeletConfiguration's names where one exists)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["KubeletConfig", "ConfigError", "load_config_file"]


class ConfigError(ValueError):
    pass


@dataclass
class KubeletConfig:
    node_name: str
    apiserver: str
    root_dir: Path = Path("/var/lib/kubeling/kubelet")  # per node: <root_dir>/<node_name>
    pod_logs_dir: Path = Path("/var/log/pods")
    # The CRI runtime: empty hosts kubeling's own (kubelet/cri) in this process on
    # <state>/cri.sock; "unix:///path" drives another runtime.v1 server.
    container_runtime_endpoint: str = ""
    cni_conf_dir: Path | None = None  # default <state>/net.d
    cni_bin_dirs: list[str] = field(default_factory=lambda: ["/usr/lib/cni", "/opt/cni/bin"])
    runc_root: Path | None = None  # default /run/kubeling/runc/<node_name>
    cluster_cidr: str = "10.88.0.0/16"
    node_ip: str = "127.0.0.1"
    address: str = "127.0.0.1"  # the daemon endpoint (logs) listens here
    port: int = 0  # 0: a free port, reported in the Node's daemonEndpoints
    max_pods: int = 110
    node_labels: dict[str, str] = field(default_factory=dict)
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 60.0
    node_lease_duration_seconds: int = 40
    sync_frequency: float = 30.0  # every pod is synced at least this often
    pleg_relist_period: float = 1.0
    housekeeping_interval: float = 2.0  # orphaned pods
    container_gc_period: float = 60.0  # a pod's dead containers are collected at most this often
    crash_loop_backoff_initial: float = 10.0
    crash_loop_backoff_max: float = 300.0
    cluster_domain: str = "cluster.local"  # pods' FQDNs: <hostname>.<subdomain>.<namespace>.svc.<this>
    # The cluster DNS's ClusterIPs (pods' nameservers for dnsPolicy ClusterFirst; none: the
    # node's resolv.conf) and the Services' range (a route to it through the pods' bridge).
    cluster_dns: list[str] = field(default_factory=list)
    service_cidr: str = ""
    resolv_conf: Path = Path("/etc/resolv.conf")
    # The hosted runtime's: registry mirrors (hosts.toml directory) and its streaming server
    registry_config_dir: Path | None = None
    streaming_listen: str = "127.0.0.1:0"
    # Pods' cgroups go under this path in every hierarchy ("": the runtime's default).
    # A kubelet in a container gives its container's own cgroup: the engine removes it,
    # and every pod cgroup under it, with the container.
    cgroup_root: str = ""
    # Route the other nodes' pod CIDRs through their InternalIPs (flannel's host-gw),
    # for kubelets that each have their own network namespace (compose, separate hosts).
    pod_routes: bool = False
    # Security, as upstream's flags: the kubeconfig with this node's credentials (its
    # client certificate) for the apiserver, else `apiserver` in plain text; the daemon
    # endpoint's serving certificate, and the CA whose client certificates it verifies
    # (only the apiserver's, `kube-apiserver-kubelet-client`, may use it beyond /healthz).
    kubeconfig: Path | None = None
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    client_ca_file: Path | None = None

    def check(self) -> None:
        """Refuse values no kubelet can run with (ConfigError naming the setting)."""
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ConfigError("tlsCertFile and tlsPrivateKeyFile go together")
        if self.client_ca_file is not None and self.tls_cert_file is None:
            raise ConfigError("clientCAFile needs tlsCertFile: client certificates come with TLS")
        if self.node_lease_duration_seconds <= 0:
            raise ConfigError("invalid configuration: nodeLeaseDurationSeconds must be greater than 0")
        if self.node_status_update_frequency <= 0:
            raise ConfigError(f"invalid configuration: nodeStatusUpdateFrequency (--node-status-update-frequency) "
                              f"{self.node_status_update_frequency} must be > 0")
        if self.cgroup_root and not self.cgroup_root.startswith("/"):
            raise ConfigError(f"cgroupRoot {self.cgroup_root!r}: expected an absolute cgroup path")
        for ip in self.cluster_dns:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise ConfigError(f"clusterDNS {ip!r}: expected an IP address") from None
        if self.service_cidr:
            try:
                ipaddress.ip_network(self.service_cidr, strict=True)
            except ValueError as err:
                raise ConfigError(f"serviceCIDR {self.service_cidr!r}: {err}") from None

    @property
    def state_dir(self) -> Path:
        return self.root_dir / self.node_name

    def apply(self, values: dict[str, Any]) -> None:
        """Set fields from a config file's mapping (camelCase or snake_case keys)."""
        known = {f.name for f in dataclasses.fields(self)}
        for key, value in values.items():
            name = _snake(key)
            if name not in known:
                raise ConfigError(f"unknown kubelet config key {key!r}")
            setattr(self, name, _coerce(key, name, getattr(self, name), value))


_OPTIONAL_PATHS = ("cni_conf_dir", "runc_root", "registry_config_dir", "kubeconfig", "tls_cert_file",
                   "tls_private_key_file", "client_ca_file")


def _coerce(key: str, name: str, current: Any, value: Any) -> Any:
    def wrong() -> ConfigError:
        return ConfigError(f"kubelet config {key}: expected {type(current).__name__}, got {value!r}")

    if name in _OPTIONAL_PATHS or isinstance(current, Path):
        if value in (None, "") and name in _OPTIONAL_PATHS:
            return None
        if not isinstance(value, str) or not value:
            raise wrong()
        return Path(value)
    if isinstance(current, bool) or isinstance(value, bool):  # bool is an int: only for booleans
        if isinstance(current, bool) and isinstance(value, bool):
            return value
        raise wrong()
    if isinstance(current, float) and isinstance(value, (int, float)):
        return float(value)
    if isinstance(current, list) and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if isinstance(current, dict) and isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return value
    if type(current) in (int, str) and type(value) is type(current):
        return value
    raise wrong()


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key).lstrip("_").replace("-", "_")


def load_config_file(path: Path) -> dict[str, Any]:
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    data.pop("apiVersion", None)
    data.pop("kind", None)
    return data

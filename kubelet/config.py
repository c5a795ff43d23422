"""The kubelet's configuration: flags, or a YAML/JSON file with the same keys
(upstream KubeletConfiguration's names where one exists)."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubelet.eviction import DEFAULT_HARD, parse_grace_periods, parse_thresholds
from kubeling import options
from kubeling.options import flag, overrides
from kubeling.quantity import QuantityError, parse_quantity

__all__ = ["KubeletConfig", "ConfigError", "load_config_file", "from_command_line"]


class ConfigError(options.ConfigError):
    """A kubelet configuration that cannot run (flags or the --config file): the kubelet exits 2."""


def _labels(text: str) -> dict[str, str]:
    out = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected k=v, got {pair!r}")
        out[key] = value
    return out


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text: str) -> tuple[str, str, str]:
    """`key[=value]:Effect` (upstream's --register-with-taints form) -> (key, value, effect)."""
    rest, sep, effect = text.rpartition(":")
    key, _, value = rest.partition("=")
    if not sep or not key or effect not in TAINT_EFFECTS:
        raise ValueError(f"taint {text!r}: expected key[=value]:Effect with Effect one of {', '.join(TAINT_EFFECTS)}")
    return key, value, effect


def _taints(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",") if t.strip()]
    for taint in out:
        try:
            parse_taint(taint)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return out


def _signal_map(separator: str) -> Any:
    """`memory.available<100Mi,nodefs.available<10%` (or `=` for grace periods) -> a mapping."""
    def parse(text: str) -> dict[str, str]:
        out = {}
        for pair in text.split(","):
            key, sep, value = pair.strip().partition(separator)
            if not sep or not key or not value:
                raise argparse.ArgumentTypeError(f"expected signal{separator}value, got {pair!r}")
            out[key] = value
        return out
    return parse


def _csv(text: str) -> list[str]:
    return [ip.strip() for ip in text.split(",") if ip.strip()]


@dataclass
class KubeletConfig:
    """The kubelet's settings: a flag each where upstream's kubelet has one (flags given
    win over the --config file, whose keys are KubeletConfiguration's names)."""

    node_name: str = flag(help="the Node this kubelet registers and runs pods for")
    apiserver: str = flag("", "the apiserver's gRPC address HOST:PORT (plain text; or --kubeconfig)")
    root_dir: Path = flag(Path("/var/lib/kubeling/kubelet"), "state directory root (default "
                          "/var/lib/kubeling/kubelet; each node uses <root-dir>/<node-name>)", type=Path)
    pod_logs_dir: Path = flag(Path("/var/log/pods"), "container logs (default /var/log/pods)", type=Path)
    # The CRI runtime: empty hosts kubeling's own (cri/) in this process on
    # <state>/cri.sock; "unix:///path" drives another runtime.v1 server.
    container_runtime_endpoint: str = flag("", "use this CRI socket (unix:///path) instead of hosting kubeling's "
                                           "own runtime")
    cni_conf_dir: Path | None = flag(None, "CNI configs (default <state>/net.d, written from the pod CIDR)", type=Path)
    cni_bin_dirs: list[str] = flag(help="CNI plugin directory (repeatable; default /usr/lib/cni and /opt/cni/bin)",
                                   name="cni-bin-dir", action="append",
                                   default_factory=lambda: ["/usr/lib/cni", "/opt/cni/bin"])
    runc_root: Path | None = flag(None, "runc state (default /run/kubeling/runc/<node-name>)", type=Path)
    cluster_cidr: str = flag("10.88.0.0/16", "the pod network pods may route to (default 10.88.0.0/16)")
    node_ip: str = flag("127.0.0.1", "the node's InternalIP (default 127.0.0.1)")
    address: str = flag("127.0.0.1", "daemon endpoint (logs, exec) listen address (default 127.0.0.1)")
    port: int = flag(0, "daemon endpoint port (default 0: a free one, reported in the Node's daemonEndpoints)",
                     type=int)
    max_pods: int = flag(110, "pods this node takes (default 110)", type=int)
    node_labels: dict[str, str] = flag(help="extra node labels, k=v,k2=v2 (added to the --config file's)",
                                       type=_labels, default_factory=dict)
    host_path_mounts: dict[str, str] = flag(
        help="node paths that are other machine paths, NODE_PATH=MACHINE_PATH,... (kind's extraMounts): a hostPath "
             "volume under NODE_PATH is the machine's MACHINE_PATH (default: none, a node's paths are the machine's)",
        type=_labels, default_factory=dict)
    register_with_taints: list[str] = flag(
        help="taints the Node is registered with, key[=value]:Effect,... (only when it is created, as upstream's)",
        type=_taints, default_factory=list)
    node_status_update_frequency: float = flag(10.0, "seconds between the node status computations (default 10)",
                                               type=float)
    node_status_report_frequency: float = 60.0
    node_lease_duration_seconds: int = flag(40, "the node Lease's duration; the kubelet renews it every quarter of "
                                            "it (default 40). Keep --node-monitor-grace-period of the controller "
                                            "manager at least this long", type=int)
    sync_frequency: float = 30.0  # every pod is synced at least this often
    pleg_relist_period: float = 1.0
    housekeeping_interval: float = 2.0  # orphaned pods
    container_gc_period: float = 60.0  # a pod's dead containers are collected at most this often
    crash_loop_backoff_initial: float = 10.0
    crash_loop_backoff_max: float = 300.0
    cluster_domain: str = flag("cluster.local", "DNS domain of the cluster: pods' FQDNs end with it (default "
                               "cluster.local)")
    # The cluster DNS's ClusterIPs (pods' nameservers for dnsPolicy ClusterFirst; none: the
    # node's resolv.conf) and the Services' range (a route to it through the pods' bridge).
    cluster_dns: list[str] = flag(help="comma-separated ClusterIPs of the cluster DNS: pods' nameservers for "
                                  "dnsPolicy ClusterFirst (default: none, the node's resolv.conf)", type=_csv,
                                  default_factory=list)
    service_cidr: str = flag("", "the Services' range: pods get a route to it through their bridge (default: none)",
                             name="service-cluster-ip-range")
    # Clients on the nodes' own network reach pods with their address kept (a load balancer
    # of externalTrafficPolicy Local): the answers need a way back, and pods have no default route.
    node_network: str = flag("", "the nodes' network: pods get a route to it through their bridge, so that "
                             "clients there whose address is kept get answers (default: none)")
    resolv_conf: Path = flag(Path("/etc/resolv.conf"), "the node's resolver config for dnsPolicy Default (default "
                             "/etc/resolv.conf)", type=Path)
    # The hosted runtime's: registry mirrors (hosts.toml directory) and its streaming server
    registry_config_dir: Path | None = flag(None, "registry mirrors, containerd's hosts.toml layout: "
                                            "DIR/<registry>/hosts.toml", type=Path)
    streaming_listen: str = flag("127.0.0.1:0", "HOST:PORT of the runtime's exec/attach/port-forward server "
                                 "(default 127.0.0.1:0: loopback, a free port)")
    # Pods' cgroups go under this path in every hierarchy ("": the runtime's default).
    # A kubelet in a container gives its container's own cgroup: the engine removes it,
    # and every pod cgroup under it, with the container.
    cgroup_root: str = flag("", "pods' cgroups go under this path (default: the runtime's)")
    # Node allocatable: capacity less these (and the hard memory eviction threshold).
    system_reserved: dict[str, str] = flag(help="resources kept for the system, e.g. cpu=100m,memory=100Mi "
                                           "(default: none)", type=_labels, default_factory=dict)
    kube_reserved: dict[str, str] = flag(help="resources kept for the Kubernetes components (default: none)",
                                         type=_labels, default_factory=dict)
    # Container log rotation (kubelet.logrotation)
    container_log_max_size: str = flag("10Mi", "a container's log is rotated past this size (default 10Mi)")
    container_log_max_files: int = flag(5, "log files kept per container, the live one included (default 5)",
                                        type=int)
    container_log_monitor_interval: float = 10.0  # seconds between the log manager's looks (upstream's)
    # Image garbage collection (kubelet.imagegc)
    image_gc_high_threshold_percent: int = flag(85, "image filesystem use (percent) above which unused images are "
                                                "removed (default 85)", type=int, name="image-gc-high-threshold")
    image_gc_low_threshold_percent: int = flag(80, "...down to this use (default 80)", type=int,
                                               name="image-gc-low-threshold")
    image_minimum_gc_age: float = flag(120.0, "seconds an image stays before it may be collected (default 120)",
                                       type=float)
    image_gc_period: float = 300.0  # seconds between the collector's looks (upstream's 5 min)
    # The eviction manager (kubelet.eviction): thresholds as upstream's flags and keys.
    eviction_hard: dict[str, str] = flag(help="hard eviction thresholds, e.g. memory.available<100Mi,"
                                         "nodefs.available<10%% (default: upstream's)", type=_signal_map("<"),
                                         default_factory=lambda: dict(DEFAULT_HARD))
    eviction_soft: dict[str, str] = flag(help="soft eviction thresholds, each with a grace period (default: none)",
                                         type=_signal_map("<"), default_factory=dict)
    eviction_soft_grace_period: dict[str, str] = flag(help="how long a soft threshold must hold, e.g. "
                                                      "memory.available=1m30s", type=_signal_map("="),
                                                      default_factory=dict)
    eviction_pressure_transition_period: float = flag(300.0, "seconds a pressure condition stays after its "
                                                      "threshold stopped being met (default 300)", type=float)
    eviction_max_pod_grace_period: int = flag(0, "at most this many seconds for a pod evicted on a soft threshold "
                                              "(default 0: its own grace period)", type=int)
    eviction_monitoring_period: float = 10.0  # seconds between the eviction manager's looks (upstream's 10 s)
    allowed_unsafe_sysctls: list[str] = flag(help="comma-separated unsafe sysctls (or patterns ending in *) pods may "
                                             "set besides the safe set (default: none)", type=_csv,
                                             default_factory=list)
    # Route the other nodes' pod CIDRs through their InternalIPs (flannel's host-gw),
    # for kubelets that each have their own network namespace (compose, separate hosts).
    pod_routes: bool = flag(False, "route other nodes' pod CIDRs through their InternalIPs (kubelets in their own "
                            "network namespaces, e.g. docker-compose)", action="store_true")
    # Security, as upstream's flags: the kubeconfig with this node's credentials (its
    # client certificate) for the apiserver, else `apiserver` in plain text; the daemon
    # endpoint's serving certificate, and the CA whose client certificates it verifies
    # (only the apiserver's, `kube-apiserver-kubelet-client`, may use it beyond /healthz).
    kubeconfig: Path | None = flag(None, "this node's credentials for the apiserver (a kubeconfig with its client "
                                   "certificate); default: --apiserver, plain text", type=Path)
    tls_cert_file: Path | None = flag(None, "the daemon endpoint's serving certificate (default: plain HTTP)",
                                      type=Path)
    tls_private_key_file: Path | None = flag(None, "its private key", type=Path)
    client_ca_file: Path | None = flag(None, "verify callers' client certificates against this CA; only the "
                                       "apiserver's may use more than /healthz", type=Path)
    # Certificates that renew themselves (kubelet/certificate.py): the client one through
    # the auto-approved kubernetes.io/kube-apiserver-client-kubelet signer, the serving one
    # through kubernetes.io/kubelet-serving (approved by a person or an approver of one's own).
    rotate_certificates: bool = flag(False, "renew the client certificate through CertificateSigningRequests as it "
                                     "nears expiry (needs a --kubeconfig with one)", action="store_true")
    rotate_server_certificates: bool = flag(False, "renew the serving certificate the same way (signer "
                                            "kubernetes.io/kubelet-serving; needs --tls-cert-file for the first)",
                                            action="store_true")
    cert_dir: Path | None = flag(None, "where renewed certificates are kept (default <state>/pki)", type=Path)

    def check(self) -> None:
        """Refuse values no kubelet can run with (ConfigError naming the setting)."""
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ConfigError("tlsCertFile and tlsPrivateKeyFile go together")
        if self.rotate_server_certificates and self.tls_cert_file is None:
            raise ConfigError("rotateServerCertificates needs tlsCertFile and tlsPrivateKeyFile: the first serving "
                              "certificate, renewed from then on")
        if self.rotate_certificates and self.kubeconfig is None:
            raise ConfigError("rotateCertificates needs a kubeconfig with this node's client certificate")
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
        try:
            if parse_quantity(self.container_log_max_size).int_value() <= 0:
                raise QuantityError("not positive")
        except QuantityError:
            raise ConfigError(f"invalid configuration: containerLogMaxSize {self.container_log_max_size!r} must be "
                              "a positive quantity") from None
        if self.container_log_max_files < 2:
            raise ConfigError(f"invalid configuration: containerLogMaxFiles ({self.container_log_max_files}) must "
                              "be greater than 1")
        for key, percent in (("imageGCHighThresholdPercent", self.image_gc_high_threshold_percent),
                             ("imageGCLowThresholdPercent", self.image_gc_low_threshold_percent)):
            if not 0 <= percent <= 100:
                raise ConfigError(f"invalid configuration: {key} ({percent}) must be between 0 and 100, inclusive")
        if self.image_gc_low_threshold_percent > self.image_gc_high_threshold_percent:
            raise ConfigError(f"invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) "
                              f"{self.image_gc_low_threshold_percent} must be less than imageGCHighThresholdPercent "
                              f"(--image-gc-high-threshold) {self.image_gc_high_threshold_percent}")
        for key, reserved in (("systemReserved", self.system_reserved), ("kubeReserved", self.kube_reserved)):
            for name, value in reserved.items():
                try:
                    if parse_quantity(value).milli_value() < 0:
                        raise QuantityError("negative")
                except QuantityError:
                    raise ConfigError(f"{key}: {name}={value!r} is not a non-negative quantity") from None
        try:
            parse_thresholds(self.eviction_hard)
            parse_thresholds(self.eviction_soft, parse_grace_periods(self.eviction_soft_grace_period))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for inside, outside in self.host_path_mounts.items():
            if not inside.startswith("/") or not outside.startswith("/"):
                raise ConfigError(f"hostPathMounts {inside}={outside}: absolute paths are needed")
        for taint in self.register_with_taints:
            try:
                parse_taint(taint)
            except ValueError as err:
                raise ConfigError(f"registerWithTaints: {err}") from None
        for name, cidr in (("serviceCIDR", self.service_cidr), ("nodeNetwork", self.node_network)):
            if not cidr:
                continue
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as err:
                raise ConfigError(f"{name} {cidr!r}: {err}") from None

    @property
    def reserved(self) -> dict[str, str]:
        """system-reserved and kube-reserved summed per resource."""
        out: dict[str, str] = {}
        for name in {*self.system_reserved, *self.kube_reserved}:
            total = sum(parse_quantity(r.get(name, "0")).milli_value() for r in (self.system_reserved,
                                                                                 self.kube_reserved))
            out[name] = f"{total}m"
        return out

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
                   "tls_private_key_file", "client_ca_file", "cert_dir")


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
    """KubeletConfiguration's camelCase (acronyms whole: imageGCHighThresholdPercent,
    clusterDNS) as the field's name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", key).lower().replace("-", "_")


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


def from_command_line(args: argparse.Namespace) -> KubeletConfig:
    """The configuration a kubelet runs with: the --config file's settings, then the flags
    given (parsed with their defaults suppressed), checked."""
    if not getattr(args, "apiserver", "") and getattr(args, "kubeconfig", None) is None:
        raise ConfigError("--apiserver or --kubeconfig is required")
    config = KubeletConfig(node_name=args.node_name)
    if args.config is not None:
        config.apply(load_config_file(args.config))
    given = overrides(KubeletConfig, args)
    labels = given.pop("node_labels", {})
    for name, value in given.items():
        setattr(config, name, value)
    config.node_labels.update(labels)  # the flag's labels are added to the file's, as upstream's
    config.check()
    return config

"""A cluster's plan: ports and names chosen once per `up`, each component's command line,
and its credentials: the cluster PKI under `<state-dir>/pki` (kubeling.pki, made or
brought up to date on every `up`) and a kubeconfig per client (the admin's is the one
users get; `scheduler.conf`, `kubelet-<node>.conf`), as kubeadm lays them out."""

from __future__ import annotations

import ipaddress
import json
import ssl
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from cluster.certs import AUDIT_POLICY, ENCRYPTION_CONFIG, write_credentials
from cluster.etcd import etcd_args, etcd_binary
from cluster.hosts import choose_subnet, host_ip, netns_name
from cluster.registry import DEFAULT_NAME as DEFAULT_REGISTRY_NAME
from cluster.registry import LocalRegistry
from csi.hostpath import DRIVER_NAME
from kubelet.config import KubeletConfig
from kubeling.atomicfile import replace_file
from kubeling.client import Client, TLSConfig
from kubeling.netutil import free_port

__all__ = ["CLUSTER_CIDR", "SERVICE_CIDR", "ClusterPlan", "commands", "new_plan"]

CLUSTER_CIDR = "10.88.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"  # the apiserver's default --service-cluster-ip-range


@dataclass
class ClusterPlan:
    """Ports and names, chosen once per `up` and written to cluster.json."""

    state_dir: str
    nodes: list[str]
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    scheduler_metrics_port: int
    rest_port: int = 0  # the Kubernetes REST API (kubectl)
    controller_manager_metrics_port: int = 0
    # More etcd members (--etcd-members N): [client port, peer port] of members 2..N.
    etcd_more_ports: list[list[int]] = field(default_factory=list)
    # Several apiservers (--apiservers N): [gRPC port, REST port] of each, behind HAProxy
    # on apiserver_port and rest_port; empty: one apiserver on those ports itself.
    apiserver_ports: list[list[int]] = field(default_factory=list)
    # The underlay /24: a bridge of its own whose first address is the control plane's
    # (and, without --hosts, every node's), reachable from pods and routing nowhere; with
    # --hosts, each kubelet's network namespace has an address on it too. ("": loopback only,
    # a plan from before Services.)
    hosts_subnet: str = ""
    hosts: bool = False
    dns_port: int = 0  # the cluster DNS, on the control plane's address (UDP and TCP)
    metrics_port: int = 0  # the metrics server, on the control plane's address (0: a plan from before it)
    node_monitor_grace_period: float = 40.0  # upstream's defaults; shorter for fault tests
    default_unreachable_toleration_seconds: int = 300
    cluster_cidr: str = CLUSTER_CIDR
    otlp_endpoint: str = ""  # every component exports its spans here ("" : nowhere)
    registry_config_dir: str = ""  # the kubelets' registry mirrors (hosts.toml directory); "" : none
    network_policy: bool = True  # a network policy controller beside each kube-proxy (--no-network-policy: none)
    # The ingress controller's HAProxy, on the first node's address (0: none, --no-ingress or a plan from before)
    ingress_http_port: int = 0
    ingress_https_port: int = 0
    # The local registry (cluster/registry.py) on the underlay's gateway and loopback (0: none,
    # --no-registry or a plan from before), and the name pods' images may give it too
    registry_port: int = 0
    registry_name: str = ""
    service_cidr: str = SERVICE_CIDR
    dns_domain: str = "cluster.local"
    # Per node, from a cluster config (cluster/clusterconfig.py): labels `up` sets with the
    # admin's credentials once the node registered (as kubeadm's mark-control-plane: a kubelet
    # may not give itself node-role labels), taints it registers with, its KubeletConfiguration
    # settings (written to kubelet-<node>.yaml), and its paths that are other machine paths
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    node_taints: dict[str, list[str]] = field(default_factory=dict)
    node_kubelet: dict[str, dict[str, Any]] = field(default_factory=dict)
    node_mounts: dict[str, dict[str, str]] = field(default_factory=dict)
    # Host ports relayed to nodes' ports (kind's extraPortMappings): [listen address, host port,
    # node, node port], by the `port-mappings` HAProxy
    port_mappings: list[list[Any]] = field(default_factory=list)
    name: str = "kubeling"  # `up --name`
    user_kubeconfig: str = ""  # where the context kubeling-<name> was merged ("": nowhere)
    supervisor_pid: int = 0
    ready: bool = False
    error: str = ""
    components: dict[str, int] = field(default_factory=dict)  # name -> pid, kept current by the supervisor

    @property
    def etcd_members(self) -> list[tuple[str, int, int]]:
        """(component name, client port, peer port) of each member; one alone is `etcd`
        (its data in <state-dir>/etcd, as before clusters existed), several `etcd-1`..N."""
        ports = [(self.etcd_port, self.etcd_peer_port), *((c, p) for c, p in self.etcd_more_ports)]
        if len(ports) == 1:
            return [("etcd", *ports[0])]
        return [(f"etcd-{i}", c, p) for i, (c, p) in enumerate(ports, 1)]

    @property
    def apiserver_backends(self) -> list[tuple[str, int, int]]:
        """(component name, gRPC port, REST port) of each apiserver."""
        if not self.apiserver_ports:
            return [("apiserver", self.apiserver_port, self.rest_port)]
        return [(f"apiserver-{i}", g, r) for i, (g, r) in enumerate(self.apiserver_ports, 1)]

    def write_haproxy_config(self) -> None:
        """HAProxy in front of the apiservers as kubeadm's HA guide has it: TCP (TLS passes
        through to the apiservers), a server taken out when its /readyz fails."""
        def backend(name: str, port_of: int) -> str:
            servers = "\n".join(f"    server {n} 127.0.0.1:{(g, r)[port_of]} port {r}"
                                 for n, g, r in self.apiserver_backends)
            return (f"backend {name}\n    option httpchk GET /readyz\n    http-check expect status 200\n"
                    "    default-server check check-ssl verify none inter 1s fall 2 rise 1\n" + servers + "\n")
        text = ("global\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n"
                "    timeout client 24h\n    timeout server 24h\n    timeout tunnel 24h\n    timeout check 2s\n\n"
                f"frontend kubeling-grpc\n    bind {self.apiserver}\n    default_backend kubeling-grpc\n\n"
                + backend("kubeling-grpc", 0) + "\n"
                + f"frontend kubeling-rest\n    bind {self.rest}\n    default_backend kubeling-rest\n\n"
                + backend("kubeling-rest", 1))
        replace_file(self.root / "haproxy.cfg", text.encode(), 0o644)

    @property
    def etcd_endpoints(self) -> str:
        return ",".join(f"127.0.0.1:{client}" for _, client, _ in self.etcd_members)

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfig(self) -> Path:
        """The admin's (kubernetes-admin in system:masters)."""
        return self.root / "kubeconfig"

    def tls(self, identity: str) -> TLSConfig:
        root = self.pki
        return TLSConfig.from_files(root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key")

    def prepare_credentials(self) -> list[str]:
        """The PKI and every kubeconfig, made or renewed; what was (re)issued."""
        return write_credentials(self.root, self.pki, {node: [self.node_ip(node)] for node in self.nodes},
                                 rest=self.rest, grpc=self.apiserver, admin=self.kubeconfig,
                                 server_names=(self.api_host,) if self.hosts_subnet else ())

    @property
    def proxies(self) -> dict[str, list[str]]:
        """kube-proxy per network namespace -> the nodes in it (their pods are its local ones);
        none without nodes (a control plane alone has no pod traffic to route)."""
        if not self.nodes:
            return {}
        if self.hosts:
            return {f"kube-proxy-{node}": [node] for node in self.nodes}
        return {"kube-proxy": list(self.nodes)}

    @property
    def policy_controllers(self) -> dict[str, list[str]]:
        """The network policy controller per network namespace -> the nodes in it, as kube-proxy's."""
        if not self.network_policy:
            return {}
        return {name.replace("kube-proxy", "network-policy", 1): nodes for name, nodes in self.proxies.items()}

    @property
    def ingress_address(self) -> str:
        """Where the ingress controller's HAProxy listens: the first node's address (its
        host's, with --hosts: pods are reached from there without a hop)."""
        return self.node_ip(self.nodes[0]) if self.nodes else ""

    @property
    def dns_ip(self) -> str:
        """kube-dns's ClusterIP: the range's tenth address, as kubeadm's (10.96.0.10)."""
        return str(ipaddress.ip_network(self.service_cidr)[10])

    def kubelet_config_file(self, node: str) -> Path | None:
        """The node's KubeletConfiguration settings from the cluster config, if it has any."""
        return self.root / f"kubelet-{node}.yaml" if self.node_kubelet.get(node) else None

    def write_node_files(self) -> None:
        """Each node's kubelet config file, and the port mappings' HAProxy configuration."""
        for node in self.nodes:
            path = self.kubelet_config_file(node)
            if path is not None:
                replace_file(path, yaml.safe_dump({"apiVersion": "kubelet.config.k8s.io/v1beta1",
                                                   "kind": "KubeletConfiguration", **self.node_kubelet[node]},
                                                  sort_keys=False).encode(), 0o644)
        if self.port_mappings:
            text = "global\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n" \
                   "    timeout client 1h\n    timeout server 1h\n"
            for listen, port, node, node_port in self.port_mappings:
                text += (f"\nfrontend map-{listen}-{port}\n    bind {listen}:{port}\n"
                         f"    default_backend map-{listen}-{port}\n"
                         f"\nbackend map-{listen}-{port}\n    server {node} {self.node_ip(node)}:{node_port}\n")
            replace_file(self.root / "port-mappings.cfg", text.encode(), 0o644)

    @property
    def registry(self) -> bool:
        return bool(self.registry_port)

    def otlp_endpoint_for(self, in_host: bool) -> str:
        """Where a component sends its spans: a loopback endpoint is this machine's, which a
        host's network namespace reaches at the underlay's gateway (a collector listening
        on loopback only is out of the hosts' reach; Jaeger's published ports are not)."""
        parts = urlsplit(self.otlp_endpoint)
        if not in_host or parts.hostname not in ("127.0.0.1", "localhost") or not self.hosts_subnet:
            return self.otlp_endpoint
        return parts._replace(netloc=f"{self.api_host}:{parts.port}" if parts.port else self.api_host).geturl()

    def local_registry(self) -> LocalRegistry:
        return LocalRegistry(self.root / "registry", self.api_host, self.registry_port, self.registry_name,
                             self.registry_config_dir)

    @property
    def runtime_registry_config_dir(self) -> str:
        """The hosts.toml directory the nodes' runtimes read: the local registry's (the
        user's entries linked into it), else the user's own."""
        return str(self.local_registry().hosts_dir) if self.registry else self.registry_config_dir

    @property
    def addons(self) -> list[str]:
        """The components stopped after the nodes, before the apiservers."""
        return ["scheduler", "controller-manager", "cluster-dns", "metrics-server", "ingress-controller",
                "registry", "registry-loopback", "port-mappings", *self.proxies, *self.policy_controllers]

    @property
    def ingress(self) -> bool:
        return bool(self.nodes and self.ingress_http_port and self.ingress_https_port)

    def netns(self, node: str) -> str:
        """The network namespace of the node's host (with --hosts)."""
        return netns_name(node, self.name)

    def enter(self, node: str) -> list[str]:
        """The prefix that runs a command on the node's host: in its network namespace with
        --hosts, nothing without (the machine is every node's host)."""
        return ["nsenter", f"--net=/run/netns/{self.netns(node)}"] if self.hosts else []

    @property
    def context(self) -> str:
        """The cluster's context in the user's kubeconfig, as kind's `kind-<name>`."""
        return f"kubeling-{self.name}"

    def admin_client(self, timeout: float | None = 30.0, wait_for_ready: bool = True, address: str = "") -> Client:
        """The admin's client, of the cluster's API (or of one apiserver at `address`)."""
        return Client(address or self.apiserver, tls=self.tls("admin"), timeout=timeout,
                      wait_for_ready=wait_for_ready)

    def etcd_ssl(self) -> ssl.SSLContext:
        """What etcd's /health takes (a certificate from the cluster CA)."""
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(self.pki / "apiserver-etcd-client.crt", self.pki / "apiserver-etcd-client.key")
        return ctx

    @property
    def api_host(self) -> str:
        """Where the API listens: loopback, or the underlay's gateway for hosts to reach."""
        return host_ip(self.hosts_subnet, 0) if self.hosts_subnet else "127.0.0.1"

    def node_ip(self, node: str) -> str:
        """Its host's address on the underlay (without --hosts, the machine's: the control plane's)."""
        if not self.hosts_subnet:
            return "127.0.0.1"
        return host_ip(self.hosts_subnet, self.nodes.index(node) + 1) if self.hosts else self.api_host

    @property
    def apiserver(self) -> str:
        return f"{self.api_host}:{self.apiserver_port}"

    @property
    def rest(self) -> str:
        return f"{self.api_host}:{self.rest_port}"

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    def kubelet_config(self, node: str) -> KubeletConfig:
        # Upstream's kubelets heartbeat (renew their Lease, compute their status) every 10 s,
        # a quarter of the 40 s grace period. A shorter grace keeps that ratio: with a grace
        # shorter than the heartbeat, every node turned Unknown, was tainted and lost its pods
        # between two heartbeats (--node-monitor-grace-period 4 of the fault test).
        heartbeat = min(10.0, self.node_monitor_grace_period / 4)
        return KubeletConfig(node_name=node, apiserver=self.apiserver, root_dir=self.root / "kubelet",
                             node_lease_duration_seconds=max(1, round(heartbeat * 4)),
                             node_status_update_frequency=heartbeat,
                             pod_logs_dir=self.root / "pod-logs", runc_root=self.runc_root(node),
                             cluster_cidr=self.cluster_cidr, kubeconfig=self.root / f"kubelet-{node}.conf",
                             tls_cert_file=self.pki / "kubelet" / f"{node}.crt",
                             tls_private_key_file=self.pki / "kubelet" / f"{node}.key",
                             client_ca_file=self.pki / "ca.crt", node_ip=self.node_ip(node),
                             rotate_certificates=True,  # kubeadm's default: the client certificate renews itself
                             address=self.node_ip(node), pod_routes=self.hosts, cluster_dns=[self.dns_ip],
                             cluster_domain=self.dns_domain, service_cidr=self.service_cidr,
                             node_network=self.hosts_subnet, host_path_mounts=dict(self.node_mounts.get(node, {})),
                             register_with_taints=list(self.node_taints.get(node, [])))

    def runc_root(self, node: str) -> Path:
        return self.root / "runc" / node

    def csi_state_dir(self, node: str) -> Path:
        """The node's hostpath volumes (a directory each) and the driver's state."""
        return self.root / "csi-hostpath" / node

    def save(self) -> None:
        replace_file(self.root / "cluster.json", json.dumps(asdict(self), indent=2).encode(), 0o644)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterPlan | None:
        try:
            return cls(**json.loads((state_dir / "cluster.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None


def new_plan(state_dir: Path, nodes: int, prefix: str, cluster_cidr: str, otlp_endpoint: str = "",
             registry_config_dir: str = "", etcd_members: int = 1, previous: ClusterPlan | None = None,
             apiservers: int = 1, hosts: bool = False, ingress: bool = True,
             registry_name: str | None = DEFAULT_REGISTRY_NAME) -> ClusterPlan:
    """Fresh ports, but an etcd cluster's from the previous plan of this state dir: its
    members know each other by their peer URLs, kept in their data; registry_name None:
    no local registry."""
    backends = apiservers if apiservers > 1 else 0
    fresh = iter(_distinct_free_ports(2 * etcd_members + 9 + 2 * backends))
    ports = [[next(fresh), next(fresh)] for _ in range(etcd_members)]
    if previous is not None and len(previous.etcd_members) == etcd_members > 1 and \
            all((state_dir / name).is_dir() for name, _, _ in previous.etcd_members):
        ports = [[client, peer] for _, client, peer in previous.etcd_members]
    return ClusterPlan(state_dir=str(state_dir), nodes=[f"{prefix}{i}" for i in range(1, nodes + 1)],
                       etcd_port=ports[0][0], etcd_peer_port=ports[0][1], apiserver_port=next(fresh),
                       rest_port=next(fresh), scheduler_metrics_port=next(fresh),
                       controller_manager_metrics_port=next(fresh), cluster_cidr=cluster_cidr,
                       otlp_endpoint=otlp_endpoint, registry_config_dir=registry_config_dir,
                       etcd_more_ports=ports[1:],
                       apiserver_ports=[[next(fresh), next(fresh)] for _ in range(backends)],
                       hosts_subnet=choose_subnet(), hosts=hosts, dns_port=next(fresh), metrics_port=next(fresh),
                       ingress_http_port=next(fresh) if ingress else 0,
                       ingress_https_port=next(fresh) if ingress else 0,
                       registry_port=next(fresh) if registry_name is not None else 0,
                       registry_name=registry_name or "")


def _distinct_free_ports(count: int) -> list[int]:
    """`count` different free ports: the kernel may hand the same ephemeral port to two
    binds made one after the other (two components of one plan on one port, found in CI)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def commands(plan: ClusterPlan) -> dict[str, list[str]]:
    """Each component's command line, in start order."""
    root, certs = plan.root, plan.pki
    members = plan.etcd_members
    initial = ",".join(f"{name}=http://127.0.0.1:{peer}" for name, _, peer in members) if len(members) > 1 else ""
    out = {name: etcd_args(etcd_binary(), "kubeling" if name == "etcd" else name, root / name, client, peer, certs,
                           initial)
           for name, client, peer in members}
    for name, grpc_port, rest_port in plan.apiserver_backends:
        # one apiserver listens where the API is; several, on loopback behind HAProxy there
        host = plan.api_host if len(plan.apiserver_backends) == 1 else "127.0.0.1"
        out[name] = _python(
            "apiserver", "--etcd", plan.etcd_endpoints, "--listen", f"{host}:{grpc_port}",
            "--rest-listen", f"{host}:{rest_port}", "--cluster-cidr", plan.cluster_cidr,
            "--etcd-cafile", str(certs / "ca.crt"), "--etcd-certfile", str(certs / "apiserver-etcd-client.crt"),
            "--etcd-keyfile", str(certs / "apiserver-etcd-client.key"),
            "--tls-cert-file", str(certs / "apiserver.crt"), "--tls-private-key-file", str(certs / "apiserver.key"),
            "--client-ca-file", str(certs / "ca.crt"), "--authorization-mode", "Node,RBAC",
            "--enable-bootstrap-token-auth",  # machines join with a token (kubeling join)
            "--service-account-signing-key-file", str(certs / "sa.key"),
            "--kubelet-client-certificate", str(certs / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key", str(certs / "apiserver-kubelet-client.key"),
            "--kubelet-certificate-authority", str(certs / "ca.crt"),
            "--proxy-client-cert-file", str(certs / "front-proxy-client.crt"),
            "--proxy-client-key-file", str(certs / "front-proxy-client.key"),
            "--requestheader-client-ca-file", str(certs / "front-proxy-ca.crt"),
            # extension apiservers (the metrics server) run outside the pod network, on the
            # host: reached at their endpoints, not through ClusterIPs
            "--enable-aggregator-routing", "true",
            "--default-unreachable-toleration-seconds", str(plan.default_unreachable_toleration_seconds),
            "--service-cluster-ip-range", plan.service_cidr, "--advertise-address", plan.api_host,
            "--advertise-port", str(plan.rest_port),
            # every apiserver audits to its own log, rotated at 100 MB, three kept
            "--audit-policy-file", str(root / AUDIT_POLICY), "--audit-log-path", str(root / "audit" / f"{name}.log"),
            "--audit-log-maxsize", "100", "--audit-log-maxbackup", "3",
            "--encryption-provider-config", str(root / ENCRYPTION_CONFIG))
    if len(plan.apiserver_backends) > 1:
        out["haproxy"] = ["haproxy", "-f", str(root / "haproxy.cfg"), "-db"]  # -db: in the foreground
    out |= {
        "scheduler": _python("scheduler", "--kubeconfig", str(root / "scheduler.conf"),
                             "--metrics-listen", f"127.0.0.1:{plan.scheduler_metrics_port}"),
        "controller-manager": _python("controllers", "--kubeconfig", str(root / "controller-manager.conf"),
                                      "--node-monitor-grace-period", str(plan.node_monitor_grace_period),
                                      "--root-ca-file", str(certs / "ca.crt"),
                                      # the cluster CA signs approved CertificateSigningRequests
                                      "--cluster-signing-cert-file", str(certs / "ca.crt"),
                                      "--cluster-signing-key-file", str(certs / "ca.key"),
                                      # nodes' own serving certificates, for addresses of the node network
                                      "--approve-kubelet-serving-certificates",
                                      plan.hosts_subnet or "127.0.0.0/8",
                                      "--metrics-listen", f"127.0.0.1:{plan.controller_manager_metrics_port}"),
        "cluster-dns": _python("clusterdns", "--kubeconfig", str(root / "kube-dns.conf"),
                               "--listen", f"{plan.api_host}:{plan.dns_port}", "--zone", plan.dns_domain),
    }
    if plan.registry:
        out |= plan.local_registry().commands()
    if plan.metrics_port:
        out["metrics-server"] = _python(
            "metricsserver", "--kubeconfig", str(root / "metrics-server.conf"),
            "--listen", f"{plan.api_host}:{plan.metrics_port}",
            "--tls-cert-file", str(certs / "metrics-server-serving.crt"),
            "--tls-private-key-file", str(certs / "metrics-server-serving.key"),
            "--requestheader-client-ca-file", str(certs / "front-proxy-ca.crt"),
            "--kubelet-client-certificate", str(certs / "metrics-server.crt"),
            "--kubelet-client-key", str(certs / "metrics-server.key"),
            "--kubelet-certificate-authority", str(certs / "ca.crt"))
    for node in plan.nodes:
        config = plan.kubelet_config(node)
        # on its host: in the host's network namespace only (files and mounts are shared)
        enter = plan.enter(node)
        out[f"kubelet-{node}"] = enter + _python(
            "kubelet", "--node-name", node, "--kubeconfig", str(config.kubeconfig),
            "--node-ip", config.node_ip, "--address", config.address,
            "--node-lease-duration-seconds", str(config.node_lease_duration_seconds),
            "--node-status-update-frequency", str(config.node_status_update_frequency),
            *(["--pod-routes"] if config.pod_routes else []),
            *(["--rotate-certificates"] if config.rotate_certificates else []),
            "--tls-cert-file", str(config.tls_cert_file), "--tls-private-key-file", str(config.tls_private_key_file),
            "--client-ca-file", str(config.client_ca_file), "--root-dir", str(config.root_dir),
            "--pod-logs-dir", str(config.pod_logs_dir), "--runc-root", str(config.runc_root),
            "--cluster-cidr", plan.cluster_cidr, "--cluster-dns", plan.dns_ip, "--cluster-domain", plan.dns_domain,
            "--service-cluster-ip-range", plan.service_cidr,
            *(["--config", str(plan.kubelet_config_file(node))] if plan.kubelet_config_file(node) else []),
            *(["--register-with-taints", ",".join(config.register_with_taints)] if config.register_with_taints
              else []),
            *(["--host-path-mounts", ",".join(f"{k}={v}" for k, v in config.host_path_mounts.items())]
              if config.host_path_mounts else []),
            *(["--node-network", config.node_network] if config.node_network else []),
            *(["--registry-config-dir", plan.runtime_registry_config_dir] if plan.runtime_registry_config_dir
              else []))
    for node in plan.nodes:
        # The node's hostpath CSI driver with its registrar and provisioner (upstream deploys
        # them as a DaemonSet); the kubelet finds it in its plugin registry.
        config = plan.kubelet_config(node)
        enter = plan.enter(node)
        out[f"csi-hostpath-{node}"] = enter + _python(
            "csi.hostpath", "--node-id", node, "--state-dir", str(plan.csi_state_dir(node)),
            "--registration-dir", str(config.state_dir / "plugins_registry"),
            "--endpoint", str(config.state_dir / "plugins" / DRIVER_NAME / "csi.sock"),
            "--kubeconfig", str(root / "csi-hostpath.conf"))
    for name, nodes in plan.proxies.items():
        enter = plan.enter(nodes[0])
        out[name] = enter + _python(
            "proxy", "--kubeconfig", str(root / "kube-proxy.conf"), *(f"--node-name={n}" for n in nodes),
            "--cluster-cidr", plan.cluster_cidr, "--service-cluster-ip-range", plan.service_cidr)
    if plan.port_mappings:
        out["port-mappings"] = ["haproxy", "-f", str(root / "port-mappings.cfg"), "-db"]
    if plan.ingress:
        enter = plan.enter(plan.nodes[0])
        out["ingress-controller"] = enter + _python(
            "ingress", "--kubeconfig", str(root / "ingress-controller.conf"),
            "--http-listen", f"{plan.ingress_address}:{plan.ingress_http_port}",
            "--https-listen", f"{plan.ingress_address}:{plan.ingress_https_port}",
            "--state-dir", str(root / "ingress"))
    for name, nodes in plan.policy_controllers.items():
        enter = plan.enter(nodes[0])
        out[name] = enter + _python(
            "netpol", "--kubeconfig", str(root / "network-policy.conf"), *(f"--node-name={n}" for n in nodes),
            "--cluster-cidr", plan.cluster_cidr)
    return out

"""python -m kubelet --node-name NAME --apiserver HOST:PORT [--config FILE]: the kubelet
agent with its CRI runtime (kubelet/cri) in one process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from kubelet.agent import Kubelet
from kubelet.config import ConfigError, KubeletConfig, load_config_file
from kubeling import telemetry
from kubeling.childwatch import watch_children_with_pidfd
from kubeling.signals import wait_for_termination

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kubelet", description=__doc__)
    p.add_argument("--node-name", required=True, help="the Node this kubelet registers and runs pods for")
    p.add_argument("--apiserver", default="", help="the apiserver's gRPC address HOST:PORT (plain text; or "
                                                  "--kubeconfig)")
    p.add_argument("--config", type=Path, help="YAML or JSON file of settings (KubeletConfiguration-style keys); "
                                               "flags given here win")
    p.add_argument("--root-dir", type=Path, help="state directory root (default /var/lib/kubeling/kubelet; "
                                                 "each node uses <root-dir>/<node-name>)")
    p.add_argument("--pod-logs-dir", type=Path, help="container logs (default /var/log/pods)")
    p.add_argument("--container-runtime-endpoint", help="use this CRI socket (unix:///path) instead of hosting "
                                                        "kubeling's own runtime")
    p.add_argument("--cni-conf-dir", type=Path, help="CNI configs (default <state>/net.d, written from the pod CIDR)")
    p.add_argument("--cni-bin-dir", action="append", dest="cni_bin_dirs", help="CNI plugin directory (repeatable)")
    p.add_argument("--runc-root", type=Path, help="runc state (default /run/kubeling/runc/<node-name>)")
    p.add_argument("--cluster-cidr", help="the pod network pods may route to (default 10.88.0.0/16)")
    p.add_argument("--node-ip", help="the node's InternalIP (default 127.0.0.1)")
    p.add_argument("--address", help="daemon endpoint (logs) listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="daemon endpoint port (default 0: a free one)")
    p.add_argument("--max-pods", type=int, help="pods this node takes (default 110)")
    p.add_argument("--node-labels", help="extra node labels, k=v,k2=v2")
    p.add_argument("--cluster-domain",
                   help="DNS domain of the cluster: pods' FQDNs end with it (default cluster.local)")
    p.add_argument("--cluster-dns", help="comma-separated ClusterIPs of the cluster DNS: pods' nameservers for "
                                         "dnsPolicy ClusterFirst (default: none, the node's resolv.conf)")
    p.add_argument("--resolv-conf", type=Path, help="the node's resolver config for dnsPolicy Default "
                                                     "(default /etc/resolv.conf)")
    p.add_argument("--service-cluster-ip-range",
                   help="the Services' range: pods get a route to it through their bridge (default: none)")
    p.add_argument("--registry-config-dir", type=Path,
                   help="registry mirrors, containerd's hosts.toml layout: DIR/<registry>/hosts.toml")
    p.add_argument("--streaming-listen", help="HOST:PORT of the runtime's exec/attach/port-forward server "
                                              "(default 127.0.0.1:0: loopback, a free port)")
    p.add_argument("--cgroup-root", help="pods' cgroups go under this path (default: the runtime's)")
    p.add_argument("--pod-routes", action="store_true", default=None,
                   help="route other nodes' pod CIDRs through their InternalIPs (kubelets in their own network "
                        "namespaces, e.g. docker-compose)")
    p.add_argument("--kubeconfig", type=Path, help="this node's credentials for the apiserver (a kubeconfig "
                                                    "with its client certificate); default: --apiserver, plain text")
    p.add_argument("--tls-cert-file", type=Path, help="the daemon endpoint's serving certificate (default: plain "
                                                       "HTTP)")
    p.add_argument("--tls-private-key-file", type=Path, help="its private key")
    p.add_argument("--client-ca-file", type=Path, help="verify callers' client certificates against this CA; only "
                                                        "the apiserver's may use more than /healthz")
    p.add_argument("--node-status-update-frequency", type=float,
                   help="seconds between the node status computations (default 10)")
    p.add_argument("--node-lease-duration-seconds", type=int,
                   help="the node Lease's duration; the kubelet renews it every quarter of it (default 40). "
                        "Keep --node-monitor-grace-period of the controller manager at least this long")
    p.add_argument("--log-level", default="INFO")
    return p


def make_config(args: argparse.Namespace) -> KubeletConfig:
    config = KubeletConfig(node_name=args.node_name, apiserver=args.apiserver)
    if not args.apiserver and args.kubeconfig is None:
        raise ConfigError("--apiserver or --kubeconfig is required")
    if args.config is not None:
        config.apply(load_config_file(args.config))
    flags = {"root_dir": args.root_dir, "pod_logs_dir": args.pod_logs_dir,
             "container_runtime_endpoint": args.container_runtime_endpoint, "cni_conf_dir": args.cni_conf_dir,
             "cni_bin_dirs": args.cni_bin_dirs, "runc_root": args.runc_root, "cluster_cidr": args.cluster_cidr,
             "node_ip": args.node_ip, "address": args.address, "port": args.port, "max_pods": args.max_pods,
             "cluster_domain": args.cluster_domain, "registry_config_dir": args.registry_config_dir,
             "streaming_listen": args.streaming_listen, "cgroup_root": args.cgroup_root,
             "pod_routes": args.pod_routes, "kubeconfig": args.kubeconfig, "tls_cert_file": args.tls_cert_file,
             "tls_private_key_file": args.tls_private_key_file, "client_ca_file": args.client_ca_file,
             "cluster_dns": [ip.strip() for ip in args.cluster_dns.split(",") if ip.strip()]
             if args.cluster_dns is not None else None,
             "resolv_conf": args.resolv_conf, "service_cidr": args.service_cluster_ip_range,
             "node_status_update_frequency": args.node_status_update_frequency,
             "node_lease_duration_seconds": args.node_lease_duration_seconds}
    for name, value in flags.items():
        if value is not None:
            setattr(config, name, value)
    if args.node_labels:
        for pair in args.node_labels.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ConfigError(f"--node-labels: expected k=v, got {pair!r}")
            config.node_labels[key] = value
    config.check()
    return config


async def _run(config: KubeletConfig) -> None:
    watch_children_with_pidfd()
    kubelet = Kubelet(config)
    try:
        await kubelet.start()
        await wait_for_termination()
    finally:
        await kubelet.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup(f"kubelet-{args.node_name}")
    try:
        config = make_config(args)
        asyncio.run(_run(config))
    except (ConfigError, OSError, TimeoutError) as err:
        print(f"kubelet: {err}", file=sys.stderr)
        return 1
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

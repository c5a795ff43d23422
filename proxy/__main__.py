"""python -m proxy --kubeconfig FILE --node-name N [--cluster-cidr C] [--service-cluster-ip-range R] ...

One per network namespace: the nodes sharing it are all named (`--node-name` again)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kubeling import telemetry
from kubeling.client import Client
from kubeling.netutil import cidr_arg, host_port_arg
from kubeling.signals import wait_for_termination
from proxy.proxier import Iptables, Proxier, ProxyConfig


def build_parser() -> argparse.ArgumentParser:
    d = ProxyConfig()
    p = argparse.ArgumentParser(prog="python -m proxy", description="kubeling kube-proxy (iptables mode)")
    p.add_argument("--kubeconfig", default="", help="credentials for the apiserver (system:kube-proxy)")
    p.add_argument("--apiserver", type=host_port_arg, default=None, help="apiserver gRPC HOST:PORT, plain text")
    p.add_argument("--node-name", action="append", default=[],
                   help="a node whose pods are local here (repeat for nodes sharing this network namespace)")
    p.add_argument("--cluster-cidr", type=cidr_arg, default=d.cluster_cidr,
                   help="the pods' range: traffic from outside it to a ClusterIP is masqueraded (empty: all is)")
    p.add_argument("--service-cluster-ip-range", type=cidr_arg, default=d.service_cidr,
                   help="the Services' range: what is addressed to it and not a Service is rejected "
                        "(default %(default)s)")
    p.add_argument("--nodeport-addresses", default="",
                   help="comma-separated addresses node ports answer on (default: the nodes' InternalIPs)")
    p.add_argument("--min-sync-period", type=float, default=d.min_sync_period,
                   help="seconds between two rule syncs at least (default %(default)s)")
    p.add_argument("--sync-period", type=float, default=d.sync_period,
                   help="a full sync at least this often (default %(default)s)")
    p.add_argument("--masquerade-all", action="store_true", help="masquerade all traffic to ClusterIPs")
    p.add_argument("--cleanup", action="store_true", help="remove kube-proxy's rules and chains, then exit")
    p.add_argument("--log-level", default="INFO")
    return p


async def _serve(args: argparse.Namespace) -> None:
    client = Client.from_kubeconfig(args.kubeconfig) if args.kubeconfig else Client(args.apiserver)
    config = ProxyConfig(node_names=args.node_name, cluster_cidr=args.cluster_cidr,
                         service_cidr=args.service_cluster_ip_range,
                         nodeport_addresses=[a.strip() for a in args.nodeport_addresses.split(",") if a.strip()],
                         min_sync_period=args.min_sync_period, sync_period=args.sync_period,
                         masquerade_all=args.masquerade_all)
    proxier = Proxier(client, config)
    try:
        await proxier.start()
        await wait_for_termination()
    finally:
        await proxier.stop()
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.cleanup:
        Iptables().cleanup()
        return 0
    if not args.apiserver and not args.kubeconfig:
        parser.error("--apiserver or --kubeconfig is required")
    if not args.node_name:
        parser.error("--node-name is required")
    shutdown = telemetry.setup("kube-proxy")
    try:
        asyncio.run(_serve(args))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

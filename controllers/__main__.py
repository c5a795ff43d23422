"""python -m controllers --kubeconfig FILE [--node-monitor-grace-period S] ..."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from controllers.manager import ControllerManager, ManagerConfig
from kubeling import telemetry
from kubeling.client import Client
from kubeling.leaderelection import ElectionConfig
from kubeling.netutil import host_port_arg
from kubeling.signals import wait_for_termination


def build_parser() -> argparse.ArgumentParser:
    d = ManagerConfig()
    p = argparse.ArgumentParser(prog="python -m controllers",
                                description="kubeling controller manager: node lifecycle, NoExecute eviction, "
                                            "ReplicaSets, Deployments, Jobs, PodDisruptionBudgets, garbage collection")
    p.add_argument("--kubeconfig", default="", help="credentials for the apiserver (its client certificate)")
    p.add_argument("--apiserver", type=host_port_arg, default=None, help="apiserver gRPC HOST:PORT, plain text")
    p.add_argument("--node-monitor-grace-period", type=float, default=d.node_monitor_grace_period,
                   help="seconds without a heartbeat before a node is Unknown (default %(default)s)")
    p.add_argument("--node-monitor-period", type=float, default=d.node_monitor_period,
                   help="seconds between node health passes (default %(default)s)")
    p.add_argument("--leader-elect", default="true", choices=["true", "false"])
    p.add_argument("--lease-duration", type=float, default=15.0)
    p.add_argument("--renew-deadline", type=float, default=10.0)
    p.add_argument("--retry-period", type=float, default=2.0)
    p.add_argument("--metrics-listen", default="", help="HTTP address for /metrics, /healthz, /readyz (default: off)")
    p.add_argument("--log-level", default="INFO")
    return p


async def _serve(args: argparse.Namespace) -> None:
    client = Client.from_kubeconfig(args.kubeconfig) if args.kubeconfig else Client(args.apiserver)
    config = ManagerConfig(node_monitor_grace_period=args.node_monitor_grace_period,
                           node_monitor_period=args.node_monitor_period, leader_elect=args.leader_elect == "true",
                           election=ElectionConfig(name="kube-controller-manager", lease_duration=args.lease_duration,
                                                   renew_deadline=args.renew_deadline,
                                                   retry_period=args.retry_period),
                           metrics_listen=args.metrics_listen)
    manager = ControllerManager(client, config)
    await manager.start()
    await wait_for_termination()
    await manager.stop()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.apiserver and not args.kubeconfig:
        parser.error("--apiserver or --kubeconfig is required")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup("controller-manager")
    try:
        asyncio.run(_serve(args))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m scheduler --apiserver HOST:PORT [--config FILE]"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kubeling import telemetry
from kubeling.client import Client
from kubeling.leaderelection import ElectionConfig
from kubeling.netutil import host_port_arg
from kubeling.signals import wait_for_termination
from scheduler.config import ConfigError
from scheduler.plugins import PluginLoadError
from scheduler.service import SchedulerService

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scheduler",
                                description="kubeling scheduler: kube-scheduler's framework over the kubeling API")
    p.add_argument("--apiserver", type=host_port_arg, default=None, help="apiserver gRPC address HOST:PORT (plain "
                                                                         "text; or --kubeconfig)")
    p.add_argument("--kubeconfig", default="", help="the scheduler's credentials for the apiserver (a kubeconfig "
                                                    "with its client certificate)")
    p.add_argument("--config", default=None, help="KubeSchedulerConfiguration YAML (default: the default profile)")
    p.add_argument("--metrics-listen", default="", help="HTTP address for /metrics, /healthz, /readyz (default: off)")
    p.add_argument("--leader-elect", default="true", choices=["true", "false"],
                   help="campaign for the kube-system/kube-scheduler Lease before scheduling (default %(default)s)")
    p.add_argument("--lease-duration", type=float, default=15.0)
    p.add_argument("--renew-deadline", type=float, default=10.0)
    p.add_argument("--retry-period", type=float, default=2.0)
    p.add_argument("--log-level", default="INFO")
    return p


async def _serve(args: argparse.Namespace) -> None:
    election = ElectionConfig(lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                              retry_period=args.retry_period)
    client = Client.from_kubeconfig(args.kubeconfig) if args.kubeconfig else None
    service = SchedulerService(client.address if client else args.apiserver, args.config,
                               leader_elect=args.leader_elect == "true", election=election,
                               metrics_listen=args.metrics_listen, client=client)
    await service.start()
    await wait_for_termination()
    await service.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.apiserver and not args.kubeconfig:
        build_parser().error("--apiserver or --kubeconfig is required")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup("scheduler")
    try:
        asyncio.run(_serve(args))
    except (ConfigError, PluginLoadError, ValueError) as err:
        print(f"scheduler: invalid config: {err}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as err:
        print(f"scheduler: {err}", file=sys.stderr)
        return 1
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

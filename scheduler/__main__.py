"""python -m scheduler --kubeconfig FILE | --apiserver HOST:PORT [--config FILE]: kube-scheduler's
framework over the kubeling API (flags: `--help`, docs/flags.md).

The older configuration works too: `--policy-config-file policy.json`, `--policy-configmap NAME`,
`--algorithm-provider DefaultProvider` and the other deprecated flags of upstream 1.12-1.22;
`--print-config` prints the profiles any of them make, and exits."""

from __future__ import annotations

import argparse
import sys

from kubeling import app
from kubeling.leaderelection import ElectionOptions
from kubeling.options import add_flags, from_args
from scheduler.config import LegacyOptions, algorithm_source, config_data, load_config
from scheduler.plugins import registry
from scheduler.printconfig import render
from scheduler.scheduler import Scheduler
from scheduler.service import SchedulerService

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m scheduler", "kubeling scheduler: kube-scheduler's framework over the kubeling API")
    app.add_client_flags(p, "the scheduler's")
    p.add_argument("--config", default=None, help="KubeSchedulerConfiguration YAML (default: the default profile)")
    p.add_argument("--metrics-listen", default="", help="HTTP address for /metrics, /healthz, /readyz (default: off)")
    p.add_argument("--print-config", action="store_true",
                   help="print the configuration the scheduler would run (every profile's plugins, whatever made "
                        "them: the defaults, a provider, a Policy) as KubeSchedulerConfiguration YAML, and exit")
    add_flags(p, ElectionOptions)
    add_flags(p, LegacyOptions)
    return p


def _service(args: argparse.Namespace, election: ElectionOptions | None = None) -> SchedulerService:
    client = app.client_from(args)
    legacy = from_args(LegacyOptions, args)
    if election is None:  # not to run: only to read what the scheduler would
        return SchedulerService(client.address, args.config, legacy=legacy, leader_elect=False, client=client)
    return SchedulerService(client.address, args.config, legacy=legacy, leader_elect=election.leader_elect,
                            election=election.config("kube-scheduler"), metrics_listen=args.metrics_listen,
                            client=client)


async def _serve(args: argparse.Namespace) -> None:
    await app.serve(_service(args, from_args(ElectionOptions, args)))


async def _print_config(args: argparse.Namespace) -> None:
    """The profiles, resolved; a Policy in a ConfigMap is read through the apiserver."""
    legacy = from_args(LegacyOptions, args)
    source = algorithm_source(config_data(args.config, legacy))
    if source is None or source.policy is None or source.policy.file:
        plugins = registry()
        config = load_config(args.config, plugins, legacy=legacy)  # no apiserver needed
        Scheduler(config, plugins)  # its plugins built once, as at start: their args are checked
        print(render(config), end="")
        return
    service = _service(args)
    try:
        config = await service.resolved_config()
        Scheduler(config, service.registry)
        print(render(config), end="")
    finally:
        await service.client.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.print_config:
        return app.run("scheduler", args, lambda: _print_config(args))
    return app.run("scheduler", args, lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

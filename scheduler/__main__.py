"""python -m scheduler --kubeconfig FILE | --apiserver HOST:PORT [--config FILE]: kube-scheduler's
framework over the kubeling API (flags: `--help`, docs/flags.md)."""

from __future__ import annotations

import argparse
import sys

from kubeling import app
from kubeling.leaderelection import ElectionOptions
from kubeling.options import add_flags, from_args
from scheduler.service import SchedulerService

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m scheduler", "kubeling scheduler: kube-scheduler's framework over the kubeling API")
    app.add_client_flags(p, "the scheduler's")
    p.add_argument("--config", default=None, help="KubeSchedulerConfiguration YAML (default: the default profile)")
    p.add_argument("--metrics-listen", default="", help="HTTP address for /metrics, /healthz, /readyz (default: off)")
    add_flags(p, ElectionOptions)
    return p


async def _serve(args: argparse.Namespace) -> None:
    client, election = app.client_from(args), from_args(ElectionOptions, args)
    service = SchedulerService(client.address, args.config, leader_elect=election.leader_elect,
                               election=election.config("kube-scheduler"), metrics_listen=args.metrics_listen,
                               client=client)
    await app.serve(service)


def main(argv: list[str] | None = None) -> int:
    return app.run("scheduler", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

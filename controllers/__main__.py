"""python -m controllers --kubeconfig FILE | --apiserver HOST:PORT [--node-monitor-grace-period S] ...:
the controller manager (flags: `--help`, docs/flags.md)."""

from __future__ import annotations

import argparse
import sys

from controllers.manager import ControllerManager, ManagerConfig
from kubeling import app
from kubeling.leaderelection import ElectionOptions
from kubeling.options import add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m controllers", "kubeling controller manager: node lifecycle, NoExecute eviction, "
                                            "ReplicaSets, Deployments, Jobs, PodDisruptionBudgets, EndpointSlices, "
                                            "Endpoints, garbage collection")
    app.add_client_flags(p, "the controller manager's")
    add_flags(p, ManagerConfig)
    add_flags(p, ElectionOptions)
    return p


async def _serve(args: argparse.Namespace) -> None:
    election = from_args(ElectionOptions, args)
    config = from_args(ManagerConfig, args, leader_elect=election.leader_elect,
                       election=election.config("kube-controller-manager"))
    await app.serve(ControllerManager(app.client_from(args), config))


def main(argv: list[str] | None = None) -> int:
    return app.run("controller-manager", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

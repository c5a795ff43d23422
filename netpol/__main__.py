"""python -m netpol --kubeconfig FILE --node-name N [--cluster-cidr C] ...: the network policy
controller, one per network namespace (the nodes sharing it each named by a --node-name).
--cleanup removes its chains and sets and exits."""

from __future__ import annotations

import argparse
import sys

from kubeling import app
from kubeling.netfilter import Netfilter
from kubeling.options import ConfigError, add_flags, from_args
from netpol.controller import PolicyConfig, PolicyController, cleanup

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m netpol", "kubeling network policy controller (iptables and ipset)")
    app.add_client_flags(p, "system:kube-network-policies")
    add_flags(p, PolicyConfig)
    p.add_argument("--cleanup", action="store_true", help="remove the controller's chains and sets, then exit")
    return p


async def _serve(args: argparse.Namespace) -> None:
    if args.cleanup:
        cleanup(Netfilter())
        return
    config = from_args(PolicyConfig, args)
    if not config.node_names:
        raise ConfigError("--node-name is required")
    client = app.client_from(args)
    await app.serve(PolicyController(client, config), also_close=[client.close])


def main(argv: list[str] | None = None) -> int:
    return app.run("network-policy", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

"""python -m proxy --kubeconfig FILE --node-name N [--cluster-cidr C] ...: kube-proxy in iptables mode, one
per network namespace (the nodes sharing it each named by a --node-name). --cleanup removes its rules and exits."""

from __future__ import annotations

import argparse
import sys

from kubeling import app
from kubeling.options import ConfigError, add_flags, from_args
from proxy.proxier import Iptables, Proxier, ProxyConfig

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m proxy", "kubeling kube-proxy (iptables mode)")
    app.add_client_flags(p, "system:kube-proxy")
    add_flags(p, ProxyConfig)
    p.add_argument("--cleanup", action="store_true", help="remove kube-proxy's rules and chains, then exit")
    return p


async def _serve(args: argparse.Namespace) -> None:
    if args.cleanup:
        Iptables().cleanup()
        return
    config = from_args(ProxyConfig, args)
    if not config.node_names:
        raise ConfigError("--node-name is required")
    client = app.client_from(args)
    await app.serve(Proxier(client, config), also_close=[client.close])


def main(argv: list[str] | None = None) -> int:
    return app.run("kube-proxy", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

"""python -m csi.hostpath --node-id NODE --state-dir DIR [--endpoint SOCK] [--registration-dir DIR]
[--kubeconfig FILE | --apiserver HOST:PORT]: the hostpath CSI driver of one node, with the
sidecars upstream runs beside it — the registrar (a socket in the kubelet's plugin registry)
and, given apiserver credentials, the provisioner for claims scheduled to this node
(flags: `--help`, docs/flags.md)."""

from __future__ import annotations

import argparse
import sys

from csi.service import HostpathService, ServiceConfig
from kubeling import app
from kubeling.options import add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m csi.hostpath", __doc__ or "")
    app.add_client_flags(p, "the provisioner's")
    add_flags(p, ServiceConfig)
    return p


async def _serve(args: argparse.Namespace) -> None:
    config = from_args(ServiceConfig, args)
    client = app.client_from(args) if (args.kubeconfig or args.apiserver) else None
    await app.serve(HostpathService(config, client))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return app.run(f"csi-hostpath-{args.node_id}", args, lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

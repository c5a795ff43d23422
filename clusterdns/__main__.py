"""python -m clusterdns --kubeconfig FILE --listen HOST:PORT [--zone cluster.local] [--upstream HOST:PORT]:
the cluster DNS, from Services and EndpointSlices."""

from __future__ import annotations

import argparse
import sys

from clusterdns.server import DNSConfig, DNSServer
from kubeling import app
from kubeling.options import add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m clusterdns", "kubeling cluster DNS")
    app.add_client_flags(p, "system:kube-dns")
    add_flags(p, DNSConfig)
    p.add_argument("--port-file", default="", help="write the bound port here once serving")
    return p


async def _serve(args: argparse.Namespace) -> None:
    client = app.client_from(args)
    server = DNSServer(client, from_args(DNSConfig, args))
    await app.serve(server, port_file=args.port_file, ports=lambda: [server.port], also_close=[client.close])


def main(argv: list[str] | None = None) -> int:
    return app.run("cluster-dns", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

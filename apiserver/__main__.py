"""python -m apiserver --etcd HOST:PORT [--listen HOST:PORT] [--rest-listen HOST:PORT] ...:
the Kubernetes API over etcd, in gRPC and REST (flags: `--help`, docs/flags.md)."""

from __future__ import annotations

import argparse
import sys

import uvloop

from apiserver.options import Config
from apiserver.server import APIServer
from kubeling import app
from kubeling.options import add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m apiserver", "kubeling apiserver: the Kubernetes API over etcd, in gRPC and REST")
    add_flags(p, Config)
    p.add_argument("--port-file", default="", help="write the bound gRPC port, then the REST port, here once serving")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    server = APIServer(from_args(Config, args))
    ports = lambda: [server.port, *([server.rest_port] if server.rest_port else [])]  # noqa: E731
    # uvloop: the apiserver spends most of its time in event-loop callbacks (gRPC's and
    # ours); with it the e2e scheduler benchmark ran 492-500 vs 431-463 pods/s.
    return app.run("apiserver", args, lambda: app.serve(server, port_file=args.port_file, ports=ports),
                   loop=uvloop.run)


if __name__ == "__main__":
    sys.exit(main())

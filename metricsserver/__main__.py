"""python -m metricsserver --kubeconfig FILE --listen HOST:PORT --tls-cert-file ... :
metrics.k8s.io behind the apiserver's aggregator."""

from __future__ import annotations

import argparse
import sys

from kubeling import app
from kubeling.options import add_flags, from_args
from metricsserver.server import MetricsConfig, MetricsServer

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m metricsserver", "kubeling metrics server (metrics.k8s.io)")
    app.add_client_flags(p, "system:metrics-server")
    add_flags(p, MetricsConfig)
    p.add_argument("--port-file", default="", help="write the bound port here once serving")
    return p


async def _serve(args: argparse.Namespace) -> None:
    client = app.client_from(args)
    server = MetricsServer(client, from_args(MetricsConfig, args))
    await app.serve(server, port_file=args.port_file, ports=lambda: [server.port], also_close=[client.close])


def main(argv: list[str] | None = None) -> int:
    return app.run("metrics-server", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

"""python -m ingress --kubeconfig FILE --http-listen HOST:PORT --https-listen HOST:PORT --state-dir DIR:
the ingress controller, serving the Ingresses of the `kubeling.io/ingress-haproxy` class with HAProxy."""

from __future__ import annotations

import argparse
import sys

from ingress.controller import IngressConfig, IngressController
from kubeling import app
from kubeling.options import ConfigError, add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m ingress", "kubeling ingress controller (HAProxy)")
    app.add_client_flags(p, "system:ingress-controller")
    add_flags(p, IngressConfig)
    return p


async def _serve(args: argparse.Namespace) -> None:
    config = from_args(IngressConfig, args)
    if not config.http_listen or not config.https_listen:
        raise ConfigError("--http-listen and --https-listen are required")
    client = app.client_from(args)
    await app.serve(IngressController(client, config), also_close=[client.close])


def main(argv: list[str] | None = None) -> int:
    return app.run("ingress-controller", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

"""python -m cri --socket PATH [--state-dir DIR] [--cni-conf-dir D] [--registry-config-dir D]
[--streaming-listen HOST:PORT]: the CRI runtime alone (runtime.v1 on a unix socket, as
crictl and critest use it)."""

from __future__ import annotations

import argparse
import sys

from cri.server import CRIConfig, CRIServer
from kubeling import app
from kubeling.childwatch import watch_children_with_pidfd
from kubeling.options import add_flags, from_args

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m cri", "kubeling's CRI runtime: RuntimeService and ImageService on runc")
    add_flags(p, CRIConfig)
    return p


async def _serve(args: argparse.Namespace) -> None:
    config = from_args(CRIConfig, args)
    watch_children_with_pidfd()
    await app.serve(CRIServer(config))


def main(argv: list[str] | None = None) -> int:
    return app.run("cri", args := build_parser().parse_args(argv), lambda: _serve(args))


if __name__ == "__main__":
    sys.exit(main())

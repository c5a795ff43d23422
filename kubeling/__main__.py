"""The `kubeling` command."""

from __future__ import annotations

import argparse
import sys

from kubelet.cri.images import cli as image_cli
from kubeling import up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubeling", description="a small but real Kubernetes control plane")
    commands = parser.add_subparsers(dest="command", required=True)
    image_cli.add_parser(commands)
    up.add_parsers(commands)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

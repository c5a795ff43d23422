"""The `kubeling` command."""

from __future__ import annotations

import argparse
import sys

from cluster import backup, bootstrap, certs, commands, etcdcmd, images, join, why
from cluster.dashboard import cli as dashboard
from cri.images import cli as image_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubeling", description="a small but real Kubernetes control plane")
    subcommands = parser.add_subparsers(dest="command", required=True)
    images.extend(image_cli.add_parser(subcommands))
    commands.add_parsers(subcommands)
    certs.add_parser(subcommands)
    etcdcmd.add_parser(subcommands)
    backup.add_parsers(subcommands)
    bootstrap.add_parser(subcommands)
    join.add_parsers(subcommands)
    why.add_parser(subcommands)
    dashboard.add_parser(subcommands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

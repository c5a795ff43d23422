"""python -m cni add|check|del|status NETNS [--conf-dir D]: cnitool for kubeling's libcni. NETNS is
a name under /run/netns or a path; the network is the conf dir's default (the first valid file)
or --network NAME; the container ID is derived from the namespace path, as cnitool does. Bad
flags or configs exit 2; a missing network or namespace, or a failing plugin, exits 1."""

from __future__ import annotations

import argparse
import sys

from cni.api import DEFAULT_CACHE_DIR, DEFAULT_PATH
from cni.cnitool import run
from cni.invoke import PluginError
from kubeling import app

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = app.parser("python -m cni", "add, check or delete a CNI network in a namespace")
    p.add_argument("command", choices=["add", "check", "del", "status"])
    p.add_argument("netns", nargs="?", default="", help="namespace name (under /run/netns) or path")
    p.add_argument("--conf-dir", default="/etc/cni/net.d")
    p.add_argument("--bin-dir", action="append", default=None, help=f"plugin dir (repeatable; default {DEFAULT_PATH})")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR)
    p.add_argument("--network", default="", help="network name (default: the first valid config)")
    p.add_argument("--ifname", default="eth0")
    p.add_argument("--container-id", default="")
    p.add_argument("--args", default="", help="CNI_ARGS, K=V;K2=V2")
    p.add_argument("--timeout", type=float, default=30.0)
    return p


def main(argv: list[str] | None = None) -> int:
    return app.run("cni", args := build_parser().parse_args(argv), lambda: run(args), failures=(PluginError,))


if __name__ == "__main__":
    sys.exit(main())

"""python -m cni add|check|del|status NETNS [--conf-dir D]: cnitool for kubeling's libcni.

NETNS is a name under /run/netns or a path. The network is the conf dir's default (the
first valid file), or --network NAME. The container ID defaults to one derived from the
namespace path, as cnitool does.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from pathlib import Path

from cni.api import DEFAULT_CACHE_DIR, DEFAULT_PATH, CNIConfig, RuntimeConf
from cni.conf import ConfError, load_dir
from cni.invoke import PluginError
from cni.netns import path_of

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cni", description="add, check or delete a CNI network in a namespace")
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


async def _run(a: argparse.Namespace) -> int:
    networks = load_dir(a.conf_dir)
    if a.network:
        networks = [n for n in networks if n.name == a.network]
    if a.command == "status":
        if not networks:
            print(f"no valid networks found in {a.conf_dir}", file=sys.stderr)
            return 1
        net = networks[0]
        print(json.dumps({"network": net.name, "cniVersion": net.cni_version, "source": net.source,
                          "plugins": [p.type for p in net.plugins]}, indent=2))
        return 0
    if not a.netns:
        print("a network namespace is required", file=sys.stderr)
        return 2
    if not networks:
        print(f"no valid networks found in {a.conf_dir}" + (f" named {a.network!r}" if a.network else ""),
              file=sys.stderr)
        return 1
    netns = a.netns if "/" in a.netns else path_of(a.netns)
    if a.command != "del" and not Path(netns).exists():
        print(f"network namespace {netns} does not exist", file=sys.stderr)
        return 1
    container_id = a.container_id or "cnitool-" + hashlib.sha512(netns.encode()).hexdigest()[:20]
    args = tuple(tuple(kv.split("=", 1)) for kv in a.args.split(";") if "=" in kv)
    rt = RuntimeConf(container_id, netns if Path(netns).exists() else "", a.ifname, args)
    cni = CNIConfig(a.bin_dir or DEFAULT_PATH, cache_dir=a.cache_dir, timeout=a.timeout)
    net = networks[0]
    if a.command == "add":
        print(json.dumps((await cni.add_network_list(net, rt)).to_json(), indent=2))
    elif a.command == "check":
        await cni.check_network_list(net, rt)
    else:
        await cni.del_network_list(net, rt)
    return 0


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        return asyncio.run(_run(a))
    except (PluginError, ConfError) as err:
        print(f"cni: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

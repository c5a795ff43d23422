"""cnitool for kubeling's libcni: add, check or delete the default network (the conf
dir's first valid file, or --network NAME) in a namespace, or show it (status)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from cni.api import DEFAULT_PATH, CNIConfig, RuntimeConf
from cni.conf import load_dir
from cni.netns import path_of
from kubeling.options import ConfigError

__all__ = ["run", "NotFound"]


class NotFound(RuntimeError):
    """The network or the namespace is not there (exit 1: the machine's state, not the flags)."""


async def run(a: argparse.Namespace) -> None:
    """The command; a missing argument is a ConfigError, a network or namespace that is not
    there NotFound, a failing plugin a PluginError."""
    networks = load_dir(a.conf_dir)
    if a.network:
        networks = [n for n in networks if n.name == a.network]
    if a.command == "status":
        if not networks:
            raise NotFound(f"no valid networks found in {a.conf_dir}")
        net = networks[0]
        print(json.dumps({"network": net.name, "cniVersion": net.cni_version, "source": net.source,
                          "plugins": [p.type for p in net.plugins]}, indent=2))
        return
    if not a.netns:
        raise ConfigError("a network namespace is required")
    if not networks:
        raise NotFound(f"no valid networks found in {a.conf_dir}" + (f" named {a.network!r}" if a.network else ""))
    netns = a.netns if "/" in a.netns else path_of(a.netns)
    if a.command != "del" and not Path(netns).exists():
        raise NotFound(f"network namespace {netns} does not exist")
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

"""The libcni surface: AddNetworkList, CheckNetworkList, DelNetworkList, GCNetworkList.

    cni = CNIConfig(["/usr/lib/cni"], cache_dir="/var/lib/cni")
    result = await cni.add_network_list(net, RuntimeConf("abc123", "/run/netns/pod1", "eth0"))
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cni.cache import ResultCache
from cni.conf import ConfError, NetworkConfig, NetworkConfigList
from cni.invoke import Executor, PluginError, RawExecutor, execute
from cni.result import Result, ResultError, parse_result, version_tuple

__all__ = ["CNIConfig", "RuntimeConf", "DEFAULT_PATH", "DEFAULT_CACHE_DIR"]

log = logging.getLogger(__name__)

DEFAULT_PATH = ["/opt/cni/bin", "/usr/lib/cni"]
DEFAULT_CACHE_DIR = "/var/lib/cni"


@dataclass(frozen=True)
class RuntimeConf:
    container_id: str
    netns: str                    # path, e.g. /run/netns/<name>; "" when gone (DEL)
    ifname: str = "eth0"
    args: tuple[tuple[str, str], ...] = ()       # CNI_ARGS pairs
    capability_args: dict[str, Any] = field(default_factory=dict)  # portMappings, bandwidth, ...

    def env(self) -> dict[str, str]:
        return {"CNI_CONTAINERID": self.container_id, "CNI_NETNS": self.netns, "CNI_IFNAME": self.ifname,
                "CNI_ARGS": ";".join(f"{k}={v}" for k, v in self.args)}


class CNIConfig:
    def __init__(self, path: Sequence[str] = DEFAULT_PATH, *, cache_dir: str | Path = DEFAULT_CACHE_DIR,
                 executor: Executor | None = None, timeout: float = 30.0) -> None:
        self.path = list(path)
        self.cache = ResultCache(cache_dir)
        self.executor: Executor = executor or RawExecutor()
        self.timeout = timeout
        self._versions: dict[tuple[str, str], list[str]] = {}

    # ------------------------------------------------------------ plugin calls

    def _stdin(self, net: NetworkConfigList, plugin: NetworkConfig, rt: RuntimeConf,
               prev: dict[str, Any] | None) -> dict[str, Any]:
        conf = dict(plugin.raw)
        conf["name"] = net.name
        conf["cniVersion"] = net.cni_version
        conf.pop("runtimeConfig", None)
        runtime = {cap: rt.capability_args[cap] for cap, on in plugin.capabilities.items()
                   if on and cap in rt.capability_args}
        if runtime:
            conf["runtimeConfig"] = runtime
        if prev is not None:
            conf["prevResult"] = prev
        return conf

    async def get_version_info(self, plugin_type: str, cni_version: str = "1.0.0") -> list[str]:
        key = (plugin_type, cni_version)
        if key not in self._versions:
            out = await execute(self.executor, plugin_type, self.path, "VERSION", {},
                                {"cniVersion": cni_version}, self.timeout)
            versions = list((out or {}).get("supportedVersions") or [])
            self._versions[key] = versions
        return self._versions[key]

    async def _negotiate(self, net: NetworkConfigList) -> None:
        for plugin in net.plugins:
            supported = await self.get_version_info(plugin.type, net.cni_version)
            if net.cni_version not in supported:
                raise ConfError(f"plugin {plugin.type} does not support config version {net.cni_version!r} "
                                f"(it supports {', '.join(supported) or 'nothing'})")

    # ------------------------------------------------------------ verbs

    async def add_network_list(self, net: NetworkConfigList, rt: RuntimeConf) -> Result:
        await self._negotiate(net)
        prev: dict[str, Any] | None = None
        for plugin in net.plugins:
            out = await execute(self.executor, plugin.type, self.path, "ADD", rt.env(),
                                self._stdin(net, plugin, rt, prev), self.timeout)
            if out is None:
                raise PluginError(plugin.type, "ADD", "returned no result")
            prev = out
        assert prev is not None
        try:
            result = parse_result(prev, net.cni_version)
        except ResultError as err:
            raise PluginError(net.plugins[-1].type, "ADD", str(err)) from None
        self.cache.write(net.name, rt.container_id, rt.ifname, json.dumps(net.raw).encode(), prev,
                         list(rt.args), rt.capability_args)
        return result

    def cached_result(self, net: NetworkConfigList, rt: RuntimeConf) -> Result | None:
        entry = self.cache.read(net.name, rt.container_id, rt.ifname)
        if entry is None or "result" not in entry:
            return None
        try:
            return parse_result(entry["result"], net.cni_version).convert_to(net.cni_version)
        except ResultError:
            return None

    async def del_network_list(self, net: NetworkConfigList, rt: RuntimeConf) -> None:
        """Idempotent: a missing netns, a missing cache entry or a second DEL all succeed."""
        cached = self.cached_result(net, rt)
        prev = cached.to_json() if cached is not None and version_tuple(net.cni_version) >= (0, 4, 0) else None
        for plugin in reversed(net.plugins):
            await execute(self.executor, plugin.type, self.path, "DEL", rt.env(),
                          self._stdin(net, plugin, rt, prev), self.timeout)
        self.cache.delete(net.name, rt.container_id, rt.ifname)

    async def check_network_list(self, net: NetworkConfigList, rt: RuntimeConf) -> None:
        if version_tuple(net.cni_version) < (0, 4, 0):
            raise ConfError(f"configuration version {net.cni_version!r} does not support the CHECK command")
        if net.disable_check:
            return
        cached = self.cached_result(net, rt)
        if cached is None:
            raise ConfError(f"no cached result for {net.name}/{rt.container_id}/{rt.ifname}: CHECK needs one")
        prev = cached.to_json()
        for plugin in net.plugins:
            try:
                await execute(self.executor, plugin.type, self.path, "CHECK", rt.env(),
                              self._stdin(net, plugin, rt, prev), self.timeout)
            except PluginError as err:
                if plugin.type == "portmap" and rt.capability_args.get("portMappings"):
                    # containernetworking/plugins#819: portmap 1.1.1 fails CHECK whenever
                    # mappings exist, even when its rules are all in place.
                    log.debug("ignoring portmap CHECK failure (plugins#819): %s", err.msg)
                    continue
                raise

    async def gc_network_list(self, net: NetworkConfigList, valid: Sequence[tuple[str, str]]) -> None:
        """Forget attachments not in `valid` ((containerID, ifname) pairs): plugins that speak
        1.1.0 get GC; for older versions the cached results of stale attachments are deleted
        after a DEL (so their IPs are released)."""
        keep = set(valid)
        if version_tuple(net.cni_version) >= (1, 1, 0):
            attachments = [{"containerID": c, "ifname": i} for c, i in keep]
            for plugin in net.plugins:
                conf = self._stdin(net, plugin, RuntimeConf("", ""), None)
                conf["cni.dev/valid-attachments"] = attachments
                await execute(self.executor, plugin.type, self.path, "GC", {}, conf, self.timeout)
            return
        for entry in self.cache.entries(net.name):
            key = (str(entry.get("containerId")), str(entry.get("ifName")))
            if key not in keep:
                await self.del_network_list(net, RuntimeConf(key[0], "", key[1], tuple(
                    tuple(a) for a in entry.get("cniArgs") or ()), entry.get("capabilityArgs") or {}))

"""Network configurations: single-plugin `.conf` files and `.conflist` lists, from a conf dir.

As libcni's conf.go: files ending .conf, .conflist or .json, in sorted order; a plugin
conf becomes a one-plugin list; files without a `type`, with no plugins or with bad JSON
are skipped with a logged reason.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeling.options import ConfigError

__all__ = ["NetworkConfig", "NetworkConfigList", "ConfError", "load_dir", "parse_conflist", "CONF_SUFFIXES"]

log = logging.getLogger(__name__)

CONF_SUFFIXES = (".conf", ".conflist", ".json")


class ConfError(ConfigError):
    """A network configuration that cannot be used (`python -m cni` exits 2)."""


@dataclass(frozen=True)
class NetworkConfig:
    """One plugin's config (a member of a list)."""

    type: str
    raw: dict[str, Any]

    @property
    def capabilities(self) -> dict[str, bool]:
        caps = self.raw.get("capabilities") or {}
        return {k: bool(v) for k, v in caps.items()} if isinstance(caps, dict) else {}


@dataclass(frozen=True)
class NetworkConfigList:
    name: str
    cni_version: str
    plugins: tuple[NetworkConfig, ...]
    disable_check: bool = False
    raw: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def parse_conflist(data: Any, source: str = "") -> NetworkConfigList:
    """A .conflist document, or a single plugin .conf (which becomes a one-plugin list)."""
    if not isinstance(data, dict):
        raise ConfError("the config must be a JSON object")
    if "plugins" not in data:  # a single-plugin conf
        if not data.get("type"):
            raise ConfError("no 'type'; no plugin specified")
        name, version = data.get("name", ""), data.get("cniVersion", "")
        plugin = {k: v for k, v in data.items()}
        return NetworkConfigList(str(name), str(version), (NetworkConfig(str(data["type"]), plugin),),
                                 False, {"name": name, "cniVersion": version, "plugins": [plugin]}, source)
    plugins = data.get("plugins")
    if not isinstance(plugins, list) or not plugins:
        raise ConfError("no plugins in list")
    if not data.get("name"):
        raise ConfError("no 'name' in the network list")
    out = []
    for i, p in enumerate(plugins):
        if not isinstance(p, dict) or not p.get("type"):
            raise ConfError(f"plugins[{i}] has no 'type'")
        out.append(NetworkConfig(str(p["type"]), p))
    return NetworkConfigList(str(data["name"]), str(data.get("cniVersion", "")), tuple(out),
                             bool(data.get("disableCheck", False)), data, source)


def load_dir(conf_dir: str | Path) -> list[NetworkConfigList]:
    """Every valid network in conf_dir, sorted by file name; invalid files are skipped and logged."""
    directory = Path(conf_dir)
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(p for p in directory.iterdir() if p.suffix in CONF_SUFFIXES and p.is_file()):
        try:
            out.append(parse_conflist(json.loads(path.read_text()), str(path)))
        except (OSError, json.JSONDecodeError, ConfError) as err:
            log.warning("CNI config %s skipped: %s", path, err)
    return out

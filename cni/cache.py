"""The result cache, in libcni's layout: <cacheDir>/results/<network>-<containerID>-<ifname>."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from kubeling.atomicfile import replace_file

__all__ = ["ResultCache"]


class ResultCache:
    def __init__(self, cache_dir: str | Path) -> None:
        self.dir = Path(cache_dir) / "results"

    def path(self, network: str, container_id: str, ifname: str) -> Path:
        return self.dir / f"{network}-{container_id}-{ifname}"

    def write(self, network: str, container_id: str, ifname: str, config: bytes, result: dict[str, Any],
              cni_args: list[tuple[str, str]], capability_args: dict[str, Any]) -> None:
        entry = {"kind": "cniCacheV1", "containerId": container_id, "config": base64.b64encode(config).decode(),
                 "ifName": ifname, "networkName": network, "cniArgs": [list(a) for a in cni_args],
                 "capabilityArgs": capability_args, "result": result}
        # write-then-rename: a crash never leaves half a file that DEL would trip over
        replace_file(self.path(network, container_id, ifname), json.dumps(entry).encode())

    def read(self, network: str, container_id: str, ifname: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(network, container_id, ifname).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def delete(self, network: str, container_id: str, ifname: str) -> None:
        try:
            self.path(network, container_id, ifname).unlink()
        except FileNotFoundError:
            pass

    def entries(self, network: str) -> list[dict[str, Any]]:
        out = []
        if self.dir.is_dir():
            for p in self.dir.iterdir():
                if p.name.startswith(f"{network}-"):
                    try:
                        data = json.loads(p.read_text())
                    except (OSError, json.JSONDecodeError):
                        continue
                    if isinstance(data, dict) and data.get("networkName") == network:
                        out.append(data)
        return out

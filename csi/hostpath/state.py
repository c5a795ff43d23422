"""What the driver knows, kept on disk so that a restarted driver knows it too: its volumes
(a directory each), its snapshots (a copy of a volume's directory each), and where each
volume is staged and published on this node.

`<root>/state.json` is rewritten whole (write, fsync, rename) after every change.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Volume", "Snapshot", "State"]


@dataclass
class Volume:
    id: str
    name: str
    capacity: int  # bytes
    node: str  # the node its directory is on
    parameters: dict[str, str] = field(default_factory=dict)
    source_snapshot: str = ""
    source_volume: str = ""
    access_mode: int = 0  # the csi.v1 AccessMode it was created for (0: unknown)
    staged: list[str] = field(default_factory=list)  # staging target paths
    published: dict[str, bool] = field(default_factory=dict)  # target path -> read-only


@dataclass
class Snapshot:
    id: str
    name: str
    source_volume: str
    size: int
    created: float  # seconds since the epoch


class State:
    """The volumes and snapshots of one driver, under root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.volumes_dir = root / "volumes"
        self.snapshots_dir = root / "snapshots"
        self._file = root / "state.json"
        self.volumes: dict[str, Volume] = {}
        self.snapshots: dict[str, Snapshot] = {}
        for d in (self.volumes_dir, self.snapshots_dir):
            d.mkdir(parents=True, exist_ok=True)
        if self._file.exists():
            data = json.loads(self._file.read_text())
            self.volumes = {v["id"]: Volume(**v) for v in data.get("volumes", [])}
            self.snapshots = {s["id"]: Snapshot(**s) for s in data.get("snapshots", [])}

    def volume_path(self, volume_id: str) -> Path:
        return self.volumes_dir / volume_id

    def snapshot_path(self, snapshot_id: str) -> Path:
        return self.snapshots_dir / snapshot_id

    def volume_by_name(self, name: str) -> Volume | None:
        return next((v for v in self.volumes.values() if v.name == name), None)

    def snapshot_by_name(self, name: str) -> Snapshot | None:
        return next((s for s in self.snapshots.values() if s.name == name), None)

    def allocated(self) -> int:
        return sum(v.capacity for v in self.volumes.values())

    def save(self) -> None:
        data = {"volumes": [asdict(v) for v in self.volumes.values()],
                "snapshots": [asdict(s) for s in self.snapshots.values()]}
        tmp = self._file.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._file)

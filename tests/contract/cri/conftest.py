"""Helpers for CRI contract tests: images from the store mounted as bundles for the real runc."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kubelet.cri.images.builtin import build_builtins
from kubelet.cri.images.store import ImageStore
from kubelet.cri.runc import Runc


@dataclass
class Bundles:
    """Makes OCI bundles from store images; unmounts every rootfs at the end."""

    base: Path
    store: ImageStore
    mounted: list[Path] = field(default_factory=list)

    def make(self, name: str, image: str, args: list[str] | None = None) -> Path:
        record = self.store.get(image)
        assert record is not None, image
        bundle = self.base / name
        rootfs, upper, work = bundle / "rootfs", bundle / "upper", bundle / "work"
        for d in (rootfs, upper, work):
            d.mkdir(parents=True)
        lowerdir = ":".join(str(p) for p in reversed(self.store.unpack(record)))  # top layer first
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lowerdir},upperdir={upper},workdir={work}", str(rootfs)], check=True)
        self.mounted.append(rootfs)
        subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
        config = json.loads((bundle / "config.json").read_text())
        config["process"]["terminal"] = False
        config["process"]["args"] = args or record.run_config.get("Entrypoint") or record.run_config["Cmd"]
        config["root"]["readonly"] = False
        (bundle / "config.json").write_text(json.dumps(config))
        return bundle


@pytest.fixture
def bundles(tmp_path: Path) -> Iterator[Bundles]:
    store = ImageStore(tmp_path / "images")
    build_builtins(store)
    made = Bundles(tmp_path / "bundles", store)
    yield made
    for rootfs in made.mounted:
        subprocess.run(["umount", str(rootfs)], capture_output=True)


@pytest.fixture
async def runc(tmp_path: Path) -> AsyncIterator[Runc]:
    """A runc driver with a private state root; deletes whatever the test left."""
    driver = Runc(tmp_path / "runc-root")
    yield driver
    for state in await driver.list_containers():
        await driver.delete(state.id, force=True)

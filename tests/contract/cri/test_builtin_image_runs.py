"""The built-in images run under the real runc, from their unpacked layers stacked by overlayfs.

This is the contract between the image store and the runtime: an unpacked
layer directory is a valid overlay lowerdir and the busybox root filesystem
works as a container's rootfs.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet.cri.images.builtin import PAUSE_IMAGE, build_builtins
from kubelet.cri.images.store import ImageStore


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[tuple[ImageStore, Path, str]]:
    store = ImageStore(tmp_path / "images")
    build_builtins(store)
    container_id = f"kubeling-test-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "bundle"
    (path / "rootfs").mkdir(parents=True)
    yield store, path, container_id
    subprocess.run(["runc", "delete", "--force", container_id], capture_output=True)
    subprocess.run(["umount", str(path / "rootfs")], capture_output=True)


def _mount_image(store: ImageStore, image: str, bundle: Path) -> None:
    record = store.get(image)
    assert record is not None
    lowers = store.unpack(record)
    upper, work = bundle / "upper", bundle / "work"
    upper.mkdir()
    work.mkdir()
    lowerdir = ":".join(str(p) for p in reversed(lowers))  # overlay wants the top layer first
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lowerdir},upperdir={upper},workdir={work}", str(bundle / "rootfs")], check=True)


def _spec(bundle: Path, args: list[str]) -> None:
    subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
    config_path = bundle / "config.json"
    config = json.loads(config_path.read_text())
    config["process"]["terminal"] = False
    config["process"]["args"] = args
    config["root"]["readonly"] = False
    config_path.write_text(json.dumps(config))


def test_busybox_runs_and_writes_only_to_its_upper_dir(bundle: tuple[ImageStore, Path, str]) -> None:
    store, path, container_id = bundle
    _mount_image(store, "busybox", path)
    _spec(path, ["sh", "-c", "echo written > /tmp/out; head -1 /etc/passwd; ls /bin | wc -l"])
    out = path / "stdout"
    with open(out, "wb") as stdout:  # a pipe would hang runc (MACHINE-FACTS)
        result = subprocess.run(["runc", "run", "--bundle", str(path), container_id],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT, timeout=30)
    lines = out.read_text().split()
    assert result.returncode == 0, out.read_text()
    assert lines[0] == "root:x:0:0:root:/root:/bin/sh"
    assert int(lines[1]) > 50  # applet symlinks resolve inside the container
    assert (path / "upper" / "tmp" / "out").read_text() == "written\n"
    record = store.get("busybox")
    assert record is not None
    assert not (store.layer_dir(record.layers[0].diff_id) / "tmp" / "out").exists()


def test_pause_image_holds_until_killed(bundle: tuple[ImageStore, Path, str]) -> None:
    store, path, container_id = bundle
    _mount_image(store, PAUSE_IMAGE, path)
    record = store.get(PAUSE_IMAGE)
    assert record is not None
    _spec(path, record.run_config["Entrypoint"])
    subprocess.run(["runc", "create", "--bundle", str(path), container_id], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    subprocess.run(["runc", "start", container_id], check=True, timeout=30)
    state = json.loads(subprocess.run(["runc", "state", container_id], check=True,
                                      capture_output=True, text=True).stdout)
    assert state["status"] == "running"
    subprocess.run(["runc", "kill", container_id, "KILL"], check=True)

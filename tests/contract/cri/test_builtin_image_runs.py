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

import pytest

from cri.images.builtin import PAUSE_IMAGE
from tests.contract.cri.conftest import Bundles


@pytest.fixture
def container_id() -> Iterator[str]:
    name = f"kubeling-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["runc", "delete", "--force", name], capture_output=True)


def test_busybox_runs_and_writes_only_to_its_upper_dir(bundles: Bundles, container_id: str) -> None:
    path = bundles.make("busybox", "busybox",
                        ["sh", "-c", "echo written > /tmp/out; head -1 /etc/passwd; ls /bin | wc -l"])
    out = path / "stdout"
    with open(out, "wb") as stdout:  # a pipe would hang runc (MACHINE-FACTS)
        result = subprocess.run(["runc", "run", "--bundle", str(path), container_id],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT, timeout=30)
    lines = out.read_text().split()
    assert result.returncode == 0, out.read_text()
    assert lines[0] == "root:x:0:0:root:/root:/bin/sh"
    assert int(lines[1]) > 50  # applet symlinks resolve inside the container
    assert (path / "upper" / "tmp" / "out").read_text() == "written\n"
    record = bundles.store.get("busybox")
    assert record is not None
    assert not (bundles.store.layer_dir(record.layers[0].diff_id) / "tmp" / "out").exists()


def test_pause_image_holds_until_killed(bundles: Bundles, container_id: str) -> None:
    path = bundles.make("pause", PAUSE_IMAGE)
    subprocess.run(["runc", "create", "--bundle", str(path), container_id], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    subprocess.run(["runc", "start", container_id], check=True, timeout=30)
    state = json.loads(subprocess.run(["runc", "state", container_id], check=True,
                                      capture_output=True, text=True).stdout)
    assert state["status"] == "running"
    subprocess.run(["runc", "kill", container_id, "KILL"], check=True)

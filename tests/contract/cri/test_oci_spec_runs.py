"""A container spec from cri.oci_spec runs under the real runc and joins its
sandbox (a pause container): hostname, pid namespace, network namespace, /etc files,
env, user and memory limit are what the spec says."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from cri.images.builtin import PAUSE_IMAGE
from cri.oci_spec import SandboxContext, container_spec
from cri.runc import Runc
from protos.runtime.v1 import api_pb2
from tests.contract.cri.conftest import Bundles
from tests.wait import until

SCRIPT = ("hostname; cat /etc/hosts; echo $GREETING; id -u; ps -o args | grep -c '^/pause -P'; "
          "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; readlink /proc/self/ns/net")



async def test_container_joins_its_sandbox(runc: Runc, bundles: Bundles, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    pause_bundle = bundles.make("pause", PAUSE_IMAGE)
    pause_config = json.loads((pause_bundle / "config.json").read_text())
    pause_config["hostname"] = "web-0"
    (pause_bundle / "config.json").write_text(json.dumps(pause_config))
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        await runc.create(f"pause-{suffix}", pause_bundle, stdout=devnull, stderr=devnull)
    finally:
        os.close(devnull)
    await runc.start(f"pause-{suffix}")
    pause = await runc.state(f"pause-{suffix}")
    assert pause is not None and pause.status == "running"

    etc = tmp_path / "sandbox-etc"
    etc.mkdir()
    (etc / "hosts").write_text("10.0.0.7\tweb-0\n")
    sandbox = SandboxContext(hostname="web-0", pause_pid=pause.pid, netns_path=f"/proc/{pause.pid}/ns/net",
                             etc_dir=etc, cgroup_parent="")
    app = bundles.make("app", "busybox")
    config = api_pb2.ContainerConfig(
        metadata=api_pb2.ContainerMetadata(name="app"), command=["sh", "-c", SCRIPT],
        envs=[api_pb2.KeyValue(key="GREETING", value="hello")],
        linux=api_pb2.LinuxContainerConfig(
            resources=api_pb2.LinuxContainerResources(memory_limit_in_bytes=64 << 20),
            security_context=api_pb2.LinuxContainerSecurityContext(run_as_user=api_pb2.Int64Value(value=1000))))
    record = bundles.store.get("busybox")
    assert record is not None
    spec = container_spec(f"app-{suffix}", config, record.run_config, app / "rootfs", sandbox)
    (app / "config.json").write_text(json.dumps(spec))

    out_path = tmp_path / "out"
    with open(out_path, "wb") as out:
        await runc.create(f"app-{suffix}", app, stdout=out.fileno(), stderr=out.fileno())
    await runc.start(f"app-{suffix}")
    await until(lambda: runc.state(f"app-{suffix}"), "the app container stopped", timeout=10,
                check=lambda state: state is not None and state.status == "stopped")
    lines = out_path.read_text().splitlines()
    assert lines[0] == "web-0", lines
    assert lines[1] == "10.0.0.7\tweb-0"
    assert lines[2:6] == ["hello", "1000", "1", str(64 << 20)], lines
    assert lines[6] == os.readlink(f"/proc/{pause.pid}/ns/net")

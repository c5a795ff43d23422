"""What a kubelet keeps tidy on its node, on a real kubelet and runtime: container logs
rotated past containerLogMaxSize with at most containerLogMaxFiles kept (older rotated
files compressed), unused images collected when the image filesystem is above the high
threshold (pinned and used ones kept, FreeDiskSpaceFailed when not enough could go), the
node's status naming its images and an allocatable less what is reserved."""

from __future__ import annotations

from pathlib import Path

from cri.images.builtin import DEFAULT_BUSYBOX, BuiltinImage, build_image, busybox_layer
from kubeling.quantity import parse_quantity
from tests.e2e.conftest import Cluster, container, pod
from tests.wait import until


async def test_container_logs_are_rotated(cluster: Cluster) -> None:
    node = await cluster.add_node(1, container_log_max_size="2Ki", container_log_max_files=4,
                                  container_log_monitor_interval=0.2)
    chatty = container("c", "sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i of a chatty container; "
                                        "sleep 0.005; done")
    running = await cluster.client.pods.create(pod("chatty", chatty))
    log_dir = Path(node.config.pod_logs_dir) / f"default_chatty_{running.metadata.uid}" / "c"

    def files() -> list[str]:
        return sorted(p.name for p in log_dir.iterdir()) if log_dir.exists() else []
    await until(files, timeout=60, what="three rotations, the older ones compressed",
                check=lambda names: any(n.endswith(".gz") for n in names) and len(names) == 4)
    for _ in range(20):  # it keeps rotating, never keeping more than four files
        names = files()
        assert len(names) <= 4 and "0.log" in names, names
    logs = b"".join([chunk async for chunk in cluster.client.pods.logs("chatty", "default", tail_lines=1)])
    assert logs.startswith(b"line ") and logs.endswith(b" of a chatty container\n"), logs


async def test_unused_images_are_collected_and_the_node_tells_its_images(cluster: Cluster) -> None:
    node = await cluster.add_node(1, image_gc_high_threshold_percent=1, image_gc_low_threshold_percent=0,
                                  image_minimum_gc_age=0.0, image_gc_period=0.5,
                                  system_reserved={"cpu": "100m", "memory": "100Mi"})
    assert node.cri is not None and node.runtime is not None
    runtime = node.runtime
    spare = "kubeling.test/unused:1"
    build_image(node.cri.images, BuiltinImage(spare, entrypoint=None, cmd=["true"]), DEFAULT_BUSYBOX,
                "busybox-static", busybox_layer)
    await cluster.client.pods.create(pod("user", container("c", "sleep", "3600")))
    await cluster.wait_pod("user", lambda p: p.status.phase == "Running")

    async def names() -> set[str]:
        return {tag for image in await runtime.list_images() for tag in image.repo_tags}
    left = await until(names, timeout=60, what="the unused image collected", check=lambda tags: all(
        not t.startswith("kubeling.test/unused") for t in tags))
    assert any("busybox" in t for t in left) and any("pause" in t for t in left), left  # in use, pinned

    async def failed() -> list[str]:
        events, _ = await cluster.client.events.list_all("default", field_selector=f"involvedObject.name="
                                                                                  f"{node.config.node_name}")
        return [e.message for e in events if e.reason == "FreeDiskSpaceFailed"]
    told = await until(failed, timeout=30, what="FreeDiskSpaceFailed", check=bool)
    assert told[0].startswith("Failed to garbage collect required amount of images. Attempted to free ")

    status = await until(lambda: cluster.client.nodes.get(node.config.node_name), timeout=30,
                         check=lambda n: bool(n.status.images), what="status.images")
    assert any(any("busybox" in name for name in image.names) for image in status.status.images)
    capacity, allocatable = status.status.capacity, status.status.allocatable
    assert parse_quantity(capacity["cpu"]).milli_value() - parse_quantity(allocatable["cpu"]).milli_value() == 100
    held = parse_quantity(capacity["memory"]).int_value() - parse_quantity(allocatable["memory"]).int_value()
    assert held == 200 * 1024 * 1024  # system-reserved 100Mi and the 100Mi hard eviction threshold

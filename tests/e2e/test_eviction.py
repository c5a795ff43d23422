"""Node-pressure eviction on a real kubelet: a pod whose memory takes the node below its
memory.available threshold is evicted (Failed, Evicted, upstream's message and
DisruptionTarget condition) while a pod within its request stays; the node reports
MemoryPressure and carries the memory-pressure taint until the pressure has passed. The
threshold is set relative to what the machine has free when the test starts, so the hog
(1000 MiB held by dd) crosses it on any machine with room for it."""

from __future__ import annotations

from pathlib import Path

from controllers.manager import ControllerManager
from protos.kubeling.v1 import core_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.test_node_conformance import _events
from tests.wait import until

HOG_MIB = 1000
MARGIN_MIB = 600  # the threshold sits this far below what is free at the start


def _mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise AssertionError("no MemAvailable in /proc/meminfo")


async def test_a_memory_hog_is_evicted_and_the_node_reports_pressure(cluster: Cluster,
                                                                     controllers: ControllerManager) -> None:
    threshold = _mem_available_kib() - MARGIN_MIB * 1024
    assert threshold > 0, "the machine has less than the test's margin free"
    node = await cluster.add_node(1, eviction_hard={"memory.available": f"{threshold}Ki"},
                                  eviction_pressure_transition_period=15.0, eviction_monitoring_period=0.5)
    client = cluster.client
    modest = container("c", "sleep", "3600")
    modest.resources.requests["memory"] = "50Mi"
    await client.pods.create(pod("bystander", modest))
    await cluster.wait_pod("bystander", lambda p: p.status.phase == "Running")
    await client.pods.create(pod("hog", container("c", "sh", "-c", f"dd if=/dev/zero bs={HOG_MIB}M count=1 | "
                                                  "sleep 3600")))

    evicted = await cluster.wait_pod("hog", lambda p: p.status.phase == "Failed", timeout=90)
    assert evicted.status.reason == "Evicted"
    assert evicted.status.message.startswith("The node was low on resource: memory. Threshold quantity: "
                                             f"{threshold}Ki, available: "), evicted.status.message
    assert "Container c was using " in evicted.status.message and "request is 0" in evicted.status.message
    target = next(c for c in evicted.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    assert (await _events(cluster, "hog", "Evicted"))[0] == evicted.status.message
    assert not evicted.status.containerStatuses[0].state.HasField("running")

    name = node.config.node_name

    def pressure(n: core_pb2.Node) -> str:
        return next((c.status for c in n.status.conditions if c.type == "MemoryPressure"), "")

    def tainted(n: core_pb2.Node) -> bool:
        return any(t.key == "node.kubernetes.io/memory-pressure" and t.effect == "NoSchedule" for t in n.spec.taints)

    await until(lambda: client.nodes.get(name), timeout=30, check=lambda n: pressure(n) == "True" and tainted(n),
                what="MemoryPressure and its taint")
    await until(lambda: client.nodes.get(name), timeout=60, check=lambda n: pressure(n) == "False" and not tainted(n),
                what="the pressure gone, and the taint")
    bystander = await client.pods.get("bystander", "default")
    assert bystander.status.phase == "Running" and bystander.status.containerStatuses[0].restartCount == 0

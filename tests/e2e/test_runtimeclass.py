"""RuntimeClasses on a real kubelet and CRI runtime: a pod naming a class is scheduled and
run with the class's handler (`runc`, the runtime's default named as containerd's), its
overhead initialized; a handler the runtime does not have leaves the pod Pending with
FailedCreatePodSandBox in containerd's words. Names follow upstream's conformance tests
([sig-node] RuntimeClass)."""

from __future__ import annotations

from kubeling import errors
from protos.kubeling.v1 import meta_pb2, node_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.wait import until


async def _runtime_class(cluster: Cluster, name: str, handler: str, **overhead: str) -> None:
    await cluster.client.runtimeclasses.create(node_pb2.RuntimeClass(
        metadata=meta_pb2.ObjectMeta(name=name), handler=handler,
        overhead=node_pb2.RuntimeClassOverhead(podFixed=overhead) if overhead else None))


async def _create(cluster: Cluster, name: str, runtime_class: str) -> None:
    async def created() -> bool:  # the class may be a moment away from the apiserver's cache
        try:
            await cluster.client.pods.create(pod(name, container("c", "sleep", "3600"),
                                                 runtimeClassName=runtime_class))
        except errors.Forbidden:
            return False
        return True
    await until(created, timeout=10, what=f"{name} admitted")


async def test_can_schedule_a_pod_requesting_existing_runtimeclass(cluster: Cluster) -> None:
    """Can schedule a pod requesting existing RuntimeClass ([sig-node] RuntimeClass should
    schedule a Pod requesting a RuntimeClass without PodOverhead): scheduled, no overhead,
    and run here with the handler."""
    await cluster.add_node(1)
    await _runtime_class(cluster, "preconfigured-handler", "runc")
    await _create(cluster, "with-class", "preconfigured-handler")
    running = await cluster.wait_pod("with-class", lambda p: p.status.phase == "Running", timeout=60)
    assert running.spec.nodeName and not running.spec.overhead


async def test_runtimeclass_overhead_field_must_be_respected(cluster: Cluster) -> None:
    """RuntimeClass Overhead field must be respected ([sig-node] RuntimeClass should schedule
    a Pod requesting a RuntimeClass and initialize its Overhead)."""
    await cluster.add_node(1)
    await _runtime_class(cluster, "with-overhead", "runc", cpu="10m", memory="1Mi")
    await _create(cluster, "overhead", "with-overhead")
    scheduled = await cluster.wait_pod("overhead", lambda p: bool(p.spec.nodeName), timeout=60)
    assert dict(scheduled.spec.overhead) == {"cpu": "10m", "memory": "1Mi"}


async def test_a_handler_the_runtime_does_not_have(cluster: Cluster) -> None:
    """(upstream's, not in the conformance list: should reject a Pod requesting a RuntimeClass
    with an unconfigured handler) the sandbox is refused, the pod stays Pending."""
    await cluster.add_node(1)
    await _runtime_class(cluster, "unconfigured", "unconfigured-handler")
    await _create(cluster, "stuck", "unconfigured")

    async def refused() -> str | None:
        events, _ = await cluster.client.events.list_all("default", field_selector="involvedObject.name=stuck")
        found = [e.message for e in events if e.reason == "FailedCreatePodSandBox"]
        return found[0] if found else None
    message = await until(refused, timeout=30, what="FailedCreatePodSandBox")
    assert 'no runtime for "unconfigured-handler" is configured' in message, message
    assert (await cluster.client.pods.get("stuck", "default")).status.phase == "Pending"

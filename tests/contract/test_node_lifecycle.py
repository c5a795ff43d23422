"""The controller manager's node lifecycle and NoExecute eviction (controllers/) against a
real apiserver: a node whose Lease stops being renewed turns Unknown and gets upstream's
unreachable taints, its pods are marked not Ready and evicted after their
tolerationSeconds (DefaultTolerationSeconds gives every pod 300), and the node is
untainted when its kubelet is back."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from controllers.manager import ControllerManager, ManagerConfig
from controllers.nodelifecycle import UNREACHABLE
from controllers.tainteviction import eviction_time
from kubeling import errors
from kubeling.client import Client
from kubeling.leaderelection import ElectionConfig
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2
from tests.objects import pod
from tests.wait import holds


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


class FakeKubelet:
    """Heartbeats as a kubelet writes them (its Lease, its Ready condition): the one part
    a test must be able to stop at will. Named a fake: everything else is real."""

    def __init__(self, client: Client, node: str) -> None:
        self.client, self.node = client, node
        self.task: asyncio.Task[None] | None = None
        self.renewed = 0.0  # monotonic time the last Lease renewal was sent

    async def start(self) -> None:
        lease = coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(name=self.node, namespace="kube-node-lease"),
                                       spec=coordination_pb2.LeaseSpec(holderIdentity=self.node,
                                                                       leaseDurationSeconds=40))
        with contextlib.suppress(Exception):
            await self.client.leases.create(lease)
        while True:  # as a kubelet: again on a conflict (the apiserver's node IPAM writes the new node too)
            node = await self.client.nodes.get(self.node)
            del node.status.conditions[:]
            node.status.conditions.add(type="Ready", status="True", reason="KubeletReady")
            node.status.conditions[0].lastHeartbeatTime.GetCurrentTime()
            try:
                await self.client.nodes.update_status(node)
                break
            except errors.Conflict:
                continue
        self.task = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            lease = await self.client.leases.get(self.node, "kube-node-lease")
            lease.spec.renewTime.GetCurrentTime()
            sent = time.monotonic()  # the controller sees the renewal after this
            await self.client.leases.update(lease)
            self.renewed = sent
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


@pytest.fixture
async def manager(client: Client) -> AsyncIterator[ControllerManager]:
    made = ControllerManager(Client(client.address), ManagerConfig(
        node_monitor_grace_period=1.0, node_monitor_period=0.2, eviction_period=0.2,
        election=ElectionConfig(name="kube-controller-manager", lease_duration=2.0, renew_deadline=1.5,
                                retry_period=0.2)))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


async def test_an_unreachable_node_is_tainted_its_pods_evicted_then_healed(client: Client,
                                                                          manager: ControllerManager) -> None:
    await client.nodes.create(core_pb2.Node(metadata=meta_pb2.ObjectMeta(name="n1")))
    kubelet = FakeKubelet(client, "n1")
    await kubelet.start()
    made = {}
    for name, seconds in (("patient", None), ("short", 3), ("gone-at-once", 0)):
        p = pod(name, node="n1")
        if seconds is not None:
            p.spec.tolerations.add(key=UNREACHABLE, operator="Exists", effect="NoExecute", tolerationSeconds=seconds)
        made[name] = created = await client.pods.create(p)
        created.status.phase = "Running"
        created.status.conditions.add(type="Ready", status="True")
        await client.pods.update_status(created)
    assert [(t.key, t.tolerationSeconds) for t in made["patient"].spec.tolerations] == [
        ("node.kubernetes.io/not-ready", 300), (UNREACHABLE, 300)]  # DefaultTolerationSeconds

    async def leading() -> bool:
        return manager.leading
    await _until(leading, "the controller manager to lead")
    # longer than the grace period, with heartbeats: nothing happens
    await holds(lambda: client.nodes.get("n1"), "the heartbeating node Ready and untainted", 1.5,
                check=lambda node: not node.spec.taints and node.status.conditions[0].status == "True")

    await kubelet.stop()

    async def unknown() -> bool:
        n = await client.nodes.get("n1")
        return any(c.type == "Ready" and c.status == "Unknown" for c in n.status.conditions) and \
            {(t.key, t.effect) for t in n.spec.taints} == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    await _until(unknown, "the node to turn Unknown and be tainted")
    # not before the grace period after the last heartbeat (up to one renewal interval
    # before the kubelet stopped)
    assert time.monotonic() - kubelet.renewed >= 1.0
    ready = next(c for c in (await client.nodes.get("n1")).status.conditions if c.type == "Ready")
    assert (ready.reason, ready.message) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")

    async def evicted(name: str) -> bool:
        return (await client.pods.get(name)).metadata.HasField("deletionTimestamp")
    await _until(lambda: evicted("gone-at-once"), "the pod without patience to be evicted")
    await _until(lambda: evicted("short"), "the pod tolerating 3 s to be evicted")
    # Judged on the stored timestamps, not on when this test polled: a slow host may see both at once.
    tainted = next(t for t in (await client.nodes.get("n1")).spec.taints if t.effect == "NoExecute")
    # (both with the same grace period, so their deletionTimestamps are their eviction times shifted alike)
    at_once = (await client.pods.get("gone-at-once")).metadata.deletionTimestamp.seconds
    later = (await client.pods.get("short")).metadata.deletionTimestamp.seconds
    assert later - at_once >= 2 and later >= tainted.timeAdded.seconds + 3
    patient = await client.pods.get("patient")
    assert not patient.metadata.HasField("deletionTimestamp")
    assert next(c for c in patient.status.conditions if c.type == "Ready").status == "False"

    await kubelet.start()  # back: Ready again, untainted

    async def healed() -> bool:
        return not (await client.nodes.get("n1")).spec.taints
    await _until(healed, "the node's taints to go")
    await kubelet.stop()


def test_eviction_time_as_upstreams_taint_manager() -> None:
    taint = core_pb2.Taint(key=UNREACHABLE, effect="NoExecute")
    taint.timeAdded.seconds = 1000
    p = pod("p")
    assert eviction_time(p, [taint]) == 1000  # not tolerated: at once
    p.spec.tolerations.add(key=UNREACHABLE, operator="Exists", effect="NoExecute", tolerationSeconds=30)
    assert eviction_time(p, [taint]) == 1030
    p.spec.tolerations.add(operator="Exists", effect="NoExecute")  # and one without limit: for good
    assert eviction_time(p, [taint]) is None

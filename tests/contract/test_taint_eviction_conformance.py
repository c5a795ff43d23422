"""The NoExecute taint manager's conformance tests ('[sig-node] NoExecuteTaintManager')
against a real apiserver with the controller manager: pods tolerating a NoExecute taint
for a while are evicted in the order their tolerations run out, and removing the taint
in time keeps the pod. Upstream's times (5 s, 25 s, 60 s) are shortened; the order and
the outcome are what is checked, from the deletion timestamps the controller wrote."""

from __future__ import annotations

from controllers.manager import ControllerManager
from controllers.nodelifecycle import UNREACHABLE
from kubeling.client import Client
from kubeling.timestamps import now
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.objects import pod
from tests.wait import holds, until

KEY = "kubernetes.io/e2e-evict-taint-key"


async def _node_and_pods(client: Client, name: str, tolerations: dict[str, int]) -> None:
    node = core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name))
    # a node the lifecycle controller leaves alone: Ready, heartbeating as far as this test lasts
    node.status.conditions.add(type="Ready", status="True", lastHeartbeatTime=now())
    await client.nodes.create(node)
    for pod_name, seconds in tolerations.items():
        p = pod(pod_name, node=name)
        p.spec.tolerations.add(key=KEY, operator="Equal", value="evictTaintVal", effect="NoExecute",
                               tolerationSeconds=seconds)
        p.spec.tolerations.add(key=UNREACHABLE, operator="Exists", effect="NoExecute")
        await client.pods.create(p)


async def _taint(client: Client, name: str, present: bool) -> None:
    node = await client.nodes.get(name)
    del node.spec.taints[:]
    if present:
        node.spec.taints.add(key=KEY, value="evictTaintVal", effect="NoExecute", timeAdded=now())
    await client.nodes.update(node)


async def _deleted_at(client: Client, name: str) -> float:
    p = await until(lambda: client.pods.get(name), timeout=30, what=f"{name} evicted",
                    check=lambda found: found.metadata.HasField("deletionTimestamp"))
    return p.metadata.deletionTimestamp.seconds + p.metadata.deletionTimestamp.nanos / 1e9


async def test_pod_eviction_toleration_limits(client: Client, manager: ControllerManager) -> None:
    """Pod Eviction, Toleration limits ('[sig-node] NoExecuteTaintManager Multiple Pods
    evicts pods with minTolerationSeconds'): two pods tolerating the taint for 1 s and 4 s
    are evicted in that order, each not before its time."""
    await _node_and_pods(client, "taint-limits", {"taint-eviction-b1": 1, "taint-eviction-b2": 4})
    await _taint(client, "taint-limits", True)
    tainted = next(t for t in (await client.nodes.get("taint-limits")).spec.taints if t.key == KEY).timeAdded
    start = tainted.seconds + tainted.nanos / 1e9
    first, second = await _deleted_at(client, "taint-eviction-b1"), await _deleted_at(client, "taint-eviction-b2")
    # deletionTimestamp is the eviction time plus the pod's grace period (the same for both)
    assert second - first >= 2.5 and first - start >= 1 - 1e-3


async def test_taint_pod_eviction_on_taint_removal(client: Client, manager: ControllerManager) -> None:
    """Taint, Pod Eviction on taint removal ('[sig-node] NoExecuteTaintManager Single Pod
    removing taint cancels eviction'): the taint removed before the toleration ran out, the
    pod stays, past the time it would have gone."""
    await _node_and_pods(client, "taint-removal", {"taint-eviction-4": 3})
    await _taint(client, "taint-removal", True)
    await _taint(client, "taint-removal", False)
    await holds(lambda: client.pods.get("taint-eviction-4"), "the pod kept", 4.5,
                check=lambda found: not found.metadata.HasField("deletionTimestamp"))

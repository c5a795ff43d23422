"""The volume plugins with upstream's vectors (volume_binding_test.go, volume_restrictions_test.go,
nodevolumelimits/csi_test.go): their verdicts and their FailedScheduling words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.framework.storage import StorageListers
from scheduler.plugins.nodevolumelimits import NodeVolumeLimits
from scheduler.plugins.volumebinding import VolumeBinding
from scheduler.plugins.volumebinding.volume_binding import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    NOT_ENOUGH_SPACE,
    PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
)
from scheduler.plugins.volumerestrictions import VolumeRestrictions
from scheduler.plugins.volumerestrictions.volume_restrictions import RWOP_CONFLICT
from tests.unit.scheduler.builders import SnapshotHandle, make_pod, snapshot_of

ZONE = "topology.hostpath.csi.kubeling.io/node"


def claim(name: str, *, volume: str = "", cls: str = "", size: str = "1Gi",
          modes: tuple[str, ...] = ("ReadWriteOnce",)) -> core_pb2.PersistentVolumeClaim:
    c = core_pb2.PersistentVolumeClaim(metadata=meta_pb2.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
                                       spec=core_pb2.PersistentVolumeClaimSpec(
                                           accessModes=list(modes), volumeName=volume, storageClassName=cls,
                                           resources=core_pb2.VolumeResourceRequirements(requests={"storage": size})))
    if volume:
        c.status.phase = "Bound"
    return c


def volume(name: str, *, node: str = "", cls: str = "", size: str = "1Gi", claim_ref: str = "",
           driver: str = "") -> core_pb2.PersistentVolume:
    v = core_pb2.PersistentVolume(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PersistentVolumeSpec(
        capacity={"storage": size}, accessModes=["ReadWriteOnce"], storageClassName=cls))
    if driver:
        v.spec.csi.driver, v.spec.csi.volumeHandle = driver, f"handle-{name}"
    else:
        v.spec.hostPath.path = f"/tmp/{name}"
    if node:
        v.spec.nodeAffinity.required.nodeSelectorTerms.add().matchExpressions.add(key=ZONE, operator="In",
                                                                                 values=[node])
    if claim_ref:
        v.spec.claimRef.namespace, v.spec.claimRef.name, v.spec.claimRef.uid = "default", claim_ref, f"uid-{claim_ref}"
    v.status.phase = "Bound" if claim_ref else "Available"
    return v


def sc(name: str, *, wait: bool = True, provisioner: str = "hostpath.csi.kubeling.io",
       topology: list[str] | None = None) -> storage_pb2.StorageClass:
    out = storage_pb2.StorageClass(metadata=meta_pb2.ObjectMeta(name=name), provisioner=provisioner,
                                   volumeBindingMode="WaitForFirstConsumer" if wait else "Immediate")
    if topology:
        out.allowedTopologies.add().matchLabelExpressions.add(key=ZONE, values=topology)
    return out


def with_claims(*names: str) -> core_pb2.Pod:
    pod = make_pod("p", {"cpu": "100m"})
    for n in names:
        pod.spec.volumes.add(name=n, persistentVolumeClaim=core_pb2.PersistentVolumeClaimVolumeSource(claimName=n))
    return pod


class Cluster:
    def __init__(self, pods: Sequence[core_pb2.Pod] = (), claims: Sequence[core_pb2.PersistentVolumeClaim] = (),
                 volumes: Sequence[core_pb2.PersistentVolume] = (), classes: Sequence[storage_pb2.StorageClass] = (),
                 csinodes: Sequence[storage_pb2.CSINode] = (), drivers: Sequence[storage_pb2.CSIDriver] = (),
                 capacities: Sequence[storage_pb2.CSIStorageCapacity] = ()) -> None:
        self.snap = snapshot_of({"node-a": {ZONE: "node-a"}, "node-b": {ZONE: "node-b"}}, list(pods))
        self.handle = SnapshotHandle(self.snap)
        by_claim = {(c.metadata.namespace, c.metadata.name): c for c in claims}
        by_volume = {v.metadata.name: v for v in volumes}
        self.handle.storage_listers = StorageListers(
            claim=lambda ns, n: by_claim.get((ns, n)), volume=by_volume.get, volumes=lambda: list(volumes),
            storage_class={s.metadata.name: s for s in classes}.get,
            csi_node={n.metadata.name: n for n in csinodes}.get,
            csi_driver={d.metadata.name: d for d in drivers}.get, capacities=lambda: list(capacities))

    def run(self, plugin_cls: Any, pod: core_pb2.Pod) -> dict[str, tuple[Code, str]]:
        """PreFilter, then Filter on each node: node -> (code, message); "*" for PreFilter's verdict."""
        plugin = plugin_cls({}, self.handle)
        state = CycleState()
        nodes = self.snap.node_infos()
        _, status = plugin.pre_filter(state, pod, nodes)
        if not status.ok:
            return {"*": (status.code, status.message)}
        return {n.name: (s.code, s.message) for n in nodes for s in [plugin.filter(state, pod, n)]}


OK = (Code.SUCCESS, "")


def test_volume_binding_prefilter_rejections() -> None:
    assert Cluster().run(VolumeBinding, with_claims())["*"][0] == Code.SKIP
    assert Cluster().run(VolumeBinding, with_claims("missing")) == {
        "*": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "missing" not found')}
    immediate = Cluster(claims=[claim("c", cls="now")], classes=[sc("now", wait=False)])
    assert immediate.run(VolumeBinding, with_claims("c")) == {"*": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                                      UNBOUND_IMMEDIATE)}
    deleting = claim("c")
    deleting.metadata.deletionTimestamp.seconds = 1
    assert Cluster(claims=[deleting]).run(VolumeBinding, with_claims("c")) == {
        "*": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "c" is being deleted')}


def test_volume_binding_bound_claims_follow_their_volumes_node_affinity() -> None:
    cluster = Cluster(claims=[claim("c", volume="pv")], volumes=[volume("pv", node="node-b", claim_ref="c")])
    assert cluster.run(VolumeBinding, with_claims("c")) == {
        "node-a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NODE_CONFLICT), "node-b": OK}
    gone = Cluster(claims=[claim("c", volume="pv")])
    assert gone.run(VolumeBinding, with_claims("c"))["node-a"] == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, PV_NOT_EXIST)


def test_volume_binding_delayed_claims_find_a_volume_or_a_provisioner() -> None:
    static = Cluster(claims=[claim("c", cls="wait")], classes=[sc("wait", provisioner="kubernetes.io/no-provisioner")],
                     volumes=[volume("small", node="node-a", cls="wait", size="500Mi"),
                              volume("fits", node="node-b", cls="wait", size="2Gi")])
    assert static.run(VolumeBinding, with_claims("c")) == {
        "node-a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, BIND_CONFLICT), "node-b": OK}
    provisioned = Cluster(claims=[claim("c", cls="wait")], classes=[sc("wait", topology=["node-a"])])
    assert provisioned.run(VolumeBinding, with_claims("c")) == {
        "node-a": OK, "node-b": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, BIND_CONFLICT)}
    capacity = storage_pb2.CSIStorageCapacity(metadata=meta_pb2.ObjectMeta(name="cap", namespace="default"),
                                              storageClassName="wait", capacity="1Gi",
                                              nodeTopology=meta_pb2.LabelSelector(matchLabels={ZONE: "node-b"}))
    driver = storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="hostpath.csi.kubeling.io"),
                                   spec=storage_pb2.CSIDriverSpec(storageCapacity=True))
    limited = Cluster(claims=[claim("c", cls="wait")], classes=[sc("wait")], drivers=[driver], capacities=[capacity])
    assert limited.run(VolumeBinding, with_claims("c")) == {
        "node-a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_ENOUGH_SPACE), "node-b": OK}


def test_volume_binding_reserve_holds_a_volume_for_its_pod() -> None:
    cluster = Cluster(claims=[claim("c1", cls="wait"), claim("c2", cls="wait")],
                      classes=[sc("wait", provisioner="kubernetes.io/no-provisioner")],
                      volumes=[volume("only", node="node-a", cls="wait")])
    plugin = VolumeBinding({}, cluster.handle)
    first, state = with_claims("c1"), CycleState()
    nodes = cluster.snap.node_infos()
    plugin.pre_filter(state, first, nodes)
    assert plugin.filter(state, first, nodes[0]).ok
    assert plugin.reserve(state, first, "node-a").ok
    other, other_state = with_claims("c2"), CycleState()
    plugin.pre_filter(other_state, other, nodes)
    assert plugin.filter(other_state, other, nodes[0]).message == BIND_CONFLICT  # held for the first pod
    plugin.unreserve(state, first, "node-a")
    assert plugin.filter(other_state, other, nodes[0]).ok


def test_volume_restrictions_read_write_once_pod() -> None:
    rwop = claim("once", volume="pv", modes=("ReadWriteOncePod",))
    user = with_claims("once")
    user.metadata.name, user.metadata.uid, user.spec.nodeName = "user", "uid-user", "node-b"
    cluster = Cluster(pods=[user], claims=[rwop])
    assert cluster.run(VolumeRestrictions, with_claims("once")) == {
        "node-a": (Code.UNSCHEDULABLE, RWOP_CONFLICT), "node-b": (Code.UNSCHEDULABLE, RWOP_CONFLICT)}
    free = Cluster(claims=[rwop])
    assert free.run(VolumeRestrictions, with_claims("once")) == {"node-a": OK, "node-b": OK}
    assert Cluster(claims=[claim("rwo", volume="pv")]).run(VolumeRestrictions, with_claims("rwo"))["*"][0] == \
        Code.SKIP


def test_node_volume_limits_count_csi_volumes_per_driver() -> None:
    driver = "hostpath.csi.kubeling.io"
    csinode = storage_pb2.CSINode(metadata=meta_pb2.ObjectMeta(name="node-a"), spec=storage_pb2.CSINodeSpec(
        drivers=[storage_pb2.CSINodeDriver(name=driver, nodeID="node-a", allocatable=storage_pb2.VolumeNodeResources(
            count=1))]))
    existing = with_claims("old")
    existing.metadata.name, existing.metadata.uid, existing.spec.nodeName = "old-user", "uid-old", "node-a"
    cluster = Cluster(pods=[existing], claims=[claim("old", volume="pv-old"), claim("new", volume="pv-new"),
                                                claim("pending", cls="wait")],
                      volumes=[volume("pv-old", driver=driver, claim_ref="old"),
                               volume("pv-new", driver=driver, claim_ref="new")],
                      classes=[sc("wait")], csinodes=[csinode])
    assert cluster.run(NodeVolumeLimits, with_claims("new")) == {
        "node-a": (Code.UNSCHEDULABLE, "node(s) exceed max volume count"), "node-b": OK}
    assert cluster.run(NodeVolumeLimits, with_claims("pending"))["node-a"][0] == Code.UNSCHEDULABLE
    assert cluster.run(NodeVolumeLimits, with_claims("old")) == {"node-a": OK, "node-b": OK}  # already there

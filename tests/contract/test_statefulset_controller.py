"""The StatefulSet controller (controllers/statefulset.py) against a real apiserver: stable
names, hostnames and claims per ordinal; OrderedReady creation one at a time and
scale-down in reverse; Parallel; a failed pod made again at its ordinal; a rolling update
from the highest ordinal down to the partition; the claim retention policy.

No kubelet runs here: `ready()` marks a pod Running and Ready as a kubelet would (the
one thing faked, so that a test decides when each pod becomes ready)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from controllers.controllerref import update_with_retry
from controllers.history import CONTROLLER_REVISION_HASH
from controllers.manager import ControllerManager
from controllers.statefulset import POD_INDEX, POD_NAME
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from tests.objects import pod, update_status
from tests.wait import gone, holds, until


def statefulset(name: str = "web", replicas: int = 3, claims: bool = True, **spec: Any) -> apps_pb2.StatefulSet:
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": name}),
                                        spec=core_pb2.PodSpec(containers=pod("t").spec.containers))
    templates = [core_pb2.PersistentVolumeClaim(metadata=meta_pb2.ObjectMeta(name="www"), spec=(
        core_pb2.PersistentVolumeClaimSpec(accessModes=["ReadWriteOnce"], resources=(
            core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"})))))] if claims else []
    template.spec.containers[0].volumeMounts.add(name="www", mountPath="/usr/share/nginx/html") if claims else None
    return apps_pb2.StatefulSet(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=(
        apps_pb2.StatefulSetSpec(replicas=replicas, serviceName=name, template=template,
                                 selector=meta_pb2.LabelSelector(matchLabels={"app": name}),
                                 volumeClaimTemplates=templates, **spec)))


async def pods_of(client: Client, name: str = "web") -> dict[str, core_pb2.Pod]:
    return {p.metadata.name: p for p in (await client.pods.list("default", label_selector=f"app={name}")).items
            if not p.metadata.HasField("deletionTimestamp")}


async def ready(client: Client, pods: Sequence[core_pb2.Pod]) -> None:
    """As a kubelet would report them: Running and Ready."""
    def running(current: core_pb2.Pod) -> None:
        current.status.phase = "Running"
        del current.status.conditions[:]
        current.status.conditions.add(type="Ready", status="True").lastTransitionTime.GetCurrentTime()
    for p in pods:
        await update_status(client.pods, p.metadata.name, "default", running)


async def _names(client: Client, name: str = "web") -> list[str]:
    return sorted(await pods_of(client, name))


async def _scale(client: Client, replicas: int, name: str = "web", **strategy: Any) -> None:
    def change(sts: apps_pb2.StatefulSet) -> bool:
        sts.spec.replicas = replicas
        for key, value in strategy.items():
            setattr(sts.spec.updateStrategy.rollingUpdate, key, value)
        return True
    await update_with_retry(client.statefulsets, await client.statefulsets.get(name, "default"), change)


async def test_ordered_creation_identities_claims_and_reverse_scale_down(client: Client,
                                                                         manager: ControllerManager) -> None:
    await client.statefulsets.create(statefulset())
    for i in range(3):
        def made(ns: list[str], count: int = i + 1) -> bool:
            return len(ns) == count
        names = await until(lambda: _names(client), f"web-{i} made", check=made)
        assert names == [f"web-{k}" for k in range(i + 1)]
        # OrderedReady: the next one only once this one is Running and Ready
        await holds(lambda: _names(client), f"no web-{i + 1} before web-{i} is ready", 0.5, check=made)
        await ready(client, [(await pods_of(client))[f"web-{i}"]])
    web1 = (await pods_of(client))["web-1"]
    assert web1.spec.hostname == "web-1" and web1.spec.subdomain == "web"
    assert web1.metadata.labels[POD_NAME] == "web-1" and web1.metadata.labels[POD_INDEX] == "1"
    assert [v.persistentVolumeClaim.claimName for v in web1.spec.volumes if v.name == "www"] == ["www-web-1"]
    claims = {c.metadata.name: c for c in (await client.persistentvolumeclaims.list("default")).items}
    assert sorted(claims) == ["www-web-0", "www-web-1", "www-web-2"]
    assert claims["www-web-0"].metadata.labels["app"] == "web" and not claims["www-web-0"].metadata.ownerReferences
    st = await until(lambda: client.statefulsets.get("web", "default"), "status counted",
                     check=lambda s: s.status.readyReplicas == 3)
    assert (st.status.replicas, st.status.currentReplicas, st.status.updatedReplicas) == (3, 3, 3)
    assert st.status.currentRevision == st.status.updateRevision and st.status.currentRevision.startswith("web-")

    deleted: list[str] = []

    async def record(rv: str) -> None:
        async for ev in client.pods.watch("default", label_selector="app=web", resource_version=rv):
            if ev.type == "DELETED":
                deleted.append(ev.object.metadata.name)

    watch = asyncio.create_task(record((await client.pods.list("default")).metadata.resourceVersion))
    try:
        await _scale(client, 1)
        await until(lambda: deleted, "two pods deleted", check=lambda d: len(d) == 2)
    finally:
        watch.cancel()
    assert deleted == ["web-2", "web-1"] and await _names(client) == ["web-0"]
    # Retain (the default): the claims stay for when the set grows again
    left = {c.metadata.name for c in (await client.persistentvolumeclaims.list("default")).items}
    assert left == {"www-web-0", "www-web-1", "www-web-2"}


async def test_parallel_and_a_failed_pod_made_again_at_its_ordinal(client: Client,
                                                                    manager: ControllerManager) -> None:
    await client.statefulsets.create(statefulset("par", claims=False, podManagementPolicy="Parallel"))
    pods = await until(lambda: pods_of(client, "par"), "all three at once", check=lambda ps: len(ps) == 3)
    await ready(client, list(pods.values()))
    failed = await client.pods.get("par-1", "default")
    failed.status.phase = "Failed"
    await client.pods.update_status(failed)
    again = await until(lambda: pods_of(client, "par"), "par-1 made again",
                        check=lambda ps: "par-1" in ps and ps["par-1"].metadata.uid != failed.metadata.uid)
    assert sorted(again) == ["par-0", "par-1", "par-2"]


async def test_rolling_update_from_the_top_down_to_the_partition(client: Client,
                                                                 manager: ControllerManager) -> None:
    await client.statefulsets.create(statefulset("roll", claims=False, podManagementPolicy="Parallel"))
    pods = await until(lambda: pods_of(client, "roll"), "three pods", check=lambda ps: len(ps) == 3)
    await ready(client, list(pods.values()))
    old = pods["roll-0"].metadata.labels[CONTROLLER_REVISION_HASH]

    def change(sts: apps_pb2.StatefulSet) -> bool:
        sts.spec.template.spec.containers[0].image = "busybox:1.36"
        sts.spec.updateStrategy.rollingUpdate.partition = 1
        return True
    await update_with_retry(client.statefulsets, await client.statefulsets.get("roll", "default"), change)

    def updated(ps: dict[str, core_pb2.Pod]) -> set[str]:
        return {n for n, p in ps.items() if p.metadata.labels[CONTROLLER_REVISION_HASH] != old}

    order: list[str] = []
    while len(order) < 2:  # roll-2, then roll-1; roll-0 is below the partition
        ps = await until(lambda: pods_of(client, "roll"), "the next pod updated",
                         check=lambda ps: len(ps) == 3 and len(updated(ps)) == len(order) + 1)
        (name,) = updated(ps) - set(order)
        order.append(name)
        assert ps[name].spec.containers[0].image == "busybox:1.36"
        await ready(client, [ps[name]])
    assert order == ["roll-2", "roll-1"]
    await holds(lambda: pods_of(client, "roll"), "roll-0 kept below the partition", 0.5,
                check=lambda ps: ps["roll-0"].metadata.labels[CONTROLLER_REVISION_HASH] == old)
    sts = await until(lambda: client.statefulsets.get("roll", "default"), "two updated",
                      check=lambda s: s.status.updatedReplicas == 2)
    assert sts.status.currentRevision != sts.status.updateRevision and sts.status.currentReplicas == 1

    await _scale(client, 3, "roll", partition=0)
    ps = await until(lambda: pods_of(client, "roll"), "roll-0 updated too", check=lambda ps: len(updated(ps)) == 3)
    await ready(client, [ps["roll-0"]])
    sts = await until(lambda: client.statefulsets.get("roll", "default"), "the update is current",
                      check=lambda s: s.status.currentRevision == s.status.updateRevision)
    assert sts.status.currentReplicas == 3
    revisions = (await client.controllerrevisions.list("default", label_selector="app=roll")).items
    assert sorted(r.revision for r in revisions) == [1, 2]


async def test_claim_retention_policy(client: Client, manager: ControllerManager) -> None:
    policy = apps_pb2.StatefulSetPersistentVolumeClaimRetentionPolicy(whenDeleted="Delete", whenScaled="Delete")
    await client.statefulsets.create(statefulset("db", replicas=2, podManagementPolicy="Parallel",
                                                 persistentVolumeClaimRetentionPolicy=policy))
    pods = await until(lambda: pods_of(client, "db"), "two pods", check=lambda ps: len(ps) == 2)
    await ready(client, list(pods.values()))
    sts = await client.statefulsets.get("db", "default")
    claim = await client.persistentvolumeclaims.get("www-db-1", "default")
    assert [(r.kind, r.uid, r.controller) for r in claim.metadata.ownerReferences] == \
        [("StatefulSet", sts.metadata.uid, False)]
    await _scale(client, 1, "db")
    # whenScaled Delete: the condemned pod's claim becomes the pod's alone, and goes with it
    await until(lambda: gone(lambda: client.persistentvolumeclaims.get("www-db-1", "default")),
                "db-1's claim deleted with db-1")
    assert (await client.persistentvolumeclaims.get("www-db-0", "default")).metadata.ownerReferences[0].kind == \
        "StatefulSet"

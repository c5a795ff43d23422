"""The DaemonSet controller (controllers/daemonset.py) against a real apiserver: a pod per
eligible node, each naming its node by a node-affinity term and carrying the daemon
tolerations; nodes added, tainted and labelled; the status counts; a rolling update
within maxUnavailable, with maxSurge, and OnDelete; revisions as ControllerRevisions and
a rollback that renumbers the old one; a failed pod replaced.

No kubelet runs here: `ready()` marks a pod Running and Ready as a kubelet would (the
one thing faked, so a test decides when a pod becomes available)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from controllers.controllerref import update_with_retry
from controllers.daemonset import target_node
from controllers.history import CONTROLLER_REVISION_HASH
from controllers.manager import ControllerManager
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from tests.objects import node, pod, update_status
from tests.wait import until


def daemonset(name: str = "agent", strategy: apps_pb2.DaemonSetUpdateStrategy | None = None,
              **spec: Any) -> apps_pb2.DaemonSet:
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": name}),
                                        spec=core_pb2.PodSpec(containers=pod("t").spec.containers))
    ds = apps_pb2.DaemonSet(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=apps_pb2.DaemonSetSpec(
        selector=meta_pb2.LabelSelector(matchLabels={"app": name}), template=template, **spec))
    if strategy is not None:
        ds.spec.updateStrategy.CopyFrom(strategy)
    return ds


async def pods_of(client: Client, name: str = "agent") -> list[core_pb2.Pod]:
    return [p for p in (await client.pods.list("default", label_selector=f"app={name}")).items
            if not p.metadata.HasField("deletionTimestamp")]


def by_node(pods: Sequence[core_pb2.Pod]) -> dict[str, list[core_pb2.Pod]]:
    out: dict[str, list[core_pb2.Pod]] = {}
    for p in pods:
        out.setdefault(target_node(p), []).append(p)
    return out


async def ready(client: Client, pods: Sequence[core_pb2.Pod]) -> None:
    """As a kubelet would report them: Running and Ready."""
    def running(current: core_pb2.Pod) -> None:
        current.status.phase = "Running"
        del current.status.conditions[:]
        current.status.conditions.add(type="Ready", status="True").lastTransitionTime.GetCurrentTime()
    for p in pods:
        await update_status(client.pods, p.metadata.name, "default", running)


async def status(client: Client, name: str = "agent") -> apps_pb2.DaemonSetStatus:
    return (await client.daemonsets.get(name, "default")).status


async def test_a_pod_on_every_eligible_node(client: Client, manager: ControllerManager) -> None:
    for n in ("n1", "n2"):
        await client.nodes.create(node(n))
    await client.daemonsets.create(daemonset())
    pods = await until(lambda: pods_of(client), "a pod per node", check=lambda ps: len(ps) == 2)
    assert set(by_node(pods)) == {"n1", "n2"}
    first = pods[0]
    assert not first.spec.nodeName  # the scheduler places it, by the term naming the node
    term = first.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]
    assert term.matchFields[0].key == "metadata.name" and term.matchFields[0].operator == "In"
    tolerated = {(t.key, t.effect) for t in first.spec.tolerations if t.operator == "Exists"}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated
    assert ("node.kubernetes.io/not-ready", "NoExecute") in tolerated and len(tolerated) == 6
    assert first.metadata.labels[CONTROLLER_REVISION_HASH] and first.metadata.labels["pod-template-generation"] == "1"
    await ready(client, pods)
    st = await until(lambda: status(client), "status counted", check=lambda s: s.numberAvailable == 2)
    assert (st.desiredNumberScheduled, st.currentNumberScheduled, st.numberReady, st.updatedNumberScheduled,
            st.numberUnavailable, st.numberMisscheduled) == (2, 2, 2, 2, 0, 0)
    assert st.observedGeneration == 1

    await client.nodes.create(node("n3"))
    await until(lambda: pods_of(client), "a pod on the new node", check=lambda ps: "n3" in by_node(ps))

    # a NoSchedule taint: the running pod stays (misscheduled), a NoExecute one removes it
    # the node lifecycle controller writes nodes too: each change retried on a conflict
    def taint(effect: str) -> Callable[[core_pb2.Node], bool]:
        def change(n: core_pb2.Node) -> bool:
            n.spec.taints.add(key="dedicated", value="db", effect=effect)
            return True
        return change

    await update_with_retry(client.nodes, await client.nodes.get("n2"), taint("NoSchedule"))
    await until(lambda: status(client), "n2 no longer desired", check=lambda s: s.desiredNumberScheduled == 2
                and s.numberMisscheduled == 1)
    assert "n2" in by_node(await pods_of(client))
    await update_with_retry(client.nodes, await client.nodes.get("n2"), taint("NoExecute"))
    await until(lambda: pods_of(client), "the pod on n2 removed", check=lambda ps: "n2" not in by_node(ps))

    # a cordoned node keeps its daemon pod; a node deleted loses it
    def cordon(n: core_pb2.Node) -> bool:
        n.spec.unschedulable = True
        n.spec.taints.add(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
        return True

    await update_with_retry(client.nodes, await client.nodes.get("n3"), cordon)
    await client.nodes.delete("n1")
    pods = await until(lambda: pods_of(client), "only n3's pod", check=lambda ps: set(by_node(ps)) == {"n3"})
    assert len(pods) == 1


async def test_node_selector_and_a_tolerated_taint(client: Client, manager: ControllerManager) -> None:
    await client.nodes.create(node("ssd1", {"disk": "ssd"}))
    await client.nodes.create(node("hdd1", {"disk": "hdd"}))
    tainted = node("ssd2", {"disk": "ssd"})
    tainted.spec.taints.add(key="gpu", value="yes", effect="NoSchedule")
    await client.nodes.create(tainted)
    ds = daemonset("fast")
    ds.spec.template.spec.nodeSelector["disk"] = "ssd"
    ds.spec.template.spec.tolerations.add(key="gpu", operator="Equal", value="yes", effect="NoSchedule")
    await client.daemonsets.create(ds)
    pods = await until(lambda: pods_of(client, "fast"), "pods on the ssd nodes", check=lambda ps: len(ps) == 2)
    assert set(by_node(pods)) == {"ssd1", "ssd2"}
    # the node lifecycle controller writes the node too (its taints): retried on conflict
    await update_with_retry(client.nodes, await client.nodes.get("hdd1"), lambda n: _label(n, "ssd"))
    await until(lambda: pods_of(client, "fast"), "relabelled node gets one", check=lambda ps: len(ps) == 3)
    await update_with_retry(client.nodes, await client.nodes.get("hdd1"), lambda n: _label(n, "hdd"))
    await until(lambda: pods_of(client, "fast"), "and loses it", check=lambda ps: set(by_node(ps)) == {"ssd1", "ssd2"})


def _label(n: core_pb2.Node, disk: str) -> bool:
    n.metadata.labels["disk"] = disk
    return True


async def _update_image(client: Client, name: str, image: str) -> None:
    def change(ds: apps_pb2.DaemonSet) -> bool:
        ds.spec.template.spec.containers[0].image = image
        return True
    await update_with_retry(client.daemonsets, await client.daemonsets.get(name, "default"), change)


async def test_rolling_update_within_max_unavailable_then_rollback(client: Client,
                                                                    manager: ControllerManager) -> None:
    for n in ("n1", "n2", "n3"):
        await client.nodes.create(node(n))
    await client.daemonsets.create(daemonset())
    pods = await until(lambda: pods_of(client), "three pods", check=lambda ps: len(ps) == 3)
    await ready(client, pods)
    await until(lambda: status(client), "available", check=lambda s: s.numberAvailable == 3)
    old_hash = pods[0].metadata.labels[CONTROLLER_REVISION_HASH]

    await _update_image(client, "agent", "busybox:1.36")
    updated: set[str] = set()
    while len(updated) < 3:
        # one node at a time: its old pod goes, a new one comes and waits to be made ready;
        # the other nodes keep their available pods meanwhile (maxUnavailable 1)
        def next_node(ps: list[core_pb2.Pod]) -> bool:
            unready = [p for p in ps if not p.status.conditions]
            return len(ps) == 3 and len(unready) == 1 and target_node(unready[0]) not in updated

        current = await until(lambda: pods_of(client), "the next node updated", check=next_node)
        fresh = [p for p in current if not p.status.conditions]
        assert fresh[0].metadata.labels[CONTROLLER_REVISION_HASH] != old_hash
        assert all(p.status.conditions for p in current if p is not fresh[0])
        await ready(client, fresh)
        updated.add(target_node(fresh[0]))
    st = await until(lambda: status(client), "all updated", check=lambda s: s.updatedNumberScheduled == 3)
    assert st.observedGeneration == 2
    ds = await client.daemonsets.get("agent", "default")
    revisions = sorted((await client.controllerrevisions.list("default")).items, key=lambda r: r.revision)
    assert [r.revision for r in revisions] == [1, 2]
    assert revisions[0].metadata.labels[CONTROLLER_REVISION_HASH] == old_hash
    assert revisions[0].metadata.name == f"agent-{old_hash}"
    assert revisions[0].metadata.ownerReferences[0].uid == ds.metadata.uid

    await _update_image(client, "agent", "busybox")  # back to the first template: its revision renumbered
    await until(lambda: client.controllerrevisions.get(f"agent-{old_hash}", "default"), "revision 1 becomes 3",
                check=lambda r: r.revision == 3)
    assert len((await client.controllerrevisions.list("default")).items) == 2


async def test_max_surge_starts_the_new_pod_beside_the_old(client: Client, manager: ControllerManager) -> None:
    await client.nodes.create(node("n1"))
    strategy = apps_pb2.DaemonSetUpdateStrategy(type="RollingUpdate", rollingUpdate=apps_pb2.RollingUpdateDaemonSet(
        maxUnavailable=core_pb2.IntOrString(intVal=0), maxSurge=core_pb2.IntOrString(intVal=1)))
    await client.daemonsets.create(daemonset(strategy=strategy))
    pods = await until(lambda: pods_of(client), "the pod", check=lambda ps: len(ps) == 1)
    await ready(client, pods)
    await until(lambda: status(client), "available", check=lambda s: s.numberAvailable == 1)
    await _update_image(client, "agent", "busybox:1.36")
    both = await until(lambda: pods_of(client), "old and new side by side", check=lambda ps: len(ps) == 2)
    new = [p for p in both if p.metadata.uid != pods[0].metadata.uid]
    await ready(client, new)
    left = await until(lambda: pods_of(client), "the old one deleted once the new is available",
                       check=lambda ps: len(ps) == 1)
    assert left[0].metadata.uid == new[0].metadata.uid


async def test_on_delete_and_a_failed_pod_replaced(client: Client, manager: ControllerManager) -> None:
    await client.nodes.create(node("n1"))
    manager.daemonset.backoff_base = 0.2
    await client.daemonsets.create(daemonset(strategy=apps_pb2.DaemonSetUpdateStrategy(type="OnDelete")))
    pods = await until(lambda: pods_of(client), "the pod", check=lambda ps: len(ps) == 1)
    await ready(client, pods)
    await _update_image(client, "agent", "busybox:1.36")
    await until(lambda: status(client), "the update observed", check=lambda s: s.observedGeneration == 2)
    assert [p.metadata.uid for p in await pods_of(client)] == [pods[0].metadata.uid]  # OnDelete: untouched
    assert (await status(client)).updatedNumberScheduled == 0

    failed = await client.pods.get(pods[0].metadata.name, "default")
    failed.status.phase = "Failed"
    await client.pods.update_status(failed)
    replaced = await until(lambda: pods_of(client), "a new pod of the new template",
                           check=lambda ps: len(ps) == 1 and ps[0].metadata.uid != pods[0].metadata.uid)
    assert replaced[0].spec.containers[0].image == "busybox:1.36"
    try:
        await client.pods.get(pods[0].metadata.name, "default")
        raise AssertionError("the failed pod was not deleted")
    except errors.NotFound:
        pass

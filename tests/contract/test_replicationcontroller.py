"""ReplicationControllers kept by the ReplicaSet controller (controllers/replicaset.py with
its ReplicationController kind) against a real apiserver: pods made to the count with the
RC as their controller, orphans adopted by the label map, scale down, status."""

from __future__ import annotations

from controllers.controllerref import update_with_retry
from controllers.manager import ControllerManager
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.objects import pod
from tests.wait import until


async def pods_of(client: Client) -> list[core_pb2.Pod]:
    return [p for p in (await client.pods.list("default", label_selector="app=rc")).items
            if not p.metadata.HasField("deletionTimestamp")]


async def test_replication_controller_keeps_its_count(client: Client, manager: ControllerManager) -> None:
    orphan = pod("orphan", labels={"app": "rc"})
    await client.pods.create(orphan)
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": "rc"}),
                                        spec=core_pb2.PodSpec(containers=pod("t").spec.containers))
    rc = await client.replicationcontrollers.create(core_pb2.ReplicationController(
        metadata=meta_pb2.ObjectMeta(name="rc", namespace="default"),
        spec=core_pb2.ReplicationControllerSpec(replicas=3, template=template)))
    pods = await until(lambda: pods_of(client), "three pods, the orphan adopted", check=lambda ps: len(ps) == 3 and
                       all(p.metadata.ownerReferences for p in ps))
    for p in pods:
        (ref,) = p.metadata.ownerReferences
        assert (ref.kind, ref.apiVersion, ref.uid, ref.controller) == ("ReplicationController", "v1",
                                                                       rc.metadata.uid, True)
    assert "orphan" in {p.metadata.name for p in pods}
    await until(lambda: client.replicationcontrollers.get("rc", "default"), "status",
                check=lambda r: r.status.replicas == 3 and r.status.fullyLabeledReplicas == 3
                and r.status.observedGeneration == 1)
    def scale_down(rc: core_pb2.ReplicationController) -> bool:
        rc.spec.replicas = 1
        return True
    await update_with_retry(client.replicationcontrollers, await client.replicationcontrollers.get("rc", "default"),
                            scale_down)
    await until(lambda: pods_of(client), "scaled down to one", check=lambda ps: len(ps) == 1)
    async def reasons() -> set[str]:
        events = (await client.events.list_all("default"))[0]
        return {e.reason for e in events if e.involvedObject.kind == "ReplicationController"}
    await until(reasons, "its events", check=lambda r: r >= {"SuccessfulCreate", "SuccessfulDelete"})

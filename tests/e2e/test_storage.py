"""Storage in a whole cluster (issue 36): the hostpath CSI driver registered with each
kubelet through the plugin registry, claims provisioned over CSI and mounted by the kubelet
(NodeStage/NodePublish), data that outlives its pods, volumes taken down when pods go (and
after a kubelet restart, for a pod deleted meanwhile), and the volume features of the
kubelet itself: hostPath types, tmpfs emptyDirs, subPath and subPathExpr with the
symlink-escape check, read-only claims."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from csi.hostpath import TOPOLOGY_KEY, Driver, DriverConfig, Server
from csi.hostpath.node import NodeServicer
from csi.registrar import Registrar
from csi.service import HostpathService, ServiceConfig
from kubelet.agent import Kubelet
from kubeling import mounts
from kubeling.client import Client
from protos.csi.v1 import csi_pb2, csi_pb2_grpc
from protos.kubeling.v1 import core_pb2, meta_pb2, storage_pb2
from tests.e2e.conftest import HOSTPATH_DRIVER as DRIVER
from tests.e2e.conftest import Cluster, Storage, container, pod, tls_of
from tests.wait import until


async def make_class(client: Client, name: str, **fields: Any) -> None:
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name=name), provisioner=DRIVER, **fields))


async def claim(client: Client, name: str, cls: str, size: str = "1Gi") -> None:
    await client.persistentvolumeclaims.create(core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            accessModes=["ReadWriteOnce"], storageClassName=cls,
            resources=core_pb2.VolumeResourceRequirements(requests={"storage": size}))))


def with_claim(p: core_pb2.Pod, claim_name: str, volume: str = "data", read_only: bool = False) -> core_pb2.Pod:
    p.spec.volumes.add(name=volume, persistentVolumeClaim=core_pb2.PersistentVolumeClaimVolumeSource(
        claimName=claim_name, readOnly=read_only))
    return p


def mounting(*command: str, path: str = "/data", volume: str = "data", **mount: Any) -> core_pb2.Container:
    c = container("main", *command)
    c.volumeMounts.add(name=volume, mountPath=path, **mount)
    return c


def volume_mounts(kubelet: Kubelet) -> list[Path]:
    """What is mounted for volumes on the node: staging and publish paths, tmpfs emptyDirs."""
    state = kubelet.config.state_dir
    return mounts.mount_points(state / "plugins") + mounts.mount_points(state / "pods")


async def logs(cluster: Cluster, name: str) -> str:
    return b"".join([chunk async for chunk in cluster.client.pods.logs(name, "default")]).decode()


async def finished(cluster: Cluster, name: str) -> core_pb2.Pod:
    return await cluster.wait_pod(name, lambda p: p.status.phase in ("Succeeded", "Failed"), timeout=90)


async def test_a_provisioned_claim_keeps_data_across_pods(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    kubelet = await storage.add_node(1)
    node = kubelet.config.node_name
    labels = (await client.nodes.get(node)).metadata.labels
    assert labels[TOPOLOGY_KEY] == node
    await make_class(client, "fast")
    await claim(client, "data", "fast")
    bound = await until(lambda: client.persistentvolumeclaims.get("data", "default"), "the claim Bound", timeout=60,
                        check=lambda c: c.status.phase == "Bound")
    pv = await client.persistentvolumes.get(bound.spec.volumeName)
    await client.pods.create(with_claim(pod("writer", mounting("sh", "-c", "echo kept > /data/hello"),
                                            restart_policy="Never"), "data"))
    assert (await finished(cluster, "writer")).status.phase == "Succeeded"
    await client.pods.delete("writer", "default")
    await cluster.wait_gone("writer")
    assert (storage.volume_dir(node, pv) / "hello").read_text() == "kept\n"
    # a finished pod leaves the API at once; its kubelet takes its volume down after
    await until(lambda: volume_mounts(kubelet), "the volume unpublished and unstaged", check=lambda m: not m)

    await client.pods.create(with_claim(pod("reader", mounting("cat", "/data/hello"), restart_policy="Never"),
                                        "data", read_only=True))
    assert (await finished(cluster, "reader")).status.phase == "Succeeded"
    assert await logs(cluster, "reader") == "kept\n"
    await client.pods.create(with_claim(pod("no-write", mounting("sh", "-c", "echo x > /data/other"),
                                            restart_policy="Never"), "data", read_only=True))
    assert (await finished(cluster, "no-write")).status.phase == "Failed"  # a read-only claim
    for name in ("reader", "no-write"):
        await client.pods.delete(name, "default")
        await cluster.wait_gone(name)

    await client.persistentvolumeclaims.delete("data", "default")
    await until(lambda: client.persistentvolumes.list_all(), "the volume deleted", timeout=60,
                check=lambda found: not found[0])
    assert not storage.volume_dir(node, pv).exists()


async def test_a_claim_in_use_stays_and_a_restarted_kubelet_cleans_up(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    kubelet = await storage.add_node(1)
    name = kubelet.config.node_name
    await make_class(client, "fast")
    await claim(client, "busy", "fast")
    await client.pods.create(with_claim(pod("holder", mounting("sleep", "3600")), "busy"))
    await cluster.wait_pod("holder", lambda p: p.status.phase == "Running", timeout=90)
    await client.persistentvolumeclaims.delete("busy", "default")
    held = await client.persistentvolumeclaims.get("busy", "default")
    assert held.metadata.HasField("deletionTimestamp")  # kept: a pod uses it

    published = [p for p in volume_mounts(kubelet) if p.name == "mount"]
    assert len(published) == 1 and len(volume_mounts(kubelet)) == 2  # staged once, published once
    kubelet = await cluster.restart_node(name)  # mounts and pod survive a kubelet restart
    await until(lambda: kubelet.csi.drivers, "the driver registered again", check=lambda d: DRIVER in d)
    assert published[0] in volume_mounts(kubelet)
    assert (await client.pods.get("holder", "default")).status.phase == "Running"

    await kubelet.stop()  # the pod is deleted while its kubelet is down
    await client.pods.delete("holder", "default", grace_period_seconds=0)
    await cluster.restart_node(name)
    await until(lambda: volume_mounts(kubelet), "the orphaned pod's volume unmounted", timeout=60,
                check=lambda left: not left)
    await until(lambda: client.persistentvolumeclaims.list_all(), "the claim gone with its pod", timeout=60,
                check=lambda found: not found[0])


async def test_kubelet_volume_features(storage: Storage, tmp_path: Path) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    await cluster.add_node(1)
    # hostPath of the wrong type: FailedMount, the pod waits
    bad = pod("wrong-type", mounting("true", volume="host"))
    bad.spec.volumes.add(name="host", hostPath=core_pb2.HostPathVolumeSource(path=str(tmp_path), type="File"))
    await client.pods.create(bad)

    async def failed_mount() -> list[str]:
        events = (await client.events.list_all("default"))[0]
        return [e.message for e in events if e.involvedObject.name == "wrong-type" and e.reason == "FailedMount"]
    told = await until(failed_mount, "FailedMount for a directory given as a File", timeout=60)
    assert f"hostPath type check failed: {tmp_path} is not a file" in told[0]

    # DirectoryOrCreate makes it; a tmpfs emptyDir; subPathExpr from the environment
    made = tmp_path / "made"
    shell = ("grep ' /cache ' /proc/mounts | cut -d' ' -f3; echo $POD > /host/$POD.txt; ls /sub; "
             "echo in-sub > /sub/file")
    c = mounting("sh", "-c", shell, path="/host", volume="host")
    c.volumeMounts.add(name="cache", mountPath="/cache")
    c.volumeMounts.add(name="host", mountPath="/sub", subPathExpr="dirs/$(POD)")
    c.env.add(name="POD", valueFrom=core_pb2.EnvVarSource(fieldRef=core_pb2.ObjectFieldSelector(
        fieldPath="metadata.name")))
    good = pod("features", c, restart_policy="Never")
    good.spec.volumes.add(name="host", hostPath=core_pb2.HostPathVolumeSource(path=str(made),
                                                                             type="DirectoryOrCreate"))
    good.spec.volumes.add(name="cache", emptyDir=core_pb2.EmptyDirVolumeSource(medium="Memory", sizeLimit="16Mi"))
    await client.pods.create(good)
    assert (await finished(cluster, "features")).status.phase == "Succeeded"
    assert (await logs(cluster, "features")).splitlines()[0] == "tmpfs"
    assert (made / "features.txt").read_text() == "features\n"
    assert (made / "dirs" / "features" / "file").read_text() == "in-sub\n"

    # a subPath that escapes the volume through a symlink is refused
    (made / "escape").symlink_to("/etc")
    sneaky = pod("sneaky", mounting("cat", "/x/hostname", path="/x", volume="host", subPath="escape"),
                 restart_policy="Never")
    sneaky.spec.volumes.add(name="host", hostPath=core_pb2.HostPathVolumeSource(path=str(made)))
    await client.pods.create(sneaky)
    waiting = await cluster.wait_pod("sneaky", lambda p: any(
        s.state.waiting.reason == "CreateContainerConfigError" for s in p.status.containerStatuses), timeout=60)
    assert "outside the volume" in waiting.status.containerStatuses[0].state.waiting.message


async def test_wait_for_first_consumer_binds_where_the_pod_lands(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    await storage.add_node(1)
    second = await storage.add_node(2)
    target = second.config.node_name
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name="standard", annotations={
            "storageclass.kubernetes.io/is-default-class": "true"}),
        provisioner=DRIVER, volumeBindingMode="WaitForFirstConsumer"))
    await client.persistentvolumeclaims.create(core_pb2.PersistentVolumeClaim(
        metadata=meta_pb2.ObjectMeta(name="late", namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
            accessModes=["ReadWriteOnce"], resources=core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    waiting = await client.persistentvolumeclaims.get("late", "default")
    assert waiting.spec.storageClassName == "standard" and waiting.status.phase == "Pending"  # no consumer yet

    placed = with_claim(pod("placed", mounting("sh", "-c", "echo here > /data/where"), restart_policy="Never"),
                        "late")
    placed.spec.nodeSelector["kubernetes.io/hostname"] = target
    await client.pods.create(placed)
    assert (await finished(cluster, "placed")).spec.nodeName == target
    bound = await client.persistentvolumeclaims.get("late", "default")
    assert bound.status.phase == "Bound" and bound.metadata.annotations["volume.kubernetes.io/selected-node"] == target
    pv = await client.persistentvolumes.get(bound.spec.volumeName)
    assert (storage.volume_dir(target, pv) / "where").read_text() == "here\n"
    # the volume's node affinity brings the next pod of the claim to the same node
    await client.pods.create(with_claim(pod("follower", mounting("cat", "/data/where"), restart_policy="Never"),
                                        "late"))
    follower = await finished(cluster, "follower")
    assert follower.spec.nodeName == target and await logs(cluster, "follower") == "here\n"

    # a class nothing provisions, and no volume: the pod waits, and says why
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name="manual"), provisioner="kubernetes.io/no-provisioner",
        volumeBindingMode="WaitForFirstConsumer"))
    await claim(client, "nothing", "manual")
    await client.pods.create(with_claim(pod("stuck", mounting("true")), "nothing"))

    async def why() -> list[str]:
        events = (await client.events.list_all("default"))[0]
        return [e.message for e in events if e.involvedObject.name == "stuck" and e.reason == "FailedScheduling"]
    told = await until(why, "FailedScheduling for a claim nothing can bind", timeout=60)
    assert "didn't find available persistent volumes to bind" in told[0]


async def test_fs_group_and_run_as_user_on_claims_and_volumes(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    await storage.add_node(1)
    await make_class(client, "fast")
    await claim(client, "owned", "fast")
    await client.secrets.create(core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="s", namespace="default"),
                                                data={"k": b"secret-value"}))
    shell = ("id -u; id -G | tr ' ' '\\n' | grep -x 2000; stat -c '%g %a' /data /scratch; "
             "touch /data/made /scratch/made; stat -c %g /data/made /scratch/made; stat -L -c '%g %a' /secret/k; "
             "cat /secret/k")
    c = mounting("sh", "-c", shell)
    c.volumeMounts.add(name="scratch", mountPath="/scratch")
    c.volumeMounts.add(name="secret", mountPath="/secret")
    p = with_claim(pod("grouped", c, restart_policy="Never"), "owned")
    p.spec.volumes.add(name="scratch", emptyDir=core_pb2.EmptyDirVolumeSource())
    p.spec.volumes.add(name="secret", secret=core_pb2.SecretVolumeSource(secretName="s", defaultMode=0o400))
    p.spec.securityContext.runAsUser = 1000
    p.spec.securityContext.fsGroup = 2000
    await client.pods.create(p)
    done = await finished(cluster, "grouped")
    out = (await logs(cluster, "grouped")).splitlines()
    assert done.status.phase == "Succeeded", out
    # uid 1000 with fsGroup among its groups; the claim's and the emptyDir's roots the
    # group's with setgid, so what the pod makes is the group's too; the secret 0400 + g+r
    assert out[:2] == ["1000", "2000"]
    assert out[2].split()[0] == "2000" and int(out[2].split()[1], 8) & 0o2070 == 0o2070
    assert out[3].split()[0] == "2000" and int(out[3].split()[1], 8) & 0o2070 == 0o2070
    assert out[4:6] == ["2000", "2000"]
    assert out[6] == "2000 440" and out[7] == "secret-value"

    root = pod("as-root", container("main", "true"), restart_policy="Never")
    root.spec.securityContext.runAsNonRoot = True
    root.spec.securityContext.runAsUser = 0
    await client.pods.create(root)
    refused = await cluster.wait_pod("as-root", lambda q: any(
        s.state.waiting.reason == "CreateContainerConfigError" for s in q.status.containerStatuses), timeout=60)
    assert "container's runAsUser breaks non-root policy" in refused.status.containerStatuses[0].state.waiting.message


class FaultyNode(NodeServicer):
    """The hostpath driver's Node service with injected faults (a fake only for what the
    real driver cannot be made to do): NodePublishVolume answers UNAVAILABLE `fail` times,
    or hangs `hang` seconds before doing its work."""

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.fail = 0
        self.hang = 0.0
        self.calls = 0

    async def NodePublishVolume(self, request: Any, context: Any) -> Any:  # noqa: N802 (the RPC's name)
        self.calls += 1
        if self.fail > 0:
            self.fail -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "injected: the storage backend is away")
        if self.hang:
            await asyncio.sleep(self.hang)
        return await super().NodePublishVolume(request, context)


async def test_a_driver_that_fails_or_hangs_is_retried_and_leaks_nothing(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    kubelet = await cluster.add_node(1)
    node = kubelet.config.node_name
    driver = Driver(DriverConfig(node_id=node, state_dir=cluster.base / "faulty", name="faulty.csi.kubeling.io"))
    faulty = FaultyNode(driver)
    server, socket = Server(driver, node=faulty), cluster.base / "faulty" / "csi.sock"
    await server.start(socket)
    registrar = Registrar("faulty.csi.kubeling.io", socket, kubelet.config.state_dir / "plugins_registry")
    await registrar.start()
    kubelet.csi.timeout = 2.0  # the kubelet's bound on one CSI call (upstream's is 2 minutes)
    try:
        await until(lambda: kubelet.csi.drivers, "the faulty driver registered",
                    check=lambda d: "faulty.csi.kubeling.io" in d)
        await client.csidrivers.create(storage_pb2.CSIDriver(  # no attach step for it
            metadata=meta_pb2.ObjectMeta(name="faulty.csi.kubeling.io"),
            spec=storage_pb2.CSIDriverSpec(attachRequired=False)))
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            made = await csi_pb2_grpc.ControllerStub(channel).CreateVolume(csi_pb2.CreateVolumeRequest(
                name="static", volume_capabilities=[csi_pb2.VolumeCapability(
                    mount=csi_pb2.VolumeCapability.MountVolume(), access_mode=csi_pb2.VolumeCapability.AccessMode(
                        mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))]))
        await client.persistentvolumes.create(core_pb2.PersistentVolume(
            metadata=meta_pb2.ObjectMeta(name="faulty-pv"), spec=core_pb2.PersistentVolumeSpec(
                capacity={"storage": "1Gi"}, accessModes=["ReadWriteOnce"], storageClassName="",
                persistentVolumeReclaimPolicy="Retain", csi=core_pb2.CSIPersistentVolumeSource(
                    driver="faulty.csi.kubeling.io", volumeHandle=made.volume.volume_id))))
        await client.persistentvolumeclaims.create(core_pb2.PersistentVolumeClaim(
            metadata=meta_pb2.ObjectMeta(name="faulty", namespace="default"), spec=core_pb2.PersistentVolumeClaimSpec(
                accessModes=["ReadWriteOnce"], storageClassName="", volumeName="faulty-pv",
                resources=core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"}))))

        async def failed_mounts(name: str) -> list[str]:
            events = (await client.events.list_all("default"))[0]
            return [e.message for e in events if e.involvedObject.name == name and e.reason == "FailedMount"]

        faulty.fail = 2
        await client.pods.create(with_claim(pod("patient", mounting("sleep", "3600")), "faulty"))
        await cluster.wait_pod("patient", lambda p: p.status.phase == "Running", timeout=90)
        assert faulty.calls >= 3 and "injected: the storage backend is away" in " ".join(
            await failed_mounts("patient"))

        faulty.hang = 4.0  # longer than the kubelet waits: DeadlineExceeded, retried, then it answers in time
        await client.pods.create(with_claim(pod("waiter", mounting("sleep", "3600")), "faulty"))
        told = await until(lambda: failed_mounts("waiter"), "FailedMount for a hanging driver", timeout=60)
        assert "DeadlineExceeded" in told[0]
        faulty.hang = 0.0
        await cluster.wait_pod("waiter", lambda p: p.status.phase == "Running", timeout=90)

        for name in ("patient", "waiter"):
            await client.pods.delete(name, "default", grace_period_seconds=0)
            await cluster.wait_gone(name)
        await until(lambda: volume_mounts(kubelet), "every publish and the staging taken down", timeout=60,
                    check=lambda left: not left)
        assert not any(v.published or v.staged for v in driver.state.volumes.values())
    finally:
        await registrar.stop()
        await server.stop()
        await client.csidrivers.delete("faulty.csi.kubeling.io")
        for point in reversed(mounts.mount_points(cluster.base / "faulty")):
            mounts.unmount(point, lazy=True)


async def test_an_empty_dir_past_its_size_limit_evicts_its_pod(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    await cluster.add_node(1)
    c = mounting("sh", "-c", "dd if=/dev/zero of=/cache/fill bs=1024 count=3072 && sleep 3600", path="/cache",
                 volume="cache")
    hog = pod("hog", c)
    hog.spec.volumes.add(name="cache", emptyDir=core_pb2.EmptyDirVolumeSource(sizeLimit="1Mi"))
    await client.pods.create(hog)
    evicted = await cluster.wait_pod("hog", lambda p: p.status.phase == "Failed", timeout=90)
    assert evicted.status.reason == "Evicted"
    assert evicted.status.message == 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". '
    events = (await client.events.list_all("default"))[0]
    assert any(e.reason == "Evicted" and e.involvedObject.name == "hog" for e in events)


async def test_a_driver_that_needs_attaching_is_attached_before_the_mount(storage: Storage) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    kubelet = await cluster.add_node(1)
    name = kubelet.config.node_name
    service = HostpathService(ServiceConfig(
        node_id=name, state_dir=cluster.base / "attached", registration_dir=kubelet.config.state_dir /
        "plugins_registry", driver_name="attached.csi.kubeling.io", attach_required=True),
        Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "csi-hostpath")))
    await service.start()
    storage.drivers["attached"] = service
    await until(lambda: kubelet.csi.drivers, "the driver registered", check=lambda d: "attached.csi.kubeling.io" in d)
    assert (await client.csidrivers.get("attached.csi.kubeling.io")).spec.attachRequired
    await client.storageclasses.create(storage_pb2.StorageClass(
        metadata=meta_pb2.ObjectMeta(name="attached"), provisioner="attached.csi.kubeling.io"))
    await claim(client, "needs-attach", "attached")
    await client.pods.create(with_claim(pod("attached-user", mounting("sleep", "3600")), "needs-attach"))
    await cluster.wait_pod("attached-user", lambda p: p.status.phase == "Running", timeout=90)
    [attachment] = (await client.volumeattachments.list_all())[0]
    bound = await client.persistentvolumeclaims.get("needs-attach", "default")
    assert (attachment.spec.attacher, attachment.spec.nodeName, attachment.spec.source.persistentVolumeName) == (
        "attached.csi.kubeling.io", name, bound.spec.volumeName)
    assert attachment.status.attached and "external-attacher/attached.csi.kubeling.io" in attachment.metadata.finalizers
    await client.pods.delete("attached-user", "default", grace_period_seconds=0)
    await cluster.wait_gone("attached-user")
    await until(lambda: client.volumeattachments.list_all(), "the volume detached", timeout=60,
                check=lambda found: not found[0])

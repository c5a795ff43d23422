"""The pod-volume conformance tests of sig-storage for emptyDir
(test/e2e/common/storage/empty_dir.go), mirrored with busybox in place of the
mounttest image: its checks printed by `stat`, `cat` and /proc/mounts. The variants run
as pods side by side in one cluster; each upstream testname maps to the pod that checks it."""

from __future__ import annotations

from protos.kubeling.v1 import core_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.wait import until

NON_ROOT = 1001  # upstream's nonRootUID


def _mode_pod(name: str, uid: int, mode: str, medium: str) -> core_pb2.Pod:
    """upstream's doTest0644/0666/0777: a file made with the mode in the volume, its perms,
    content and (tmpfs) the mount type."""
    script = (f"umask 0; echo 'mount-tester new file' > /test-volume/test-file; chmod {mode} /test-volume/test-file; "
              "stat -c 'perms %A' /test-volume/test-file; cat /test-volume/test-file")
    return _volume_pod(name, uid, medium, script + _MOUNT_TYPE if medium else script)


# the mount type, checked for Memory emptyDirs only (a default one is whatever the node's disk is)
_MOUNT_TYPE = "; grep ' /test-volume ' /proc/mounts | cut -d' ' -f3"


def _volume_pod(name: str, uid: int, medium: str, script: str) -> core_pb2.Pod:
    c = container("test-container", "sh", "-c", script)
    c.volumeMounts.add(name="test-volume", mountPath="/test-volume")
    p = pod(name, c, restart_policy="Never")
    p.spec.volumes.add(name="test-volume", emptyDir=core_pb2.EmptyDirVolumeSource(medium=medium))
    if uid:
        p.spec.securityContext.runAsUser = uid
    return p


async def _output(cluster: Cluster, name: str) -> list[str]:
    done = await cluster.wait_pod(name, lambda p: p.status.phase in ("Succeeded", "Failed"), timeout=120)
    text = b"".join([chunk async for chunk in cluster.client.pods.logs(name, "default")]).decode()
    assert done.status.phase == "Succeeded", (name, text)
    return text.splitlines()


async def test_emptydir_volumes(cluster: Cluster) -> None:
    """EmptyDir, medium default|memory, volume mode 0644|0666|0777, root|non-root user —
    '[sig-storage] EmptyDir volumes should support ((non-)root,06xx/0777,default|tmpfs)' (12);
    EmptyDir, medium default|memory, volume mode — '... volume on default medium|tmpfs should
    have the correct mode' (2); EmptyDir, Shared volumes between containers — '... pod should
    support shared volumes between containers'."""
    await cluster.add_node(1)
    client = cluster.client
    expected: dict[str, list[str]] = {}
    for uid, who in ((0, "root"), (NON_ROOT, "non-root")):
        for mode, perms in (("0644", "-rw-r--r--"), ("0666", "-rw-rw-rw-"), ("0777", "-rwxrwxrwx")):
            for medium, kind in (("", "default"), ("Memory", "tmpfs")):
                name = f"{who}-{mode}-{kind}"
                await client.pods.create(_mode_pod(name, uid, mode, medium))
                expected[name] = [f"perms {perms}", "mount-tester new file", *(["tmpfs"] if medium else [])]
    for medium, kind in (("", "default"), ("Memory", "tmpfs")):
        name = f"volume-mode-{kind}"
        script = "stat -c 'perms %A' /test-volume" + (_MOUNT_TYPE if medium else "")
        await client.pods.create(_volume_pod(name, 0, medium, script))
        expected[name] = ["perms drwxrwxrwx", *(["tmpfs"] if medium else [])]
    writer = container("busybox-sub-container", "sh", "-c",
                       "echo 'Hello from the busy-box sub-container' > /usr/share/volumeshare/shareddata.txt; "
                       "sleep 3600")
    writer.volumeMounts.add(name="shared-data", mountPath="/usr/share/volumeshare")
    reader = container("busybox-main-container", "sh", "-c",
                       "until [ -s /usr/share/volumeshare/shareddata.txt ]; do sleep 0.1; done; "
                       "cat /usr/share/volumeshare/shareddata.txt; sleep 3600")
    reader.volumeMounts.add(name="shared-data", mountPath="/usr/share/volumeshare")
    shared = pod("pod-sharedvolume", reader, writer)
    shared.spec.volumes.add(name="shared-data", emptyDir=core_pb2.EmptyDirVolumeSource())
    await client.pods.create(shared)

    for name, lines in expected.items():
        assert await _output(cluster, name) == lines, name
    await cluster.wait_pod("pod-sharedvolume", lambda p: p.status.phase == "Running", timeout=60)

    async def read() -> str:
        return b"".join([chunk async for chunk in client.pods.logs("pod-sharedvolume", "default",
                                                                    container="busybox-main-container")]).decode()
    assert (await until(read, "the main container read the shared file")).strip() == \
        "Hello from the busy-box sub-container"


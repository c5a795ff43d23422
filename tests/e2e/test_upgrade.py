"""Upgrade in place: a cluster made by the previous landed commit keeps working when this
code starts on its state. The previous commit's tree comes out of git (`git archive`) into
a temp dir; its `kubeling up` makes the cluster and a pod, its `down --keep-state`
stops the components and leaves the pod's containers running (what an
operator does to swap binaries); then this code's `up` on the same state dir: the pod is
still running with the same container (the new kubelet adopts it, nothing restarted), the
stored objects read and write, new pods run."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from cluster.plan import ClusterPlan
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.test_up import _pod, _wait

# The commit of the last landed submission (issue 43's): the "previous release". Moved
# forward when a submission lands whose state the next must keep working with.
PREVIOUS = "db94074"
REPO = Path(__file__).resolve().parents[2]
CIDR = f"10.{181 + os.getpid() % 3}.0.0/16"


def _tree_of(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit], capture_output=True,
                             check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into)  # noqa: S202 (our own repository's tree)
    return into


def _kubeling(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubeling` of the tree (its own modules first, for every process it starts too)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, timeout=300,
                          cwd=tree, env=env, stdin=subprocess.DEVNULL)


async def test_the_previous_commits_cluster_keeps_running_under_this_code(tmp_path: Path) -> None:
    old = _tree_of(PREVIOUS, tmp_path / "previous")
    state = tmp_path / "cluster"
    prefix = f"g{os.getpid() % 1000}-"
    node = f"{prefix}1"
    up = ["up", "--nodes", "1", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
          "--cluster-cidr", CIDR, "--no-registry", "--no-ingress"]
    # the old tree's own code runs (it has no `kubeling etcd`, which came after it)
    assert _kubeling(old, "etcd", "--help").returncode == 2 and _kubeling(REPO, "etcd", "--help").returncode == 0
    try:
        started = _kubeling(old, *up)
        assert started.returncode == 0, started.stdout + started.stderr
        async with Client.from_kubeconfig(state / "kubeconfig") as client:
            await client.pods.create(_pod("survivor", node, "sleep", "3600"))
            before = await _wait(client, "survivor", lambda p: p.status.phase == "Running")
            await client.configmaps.create(core_pb2.ConfigMap(
                metadata=meta_pb2.ObjectMeta(name="kept", namespace="default"), data={"v": "1"}))
        stopped = _kubeling(old, "down", "--state-dir", str(state), "--keep-state")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr

        started = _kubeling(REPO, *up)
        assert started.returncode == 0, started.stdout + started.stderr
        async with Client.from_kubeconfig(state / "kubeconfig") as client:
            node_obj = await client.nodes.get(node)
            assert any(c.type == "Ready" and c.status == "True" for c in node_obj.status.conditions)
            now = await client.pods.get("survivor", "default")
            assert now.status.phase == "Running"
            was, is_ = before.status.containerStatuses[0], now.status.containerStatuses[0]
            assert is_.containerID == was.containerID and is_.restartCount == was.restartCount == 0
            kept = await client.configmaps.get("kept", "default")
            kept.data["v"] = "2"
            assert (await client.configmaps.update(kept)).data["v"] == "2"
            await client.pods.create(_pod("after", node, "sleep", "3600"))
            await _wait(client, "after", lambda p: p.status.phase == "Running")
            # the survivor's container is the one the previous kubelet started, still running
            again = await client.pods.get("survivor", "default")
            assert again.status.containerStatuses[0].containerID == was.containerID
        stopped = _kubeling(REPO, "down", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    finally:
        plan = ClusterPlan.load(state)
        if plan is not None and (plan.supervisor_pid or plan.components):
            _kubeling(REPO, "down", "--state-dir", str(state))
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""

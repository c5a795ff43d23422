"""Components upgraded one at a time, in the order upstream's version skew policy gives
(the apiserver first; the controller manager and scheduler may be one release older than
it; kubelets older still, never newer): this code's apiserver with the previous landed
commit's controller manager, scheduler and kubelet (its tree out of git, run as it was),
then each of those replaced by this code's in turn. At each step a Deployment scaled up
gets its new pod scheduled and running; the pods the previous kubelet started keep
running with the same containers under the new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from apiserver.server import APIServer
from cluster.cleanup import clean_kubelet
from cluster.etcd import EtcdServer
from kubelet.config import KubeletConfig
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2
from tests.conftest import apiserver_config
from tests.e2e.test_upgrade import PREVIOUS, REPO, _tree_of
from tests.wait import until

CIDR = f"10.{186 + os.getpid() % 3}.0.0/16"


class _Component:
    """One component's process, of a given tree."""

    def __init__(self, tree: Path, log: Path, module: str, *args: str) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=tree, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "PYTHONPATH": str(tree)})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def alive(self) -> None:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]


def _deployment(replicas: int) -> apps_pb2.Deployment:
    labels = {"app": "skew"}
    return apps_pb2.Deployment(
        metadata=meta_pb2.ObjectMeta(name="skew", namespace="default"),
        spec=apps_pb2.DeploymentSpec(replicas=replicas, selector=meta_pb2.LabelSelector(matchLabels=labels),
                                     template=core_pb2.PodTemplateSpec(
                                         metadata=meta_pb2.ObjectMeta(labels=labels),
                                         spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[
                                             core_pb2.Container(name="main", image="busybox",
                                                                imagePullPolicy="IfNotPresent",
                                                                command=["sleep", "3600"])]))))


async def _running(client: Client, count: int, alive: Callable[[], None]) -> list[core_pb2.Pod]:
    async def enough() -> list[core_pb2.Pod] | None:
        alive()
        pods = [p for p in (await client.pods.list("default", label_selector="app=skew")).items
                if p.status.phase == "Running" and not p.metadata.HasField("deletionTimestamp")]
        return pods if len(pods) == count else None
    found: list[core_pb2.Pod] = await until(enough, f"{count} pods of the Deployment running", 120, interval=0.3)
    return found


async def _scale(client: Client, replicas: int) -> None:
    deployment = await client.deployments.get("skew", "default")
    deployment.spec.replicas = replicas
    await client.deployments.update(deployment)


async def test_components_upgraded_one_at_a_time_within_the_skew_policy(etcd: EtcdServer, prefix: str,
                                                                         tmp_path: Path) -> None:
    old = _tree_of(PREVIOUS, tmp_path / "previous")
    node = f"skew{os.getpid() % 1000}"
    kubelet_config = KubeletConfig(node_name=node, root_dir=tmp_path / "kubelet", pod_logs_dir=tmp_path / "logs",
                                   runc_root=tmp_path / "runc", cluster_cidr=CIDR)
    server = APIServer(apiserver_config(etcd, prefix, cluster_cidr=CIDR))
    await server.start()
    address = server.address
    logs = tmp_path / "logs-of-components"
    logs.mkdir()

    def start(tree: Path, name: str) -> _Component:
        which = "old" if tree == old else "new"
        if name == "kubelet":
            return _Component(tree, logs / f"kubelet-{which}.log", "kubelet", "--node-name", node, "--apiserver",
                              address, "--root-dir", str(kubelet_config.root_dir), "--pod-logs-dir",
                              str(kubelet_config.pod_logs_dir), "--runc-root", str(kubelet_config.runc_root),
                              "--cluster-cidr", CIDR, "--node-status-update-frequency", "2",
                              "--node-lease-duration-seconds", "8")
        module = {"controller-manager": "controllers", "scheduler": "scheduler"}[name]
        return _Component(tree, logs / f"{name}-{which}.log", module, "--apiserver", address)

    running: dict[str, _Component] = {}
    client = Client(address, timeout=10)
    try:
        for name in ("controller-manager", "scheduler", "kubelet"):
            running[name] = start(old, name)

        def alive() -> None:
            for component in running.values():
                component.alive()

        async def node_ready() -> bool:
            alive()
            try:
                n = await client.nodes.get(node)
            except Exception:
                return False
            return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
        await until(node_ready, "the previous kubelet's node Ready", 120, interval=0.3)
        await client.deployments.create(_deployment(1))
        first = await _running(client, 1, alive)
        replicas = 1

        async def upgrade(name: str, check: Callable[[], Awaitable[Any]] | None = None) -> None:
            nonlocal replicas
            running[name].stop()
            running[name] = start(REPO, name)
            if check is not None:
                await check()
            replicas += 1
            await _scale(client, replicas)
            await _running(client, replicas, alive)

        await upgrade("controller-manager")  # this code's controllers with the previous scheduler and kubelet
        await upgrade("scheduler")
        await upgrade("kubelet", lambda: until(node_ready, "the new kubelet's node Ready", 120, interval=0.3))
        kept = await client.pods.get(first[0].metadata.name, "default")
        was, now = first[0].status.containerStatuses[0], kept.status.containerStatuses[0]
        assert now.containerID == was.containerID and now.restartCount == 0, "the old kubelet's pod kept its container"
        await client.deployments.delete("skew", "default")

        async def gone() -> bool:
            return not (await client.pods.list("default", label_selector="app=skew")).items
        await until(gone, "the Deployment's pods gone", 90)
    finally:
        for component in running.values():
            component.stop()
        await client.close()
        await server.stop(grace=0)
        await clean_kubelet(kubelet_config, remove_bridge=True)

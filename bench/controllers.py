"""The workload controllers' cost (not a test): `python -m bench.controllers --replicas 100
[--json OUT.json]`.

On a 1-node cluster (etcd, apiserver, scheduler, controller manager and kubelet, each its
own process, bench.cluster), three timings, each from the first API call to the last pod
seen Ready by a watch:

- anchor: the same number of bare pods created directly (64 at a time): what the node and
  the scheduler take for these pods without any controller;
- deployment: `replicas` pods made by a Deployment (its ReplicaSet's slow-start batches);
- rollout: a new template rolled out (RollingUpdate, 25% surge / 25% unavailable) until
  the Deployment reports every replica updated and available and no old pod is left.

And the pods each phase created, from a watch: the Deployment must create exactly
`replicas`, and so must the rollout (no duplicate from a slow watch or a retry).

Then the workload kinds of issue 37:

- statefulset: `--statefulset` pods (20) of an OrderedReady StatefulSet, from its create to
  the last one Ready, against its anchor in the same run: as many bare pods created one
  after another, each once the one before is Ready (what OrderedReady must do anyway);
- hpa: a HorizontalPodAutoscaler (cpu 50%, 1 to 3) made over a Deployment whose pod spins
  (200m limit on a 100m request): seconds until it scales the Deployment up, at the
  controller manager's default sync period (15 s, upstream's);
- daemonset: on `--daemonset-nodes` hollow nodes (100; bench.hollow's, in this
  process, with their own apiserver, scheduler and controller manager), a DaemonSet from
  its create to a pod Running on every node, and the pods created (must be the nodes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.apiserver import start_server, stop_servers
from bench.cluster import running_cluster
from bench.hollow import CHANNELS, LEASE_INTERVAL, HollowNode
from bench.output import report
from cluster.etcd import EtcdServer
from kubelet.agent import bridge_name
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, autoscaling_pb2, core_pb2, meta_pb2

NODE = f"benchctl{os.getpid() % 10000}"
CLUSTER_CIDR = "10.175.0.0/16"
CONCURRENCY = 64
_SERVE = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]


def _spec(image: str) -> core_pb2.PodSpec:
    return core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
        name="main", image=image, imagePullPolicy="IfNotPresent", command=_SERVE)])


def _ready(pod: core_pb2.Pod) -> bool:
    return not pod.metadata.HasField("deletionTimestamp") and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


class Pods:
    """A watch on app=<label>: the pods now, and every pod it saw created."""

    def __init__(self, client: Client, app: str) -> None:
        self.client, self.app = client, app
        self.now: dict[str, core_pb2.Pod] = {}
        self.created: set[str] = set()
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        items, rv = await self.client.pods.list_all(label_selector=f"app={self.app}")
        self.now = {p.metadata.name: p for p in items}
        self.task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        async for ev in self.client.pods.watch(label_selector=f"app={self.app}", resource_version=rv):
            name = ev.object.metadata.name
            if ev.type == "DELETED":
                self.now.pop(name, None)
            else:
                if ev.type == "ADDED":
                    self.created.add(name)
                self.now[name] = ev.object
            self.changed.set()

    async def until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"pods of app={self.app}: not there in {timeout:.0f}s")
            try:
                async with asyncio.timeout(min(left, 1.0)):
                    await self.changed.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def _anchor(client: Client, replicas: int, timeout: float) -> float:
    watch = Pods(client, "anchor")
    await watch.start()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def create(i: int) -> None:
        async with gate:
            await client.pods.create(core_pb2.Pod(metadata=meta_pb2.ObjectMeta(
                name=f"anchor-{i}", namespace="default", labels={"app": "anchor"}), spec=_spec("busybox")))
    start = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(replicas)))
    await watch.until(lambda: sum(_ready(p) for p in watch.now.values()) == replicas, timeout)
    took = time.monotonic() - start
    for i in range(replicas):
        await client.pods.delete(f"anchor-{i}", "default")
    await watch.until(lambda: not watch.now, timeout)
    await watch.stop()
    return took


async def _set_image(client: Client, image: str) -> apps_pb2.Deployment:
    """As `kubectl set image`: the controllers write the object too, so retry on conflicts."""
    while True:
        current = await client.deployments.get("bench", "default")
        current.spec.template.spec.containers[0].image = image
        try:
            return await client.deployments.update(current)
        except errors.Conflict:
            continue


async def _sequential(client: Client, count: int, timeout: float) -> float:
    """The StatefulSet's anchor: bare pods made one after another, each once the last is Ready."""
    watch = Pods(client, "seq")
    await watch.start()
    start = time.monotonic()
    for i in range(count):
        await client.pods.create(core_pb2.Pod(metadata=meta_pb2.ObjectMeta(
            name=f"seq-{i}", namespace="default", labels={"app": "seq"}), spec=_spec("busybox")))
        await watch.until(lambda i=i: _ready(watch.now.get(f"seq-{i}", core_pb2.Pod())), timeout)
    took = time.monotonic() - start
    for i in range(count):
        await client.pods.delete(f"seq-{i}", "default")
    await watch.until(lambda: not watch.now, timeout)
    await watch.stop()
    return took


async def _statefulset(client: Client, count: int, timeout: float) -> tuple[float, int]:
    watch = Pods(client, "sts")
    await watch.start()
    labels = {"app": "sts"}
    sts = apps_pb2.StatefulSet(metadata=meta_pb2.ObjectMeta(name="bench", namespace="default"), spec=(
        apps_pb2.StatefulSetSpec(replicas=count, serviceName="bench", selector=meta_pb2.LabelSelector(
            matchLabels=labels), template=core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels),
                                                                   spec=_spec("busybox")))))
    start = time.monotonic()
    await client.statefulsets.create(sts)
    await watch.until(lambda: sum(_ready(p) for p in watch.now.values()) == count, timeout)
    took = time.monotonic() - start
    created = len(watch.created)
    await client.statefulsets.delete("bench", "default")
    await watch.until(lambda: not watch.now, timeout)
    await watch.stop()
    return took, created


_SPIN = ["sh", "-c", "trap 'exit 0' TERM; while :; do :; done"]


async def _hpa(client: Client, timeout: float) -> float:
    """Seconds from a HorizontalPodAutoscaler's create to its first scale-up of a busy Deployment."""
    labels = {"app": "spin"}
    spec = core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
        name="main", image="busybox", imagePullPolicy="IfNotPresent", command=_SPIN,
        resources=core_pb2.ResourceRequirements(requests={"cpu": "100m"}, limits={"cpu": "200m"}))])
    watch = Pods(client, "spin")
    await watch.start()
    await client.deployments.create(apps_pb2.Deployment(
        metadata=meta_pb2.ObjectMeta(name="spin", namespace="default"), spec=apps_pb2.DeploymentSpec(
            replicas=1, selector=meta_pb2.LabelSelector(matchLabels=labels),
            template=core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels), spec=spec))))
    try:
        await watch.until(lambda: sum(_ready(p) for p in watch.now.values()) == 1, timeout)
        ref = autoscaling_pb2.CrossVersionObjectReference(apiVersion="apps/v1", kind="Deployment", name="spin")
        start = time.monotonic()
        await client.horizontalpodautoscalers.create(autoscaling_pb2.HorizontalPodAutoscaler(
            metadata=meta_pb2.ObjectMeta(name="spin", namespace="default"),
            spec=autoscaling_pb2.HorizontalPodAutoscalerSpec(scaleTargetRef=ref, minReplicas=1, maxReplicas=3)))
        while (await client.deployments.get("spin", "default")).spec.replicas == 1:
            if time.monotonic() - start > timeout:
                raise TimeoutError("the HorizontalPodAutoscaler did not scale up")
            await asyncio.sleep(0.2)
        return time.monotonic() - start
    finally:
        await client.horizontalpodautoscalers.delete("spin", "default")
        await client.deployments.delete("spin", "default")
        await watch.until(lambda: not watch.now, timeout)
        await watch.stop()


async def _daemonset(count: int, work: Path, timeout: float) -> dict[str, Any]:
    """A DaemonSet over `count` hollow nodes: until a pod is Running on each."""
    etcd = EtcdServer(data_dir=work / f"etcd-ds-{count}").start()
    procs: list[subprocess.Popen[bytes]] = []
    clients: list[Client] = []
    nodes: list[HollowNode] = []
    try:
        apiserver, address = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                           "--cluster-cidr", "", "--log-level", "WARNING"], work,
                                          f"apiserver-ds-{count}")
        procs.append(apiserver)
        log = open(work / f"components-ds-{count}.log", "ab")
        for argv in (["-m", "scheduler", "--apiserver", address, "--leader-elect", "false"],
                     ["-m", "controllers", "--apiserver", address, "--leader-elect", "false"]):
            procs.append(subprocess.Popen([sys.executable, *argv, "--log-level", "WARNING"], stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        clients = [Client(address, timeout=60) for _ in range(CHANNELS)]
        created: dict[str, float] = {}
        seen: dict[str, float] = {}
        nodes = [HollowNode(clients[i % CHANNELS], f"hollow-{i}", created, seen, []) for i in range(count)]
        gate = asyncio.Semaphore(CONCURRENCY)

        async def register(n: HollowNode) -> None:
            async with gate:
                await n.register()
        await asyncio.gather(*(register(n) for n in nodes))
        for i, n in enumerate(nodes):
            n.start(LEASE_INTERVAL * i / count)
        client = clients[0]
        watch = Pods(client, "daemon")
        await watch.start()
        labels = {"app": "daemon"}
        start = time.monotonic()
        await client.daemonsets.create(apps_pb2.DaemonSet(
            metadata=meta_pb2.ObjectMeta(name="daemon", namespace="default"), spec=apps_pb2.DaemonSetSpec(
                selector=meta_pb2.LabelSelector(matchLabels=labels),
                template=core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels), spec=_spec("busybox")))))
        await watch.until(lambda: sum(_ready(p) for p in watch.now.values()) == count, timeout)
        took = time.monotonic() - start
        status = (await client.daemonsets.get("daemon", "default")).status
        await watch.stop()
        return {"nodes": count, "all_running_s": round(took, 2), "pods_created": len(watch.created),
                "pods_missed_by_node_watches": sum(n.relisted for n in nodes),
                "pods_per_s": round(count / took, 1), "status_desired": status.desiredNumberScheduled}
    finally:
        for n in nodes:
            await n.stop()
        for c in clients:
            await c.close()
        stop_servers(procs, etcd)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-bench-controllers-"))
    try:
        out = await _run(args, work)
        out["daemonset"] = [await _daemonset(int(n), work, args.timeout)
                            for n in args.daemonset_nodes.split(",") if n]
        return out
    finally:
        # the node's bridge (its kubelet leaves it for the next start) and the cluster's files
        subprocess.run(["ip", "link", "del", bridge_name(NODE)], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


async def _run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    replicas = args.replicas
    async with running_cluster(work, NODE, CLUSTER_CIDR, max_pods=replicas * 2 + 10, controllers=True) as cluster:
        client = cluster.client
        anchor = await _anchor(client, replicas, args.timeout)
        watch = Pods(client, "bench")
        await watch.start()
        labels = {"app": "bench"}
        deployment = apps_pb2.Deployment(
            metadata=meta_pb2.ObjectMeta(name="bench", namespace="default"),
            spec=apps_pb2.DeploymentSpec(replicas=replicas, selector=meta_pb2.LabelSelector(matchLabels=labels),
                                         template=core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels),
                                                                           spec=_spec("busybox"))))
        try:
            start = time.monotonic()
            made = await client.deployments.create(deployment)
            await watch.until(lambda: sum(_ready(p) for p in watch.now.values()) == replicas, args.timeout)
            ready = time.monotonic() - start
            created_initial = len(watch.created)
            first = {p for p in watch.now}

            start = time.monotonic()
            updated = await _set_image(client, "busybox:latest")

            async def rolled_out() -> bool:
                d = await client.deployments.get("bench", "default")
                st = d.status
                return (st.observedGeneration >= updated.metadata.generation and st.updatedReplicas == replicas
                        and st.availableReplicas == replicas and st.replicas == replicas
                        and not (set(watch.now) & first))
            while not await rolled_out():
                if time.monotonic() - start > args.timeout:
                    raise TimeoutError("the rollout did not finish")
                await asyncio.sleep(0.2)
            rollout = time.monotonic() - start
            created_rollout = len(watch.created) - created_initial
        finally:
            await client.deployments.delete("bench", "default")
            await watch.until(lambda: not watch.now, args.timeout)
            await watch.stop()
        assert made.metadata.uid
        sequential = await _sequential(client, args.statefulset, args.timeout)
        ordered, sts_created = await _statefulset(client, args.statefulset, args.timeout)
        hpa = await _hpa(client, args.timeout) if args.hpa else None
    return {
        "benchmark": "controllers", "replicas": replicas,
        "anchor_bare_pods_ready_s": round(anchor, 2),
        "deployment_ready_s": round(ready, 2),
        "deployment_vs_anchor": round(ready / anchor, 2),
        "rollout_s": round(rollout, 2),
        "pods_created": {"deployment": created_initial, "rollout": created_rollout,
                         "expected_each": replicas},
        "extra_creations": created_initial + created_rollout - 2 * replicas,
        "statefulset": {"pods": args.statefulset, "ordered_ready_s": round(ordered, 2),
                        "anchor_sequential_pods_s": round(sequential, 2),
                        "vs_anchor": round(ordered / sequential, 2), "pods_created": sts_created},
        "hpa_scale_up_reaction_s": round(hpa, 2) if hpa is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.controllers", description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--statefulset", type=int, default=20, help="pods of the OrderedReady StatefulSet")
    parser.add_argument("--daemonset-nodes", default="100",
                        help="hollow node counts for the DaemonSet, e.g. 100,1000 (docs/benchmarks.md on 1,000)")
    parser.add_argument("--hpa", action=argparse.BooleanOptionalAction, default=True,
                        help="time a HorizontalPodAutoscaler's scale-up")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()

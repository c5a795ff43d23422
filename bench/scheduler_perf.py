"""Scheduler benchmark (not a test), modelled on upstream scheduler_perf's SchedulingBasic.

    python -m bench.scheduler_perf --nodes 5000 --init-pods 1000 --pods 10000 --mode inprocess --json OUT.json

Nodes: 4 CPU, 32Gi, 110 pods (upstream's node-default.yaml). Pods: one container
requesting 100m CPU and 500Mi (pod-default.yaml). Init pods are placed first and not
measured. Throughput is sampled once per second as upstream's throughputCollector does:
`throughput_avg_pods_per_s` and `throughput_p50_pods_per_s` over the seconds of the
measured phase; `attempt_p99_ms` is the scheduling attempt latency (algorithm only).

--mode inprocess: queue + cache + framework, with a binder that records the binding and
  feeds the bound pod back as the informer would.
--mode e2e: etcd + apiserver (separate processes) + the real scheduler service.
--record on: every attempt's plugin results recorded (the profile's recordResults) and
  turned into the annotations the binding would carry; --record both: off, then on, in the
  same run, with `record_on_over_off` the ratio of their throughputs.
--profile (inprocess): what makes the profile: `default` (the default plugins), a provider
  (`DefaultProvider`, `ClusterAutoscalerProvider`: upstream 1.19's sets), `Policy` (an
  empty Policy: the legacy registry's default predicates and priorities); `legacy` runs the
  default profile, DefaultProvider and Policy in the same run, with each one's throughput
  over the default's (`*_over_default`).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.output import report
from protos.kubeling.v1 import core_pb2, meta_pb2
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import BindPlugin
from scheduler.framework.results import on_pod
from scheduler.framework.status import SUCCESS, Status
from scheduler.legacy.policy import Policy
from scheduler.plugins import in_tree_registry
from scheduler.scheduler import Scheduler

WORKLOAD = "SchedulingBasic"


def make_node(name: str) -> core_pb2.Node:
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name),
                         status=core_pb2.NodeStatus(capacity=res, allocatable=res))


def make_pod(name: str, node: str = "") -> core_pb2.Pod:
    res = {"cpu": "100m", "memory": "500Mi"}
    pod = core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=core_pb2.PodSpec(nodeName=node, schedulerName="default-scheduler", priority=0, containers=[
            core_pb2.Container(name="pause", image="registry.k8s.io/pause:3.10.1",
                               ports=[core_pb2.ContainerPort(containerPort=80, protocol="TCP")],
                               resources=core_pb2.ResourceRequirements(requests=res, limits=res))]))
    return pod


class _RecordingBinder(BindPlugin):
    """Binds by telling the scheduler what its informer would have seen."""

    name = "BenchRecordingBinder"

    async def bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
        sched = self.handle
        assert isinstance(sched, Scheduler)  # the bench runs it in process
        bound = type(pod)()
        bound.CopyFrom(pod)
        bound.spec.nodeName = node_name
        annotations = on_pod(state.results)  # what DefaultBinder sends with the Binding
        if annotations:
            bound.metadata.annotations.update(annotations)
        sched.on_pod_update(pod, bound)
        return SUCCESS


class _Throughput:
    """Pods scheduled per second, sampled each second (upstream's throughputCollector)."""

    def __init__(self, count: Any) -> None:
        self.count = count
        self.samples: list[float] = []

    async def run(self) -> None:
        last, last_t = self.count(), time.perf_counter()
        while True:
            await asyncio.sleep(1.0)
            now, t = self.count(), time.perf_counter()
            self.samples.append((now - last) / (t - last_t))
            last, last_t = now, t


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _summary(mode: str, args: argparse.Namespace, samples: list[float], elapsed: float, scheduled: int,
             attempt_p99: float) -> dict[str, Any]:
    return {
        "workload": WORKLOAD, "mode": mode, "nodes": args.nodes, "init_pods": args.init_pods, "pods": args.pods,
        "scheduled": scheduled, "seconds": round(elapsed, 2),
        "throughput_avg_pods_per_s": round(statistics.fmean(samples) if samples else scheduled / elapsed, 1),
        "throughput_p50_pods_per_s": round(_percentile(samples, 50), 1),
        "throughput_overall_pods_per_s": round(scheduled / elapsed, 1),
        "attempt_p99_ms": round(attempt_p99 * 1000, 2),
    }


def _time_attempts(sched: Scheduler) -> list[float]:
    """Record each scheduling attempt's latency (the algorithm: filter, score, select)."""
    latencies: list[float] = []
    original = sched.schedule_pod

    async def timed(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return await original(*a, **kw)
        finally:
            latencies.append(time.perf_counter() - t)

    sched.schedule_pod = timed  # type: ignore[method-assign]
    return latencies


PROFILES = ("default", "DefaultProvider", "ClusterAutoscalerProvider", "Policy")


def _config(profile: str, record: bool, registry: dict[str, Any]) -> SchedulerConfig:
    """The profile `profile` names, binding through the recording binder."""
    data: dict[str, Any] = {"profiles": [{"recordResults": record}]}
    policy = None
    if profile == "Policy":
        data["algorithmSource"], policy = {"policy": {"file": {"path": "policy.json"}}}, Policy()
    elif profile != "default":
        data["algorithmSource"] = {"provider": profile}
    cfg = parse_config(data, registry, policy=policy)
    for p in cfg.profiles:
        p.points.enabled["bind"] = [_RecordingBinder.name]
    return cfg


async def run_inprocess(args: argparse.Namespace, record: bool = False, profile: str = "default") -> dict[str, Any]:
    registry = in_tree_registry()
    registry[_RecordingBinder.name] = _RecordingBinder
    cfg = _config(profile, record, registry)
    sched = Scheduler(cfg, registry)
    latencies = _time_attempts(sched)
    for i in range(args.nodes):
        sched.on_node_add(make_node(f"node-{i}"))
    for i in range(args.init_pods):
        sched.on_pod_add(make_pod(f"init-{i}", f"node-{i % args.nodes}"))
    for i in range(args.pods):
        sched.on_pod_add(make_pod(f"pod-{i}"))
    collector = _Throughput(lambda: sched.bound)
    sampler = asyncio.create_task(collector.run())
    start = time.perf_counter()
    while sched.bound < args.pods:
        if not await sched.schedule_one():
            break
        await asyncio.sleep(0)  # as Scheduler.run: let bindings and the sampler run
        if len(sched.queue.active) == 0:
            await sched.wait_for_bindings()
            if len(sched.queue.active) == 0:
                break
    await sched.wait_for_bindings()
    elapsed = time.perf_counter() - start
    sampler.cancel()
    return {**_summary("inprocess", args, collector.samples, elapsed, sched.bound, _percentile(latencies, 99)),
            "record": record, "profile": profile}


async def run_legacy(args: argparse.Namespace) -> dict[str, Any]:
    """The default profile, DefaultProvider and the Policy defaults, one after the other."""
    runs = {name: await run_inprocess(args, profile=name) for name in ("default", "DefaultProvider", "Policy")}
    base = runs["default"]["throughput_overall_pods_per_s"]
    return {"workload": WORKLOAD, "mode": "inprocess", **runs,
            **{f"{name}_over_default": round(r["throughput_overall_pods_per_s"] / base, 3)
               for name, r in runs.items() if name != "default"}}


async def run_record_both(args: argparse.Namespace) -> dict[str, Any]:
    off = await run_inprocess(args, record=False)
    on = await run_inprocess(args, record=True)
    return {"workload": WORKLOAD, "mode": "inprocess", "off": off, "on": on,
            "record_on_over_off": round(on["throughput_overall_pods_per_s"] / off["throughput_overall_pods_per_s"], 3)}


async def run_e2e(args: argparse.Namespace) -> dict[str, Any]:
    from bench.apiserver import start_server
    from cluster.etcd import EtcdServer
    from kubeling.client import Client
    from scheduler.service import SchedulerService

    workdir = Path(tempfile.mkdtemp(prefix="kubeling-schedperf-"))
    etcd = EtcdServer(data_dir=workdir / "etcd").start()
    proc = None
    try:
        proc, address = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                      "--log-level", "WARNING"], workdir, "apiserver")
        async with Client(address) as client:
            sem = asyncio.Semaphore(64)

            async def create(obj: Any, kind: str) -> None:
                async with sem:
                    await getattr(client, kind).create(obj)

            await asyncio.gather(*(create(make_node(f"node-{i}"), "nodes") for i in range(args.nodes)))
            await asyncio.gather(*(create(_api_pod(f"init-{i}", f"node-{i % args.nodes}"), "pods")
                                   for i in range(args.init_pods)))
            service = SchedulerService(address, leader_elect=False)
            latencies = _time_attempts(service.scheduler)
            await service.start()
            collector = _Throughput(lambda: service.scheduler.bound)
            sampler = asyncio.create_task(collector.run())
            start = time.perf_counter()
            await asyncio.gather(*(create(_api_pod(f"pod-{i}"), "pods") for i in range(args.pods)))
            deadline = time.monotonic() + args.timeout
            while service.scheduler.bound < args.pods and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            elapsed = time.perf_counter() - start
            sampler.cancel()
            bound = service.scheduler.bound
            await service.stop()
            return _summary("e2e", args, collector.samples, elapsed, bound, _percentile(latencies, 99))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _api_pod(name: str, node: str = "") -> core_pb2.Pod:
    pod = make_pod(name, node)
    pod.metadata.uid = ""
    return pod


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--init-pods", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--mode", choices=["inprocess", "e2e"], default="inprocess")
    p.add_argument("--timeout", type=float, default=600.0, help="e2e: give up after this many seconds")
    p.add_argument("--record", choices=["off", "on", "both"], default="off",
                   help="inprocess: record every attempt's plugin results (both: off, then on)")
    p.add_argument("--profile", choices=[*PROFILES, "legacy"], default="default",
                   help="inprocess: what makes the profile (legacy: default, DefaultProvider and Policy)")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    if args.mode == "e2e":
        result = asyncio.run(run_e2e(args))
    elif args.profile == "legacy":
        result = asyncio.run(run_legacy(args))
    elif args.record == "both":
        result = asyncio.run(run_record_both(args))
    else:
        result = asyncio.run(run_inprocess(args, record=args.record == "on", profile=args.profile))
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

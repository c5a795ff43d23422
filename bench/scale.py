"""Scale against upstream's SLOs (not a test), as ClusterLoader2's density test on kubemark
hollow nodes: `python -m bench.scale [--nodes 100,1000] [--rate 30] [--pods-per-node 30]
[--max-seconds 120] [--workers 2] [--simulator-nice 10] [--json OUT.json]`.

For each N, a fresh etcd, apiserver, scheduler and controller manager run as separate
processes (as deployed). Hollow kubelets run in `--workers` processes of their own (on
uvloop, niced: kubemark's hollow nodes run on machines of their own, here they share the
control plane's cores and yield them first; their CPU is reported apart and their timings
include their own waits), as upstream's kubelet behaves: each node registers
and makes its Lease (retried until they stick), renews the Lease every 10 s with the copy
it last wrote (a read only after a failure), watches its own Node (`metadata.name=<node>`,
upstream's node lister) and every 10 s writes its status when it differs (the node
controller set it Unknown) or 5 min passed, watches the pods bound to it (one watch per
node, `spec.nodeName=<node>`) and "runs" each one by writing its status Running and Ready;
both loops wait 10 s with upstream's 4 % jitter. Once the cluster is steady (every watch
open, their openings served, every Lease renewed since: `settle_seconds`), pods are
created at a steady `--rate` per second up to `--pods-per-node` × N or
`--max-seconds`, while a background of namespaced lists and single gets runs (one list
and ten gets a second). Only calls inside that window count. Reported per N:

- p99 per verb and resource, client-side (the driver's creates, gets and lists; the
  hollow kubelets' Lease, Node and pod-status calls), against upstream's SLOs: mutating and
  single reads ≤ 1 s, namespaced lists ≤ 5 s; and the apiserver's own
  `apiserver_request_duration_seconds` over the window (p99 as its bucket bound);
- pod startup p50/p99 (create → its kubelet wrote Running; image pull and containers
  excluded: hollow), SLO ≤ 5 s; the pod rate held;
- nodes that went NotReady (the controller manager's verdict) without cause: must be 0,
  with the longest gap between each one's Lease renewals (its kubelet's side of it);
- how late the hollow kubelets' and the driver's event loops ran (p99): their timings
  include it;
- CPU (ms/s) and RSS (MiB) per component, the hollow kubelets' apart; etcd's db size; the
  apiserver's RSS when empty and the encoded size of what it keeps;
- `largest_nodes_within_slos`: the largest N at which every SLO held.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import uvloop
from prometheus_client.parser import text_string_to_metric_families

from bench.apiserver import _cpu_seconds, _pct, _rss_mib, start_server, stop_servers
from bench.output import report
from cluster.etcd import EtcdServer
from kubeling import errors
from kubeling.client import Client, WatchEvent
from kubeling.gcfreeze import FreezeAfterFull
from kubeling.netutil import free_port
from protos.kubeling.v1 import coordination_pb2, core_pb2, meta_pb2

LEASE_INTERVAL = 10.0
STATUS_INTERVAL = 300.0  # node status reported on change, else every 5 min (upstream's kubelet)
STATUS_CHECK_INTERVAL = 10.0  # how often it looks (--node-status-update-frequency)
JITTER = 0.04  # upstream's jitter factor for both loops
SETTLED_READ_S = 0.1  # a steady apiserver answers a cached read within this
CHANNELS = 8  # per worker process, shared by its hollow kubelets
SLO_MUTATING_S, SLO_GET_S, SLO_LIST_S, SLO_STARTUP_S = 1.0, 1.0, 5.0, 5.0


# ---------------------------------------------------------------- the hollow kubelets (worker)


class _Worker:
    """`--worker`: hollow kubelets for nodes first..first+count-1, timings to --out on SIGTERM."""

    def __init__(self, address: str, first: int, count: int) -> None:
        self.clients = [Client(address, timeout=60) for _ in range(CHANNELS)]
        self.names = [f"hollow-{i}" for i in range(first, first + count)]
        # call -> (wall time it ended, seconds it took; inf: it failed)
        self.seconds: dict[str, list[tuple[float, float]]] = {}
        self.running_at: dict[str, float] = {}  # pod -> wall time its status said Running
        self.renewed_at: dict[str, list[float]] = {}  # node -> wall times its Lease renewals returned
        self.known: dict[str, core_pb2.Node] = {}  # node -> its latest copy: watched, or as last written

    def client(self, i: int) -> Client:
        return self.clients[i % CHANNELS]

    async def node(self, i: int, name: str, offset: float) -> None:
        client = self.client(i)
        capacity = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        node = core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}),
                             status=core_pb2.NodeStatus(capacity=capacity, allocatable=capacity))
        node.status.conditions.add(type="Ready", status="True", reason="KubeletReady")
        lease = coordination_pb2.Lease(metadata=meta_pb2.ObjectMeta(name=name, namespace="kube-node-lease"),
                                       spec=coordination_pb2.LeaseSpec(holderIdentity=name, leaseDurationSeconds=40))
        lease.spec.renewTime.GetCurrentTime()
        try:
            # registration and the first Lease retried until they stick, as the kubelet's
            # registerWithAPIServer and lease controller do (a refusal under load is not the end)
            await self._ensure(client.nodes.create, node, name)
            await self._ensure(client.leases.create, lease, name)
            await asyncio.gather(self._renew(client, name, offset), self._status(client, name, offset),
                                 self._pods(client, name), self._own_node(client, name))
        except Exception:  # a hollow kubelet that dies turns its node NotReady: say why, in the worker's log
            logging.exception("hollow kubelet %s died", name)
            raise

    @staticmethod
    async def _ensure(create: Any, obj: Any, name: str) -> None:
        delay = 0.1
        while True:
            start = time.perf_counter()
            try:
                await create(obj)
                return
            except errors.AlreadyExists:
                return
            except errors.ApiError as err:
                logging.warning("hollow kubelet %s: %s not created after %.1fs: %s %r, retried", name,
                                type(obj).__name__, time.perf_counter() - start, err.code, err.message)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 7.0)

    async def _renew(self, client: Client, name: str, offset: float) -> None:
        """As upstream's lease controller: an update of the Lease it last wrote, a read only
        after that failed (a conflict: someone else wrote it)."""
        await asyncio.sleep(offset)  # renewals spread over the interval, as independent kubelets'
        lease: coordination_pb2.Lease | None = None
        while True:
            start = time.perf_counter()
            try:
                if lease is None:
                    lease = await client.leases.get(name, "kube-node-lease")
                lease.spec.renewTime.GetCurrentTime()
                lease = await client.leases.update(lease)
                self._took("PUT leases", start)
                self.renewed_at.setdefault(name, []).append(time.time())
            except errors.ApiError as err:
                logging.warning("hollow kubelet %s: lease not renewed: %s", name, err)
                self._failed("PUT leases")
                lease = None
            await asyncio.sleep(_jittered(LEASE_INTERVAL))

    async def _status(self, client: Client, name: str, offset: float) -> None:
        """As the kubelet's syncNodeStatus: every 10 s a look at its Node — the watched copy
        (upstream's node lister; a read from the apiserver's cache only until the watch has
        brought it) —, a write when what it would report differs (the node controller set
        it Unknown) or 5 min passed; after a conflict, a read from etcd and a write again."""
        reported = time.monotonic()
        await asyncio.sleep(offset)
        latest = False  # after a conflict: etcd's copy
        while True:
            if not latest:
                await asyncio.sleep(_jittered(STATUS_CHECK_INTERVAL))
            node = self.known.get(name)
            if node is None or latest:
                start = time.perf_counter()
                try:
                    node = await client.nodes.get(name, resource_version="" if latest else "0")
                    self._took("GET nodes", start)
                except errors.ApiError as err:
                    logging.warning("hollow kubelet %s: node not read: %s", name, err)
                    self._failed("GET nodes")
                    continue
            latest = False
            ready = next((c for c in node.status.conditions if c.type == "Ready"), None)
            if ready is not None and ready.status == "True" and time.monotonic() - reported < STATUS_INTERVAL:
                continue
            start = time.perf_counter()
            mine = core_pb2.Node()
            mine.CopyFrom(node)
            del mine.status.conditions[:]
            mine.status.conditions.add(type="Ready", status="True", reason="KubeletReady").lastHeartbeatTime.\
                GetCurrentTime()
            try:
                self._keep(await client.nodes.update_status(mine))
                self._took("PUT nodes/status", start)
                reported = time.monotonic()
            except errors.Conflict:  # answered: the copy was old; read the latest and write again
                self._took("PUT nodes/status", start)
                latest = True
            except errors.ApiError as err:
                logging.warning("hollow kubelet %s: node status not written: %s", name, err)
                self._failed("PUT nodes/status")

    def _keep(self, node: core_pb2.Node) -> None:
        """The newer of this copy and the one known (the watch may bring a write after it)."""
        known = self.known.get(node.metadata.name)
        if known is None or int(node.metadata.resourceVersion) >= int(known.metadata.resourceVersion):
            self.known[node.metadata.name] = node

    async def _own_node(self, client: Client, name: str) -> None:
        """The kubelet's node informer: a watch on its own Node (`metadata.name=<node>`)."""
        while True:
            try:
                async for ev in client.nodes.watch(field_selector=f"metadata.name={name}"):
                    if ev.type in ("ADDED", "MODIFIED"):
                        self._keep(ev.object)
            except errors.ApiError:
                pass
            await asyncio.sleep(1.0)

    async def _pods(self, client: Client, name: str) -> None:
        while True:
            try:
                async for ev in client.pods.watch(field_selector=f"spec.nodeName={name}"):
                    await self._run(client, ev)
            except errors.ApiError:
                pass
            await asyncio.sleep(1.0)

    def _took(self, call: str, start: float) -> None:
        self.seconds.setdefault(call, []).append((time.time(), time.perf_counter() - start))

    def _failed(self, call: str) -> None:
        self.seconds.setdefault(call, []).append((time.time(), float("inf")))

    async def _run(self, client: Client, ev: WatchEvent[core_pb2.Pod]) -> None:
        pod = ev.object
        key = pod.metadata.name
        if ev.type not in ("ADDED", "MODIFIED") or key in self.running_at or pod.status.phase == "Running":
            return
        for _ in range(5):
            pod.status.phase = "Running"
            pod.status.podIP = "10.0.0.1"
            del pod.status.conditions[:]
            pod.status.conditions.add(type="Ready", status="True")
            start = time.perf_counter()
            try:
                await client.pods.update_status(pod)
                self._took("PUT pods/status", start)
                self.running_at[key] = time.time()
                return
            except errors.NotFound:
                return
            except errors.ApiError:
                await asyncio.sleep(0.2)
                try:
                    pod = await client.pods.get(key, pod.metadata.namespace)
                except errors.ApiError:
                    return

    async def run(self, out: Path) -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        tasks = [asyncio.create_task(self.node(i, n, LEASE_INTERVAL * i / len(self.names)))
                 for i, n in enumerate(self.names)]
        lags: list[tuple[float, float]] = []
        tasks.append(asyncio.create_task(_loop_lag(lags)))
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        out.write_text(json.dumps({"seconds": self.seconds, "running_at": self.running_at,
                                   "renewed_at": self.renewed_at, "loop_lag": lags}))
        for c in self.clients:
            await c.close()


def _jittered(interval: float) -> float:
    """Upstream's wait.JitterUntil(f, interval, 0.04, sliding): the kubelet's lease and node
    status loops wait up to 4 % longer each time, so renewals delayed together drift apart."""
    return interval * (1 + random.uniform(0, JITTER))


async def _settle(client: Client, rest: str, count: int, limit: float = 180.0) -> float | None:
    """Wait until the cluster is steady, as ClusterLoader2 starts on one (registration is not
    the density test): every hollow kubelet's two watches open (the apiserver's
    apiserver_registered_watchers), the backlog of their openings served (a read of one
    Node from the cache answered within SETTLED_READ_S for 5 s in a row), then one Lease
    interval so that every node renewed since. Seconds it took; None when not steady
    within `limit` (the window then starts anyway, and its figures say so)."""
    begin = time.monotonic()
    deadline = begin + limit
    while time.monotonic() < deadline:
        watchers = await asyncio.to_thread(_registered_watchers, rest)
        if watchers.get("pods", 0) >= count and watchers.get("nodes", 0) >= count:
            break
        await asyncio.sleep(1)
    calm = 0
    while calm < 5 and time.monotonic() < deadline:
        start = time.perf_counter()
        await client.nodes.get("hollow-0", resource_version="0")
        calm = calm + 1 if time.perf_counter() - start <= SETTLED_READ_S else 0
        await asyncio.sleep(1)
    steady = time.monotonic() < deadline
    await asyncio.sleep(LEASE_INTERVAL * (1 + JITTER))
    return round(time.monotonic() - begin, 1) if steady else None


def _registered_watchers(rest: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{rest}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {sample.labels["resource"]: sample.value for family in text_string_to_metric_families(text)
            if family.name == "apiserver_registered_watchers" for sample in family.samples}


async def _loop_lag(out: list[tuple[float, float]], period: float = 0.1) -> None:
    """(wall time, seconds late) of a timer every `period`: how long this process's event loop
    kept its callbacks waiting — when it is the hollow kubelets', their timings include it, and
    the simulator, not the apiserver, would be what limits the curve."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + period
        await asyncio.sleep(period)
        out.append((time.time(), loop.time() - due))


async def _work(address: str, first: int, count: int, out: Path) -> None:
    await _Worker(address, first, count).run(out)  # its gRPC channels made on this loop


# ---------------------------------------------------------------- the driver


class _Timings:
    """Seconds per call kind; a failed call (an error or a timeout) is counted apart."""

    def __init__(self) -> None:
        self.by_call: dict[str, list[float]] = {}
        self.failed: dict[str, int] = {}

    def add(self, call: str, seconds: float) -> None:
        if seconds == float("inf"):  # the hollow kubelets' way of saying a call failed
            self.failed[call] = self.failed.get(call, 0) + 1
        else:
            self.by_call.setdefault(call, []).append(seconds)


async def _timed(timings: _Timings, call: str, work: Any) -> Any:
    start = time.perf_counter()
    try:
        result = await work
    except errors.ApiError:
        timings.add(call, float("inf"))
        return None
    timings.add(call, time.perf_counter() - start)
    return result


async def _background(client: Client, timings: _Timings, created: dict[str, float], stop: asyncio.Event) -> None:
    """One namespaced list and ten single gets a second, as ClusterLoader2's load adds."""
    while not stop.is_set():
        await _timed(timings, "LIST pods (namespaced)", client.pods.list("default", limit=500))
        for name in list(created)[-10:]:
            await _timed(timings, "GET pods", client.pods.get(name, "default"))
        try:
            async with asyncio.timeout(1.0):
                await stop.wait()
        except TimeoutError:
            pass


def _request_buckets(rest: str) -> dict[tuple[str, str], dict[float, float]]:
    """The apiserver's own apiserver_request_duration_seconds: (verb, resource) -> le -> count."""
    with urllib.request.urlopen(f"http://{rest}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    out: dict[tuple[str, str], dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                key = (sample.labels["verb"], sample.labels["resource"])
                out.setdefault(key, {})[float(sample.labels["le"])] = sample.value
    return out


def _server_p99_ms(before: dict[tuple[str, str], dict[float, float]],
                   after: dict[tuple[str, str], dict[float, float]]) -> dict[str, float | None]:
    """Per verb and resource, the bucket bound under which 99 % of the window's requests
    finished (the histogram's resolution); watches left out (they last as long as the stream)."""
    out: dict[str, float | None] = {}
    for (verb, resource), buckets in sorted(after.items()):
        if verb.lower() == "watch" or resource == "-":  # watches; /metrics itself
            continue
        counts = {le: n - before.get((verb, resource), {}).get(le, 0.0) for le, n in buckets.items()}
        total = counts.get(float("inf"), 0.0)
        if total <= 0:
            continue
        bound = next((le for le in sorted(counts) if counts[le] >= 0.99 * total), float("inf"))
        out[f"{verb} {resource}"] = None if bound == float("inf") else round(bound * 1000, 1)
    return out


def _etcd_db_mib(endpoint: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5) as reply:
            for line in reply.read().decode().splitlines():
                if line.startswith("etcd_mvcc_db_total_size_in_bytes "):
                    return round(float(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


async def _encoded_mib(client: Client) -> float:
    """The protobuf size of the objects the test made the apiserver keep (nodes, leases, pods,
    events): what a compact cache would hold."""
    total = 0
    for resource in (client.nodes, client.leases, client.pods, client.events):
        total += sum(o.ByteSize() for o in (await resource.list()).items)
    return round(total / 2**20, 1)


def _longest_gap(times: list[float]) -> float | None:
    return round(max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0), 1) if times else None


async def _one(count: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    etcd = EtcdServer(data_dir=work / f"etcd-{count}").start()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    workers: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        rest = f"127.0.0.1:{free_port()}"  # its /metrics: the apiserver's own request durations
        apiserver, _ = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                     "--rest-listen", rest, "--cluster-cidr", "", "--log-level", "WARNING"],
                                    work, f"apiserver-{count}")
        # its port file: the gRPC port, then the REST port
        address = f"127.0.0.1:{(work / f'apiserver-{count}.port').read_text().split()[0]}"
        procs["apiserver"] = apiserver
        rss_empty = _rss_mib(apiserver.pid)  # before any node: what the objects add is measured from here
        for name, module, extra in (("scheduler", "scheduler", ["--leader-elect", "false"]),
                                    ("controller-manager", "controllers", [])):
            log = open(work / f"{name}-{count}.log", "ab")
            procs[name] = subprocess.Popen([sys.executable, "-m", module, "--apiserver", address, *extra,
                                            "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL)
        per = -(-count // args.workers)
        for w in range(args.workers):
            first, n = w * per, min(per, count - w * per)
            if n <= 0:
                continue
            out = work / f"worker-{count}-{w}.json"
            log = open(work / f"worker-{count}-{w}.log", "ab")
            workers.append((subprocess.Popen([sys.executable, "-m", "bench.scale", "--worker", address, str(first),
                                              str(n), str(out), str(args.simulator_nice)], stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), out))
        client = Client(address, timeout=60)
        deadline = time.monotonic() + 300
        while len((await client.nodes.list()).items) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} hollow nodes did not register in 300 s")
            await asyncio.sleep(1)
        settle_seconds = await _settle(client, rest, count)
        timings = _Timings()
        created_at: dict[str, float] = {}
        stop = asyncio.Event()
        background = asyncio.create_task(_background(client, timings, created_at, stop))
        driver_lags: list[tuple[float, float]] = []
        lag_task = asyncio.create_task(_loop_lag(driver_lags))
        window_from = time.time()
        cpu0 = {name: _cpu_seconds(p.pid) for name, p in procs.items()} | {"etcd": _cpu_seconds(etcd.pid or 0)}
        hollow0 = sum(_cpu_seconds(p.pid) for p, _ in workers)
        buckets0 = _request_buckets(rest)
        total = count * args.pods_per_node
        start = time.perf_counter()
        period = 1.0 / args.rate
        in_flight: set[asyncio.Task[Any]] = set()
        i = 0
        while i < total and time.perf_counter() - start < args.max_seconds:
            name = f"p-{i}"
            created_at[name] = time.time()
            pod = core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                               spec=core_pb2.PodSpec(containers=[core_pb2.Container(
                                   name="main", image="busybox", resources=core_pb2.ResourceRequirements(
                                       requests={"cpu": "10m", "memory": "16Mi"}))]))
            task = asyncio.create_task(_timed(timings, "POST pods", client.pods.create(pod)))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            i += 1
            await asyncio.sleep(max(0.0, start + i * period - time.perf_counter()))  # a steady rate
        await asyncio.gather(*in_flight)
        created_window = time.perf_counter() - start
        # every pod running (or a minute more), every lease renewed once more
        settle = time.monotonic() + 60
        while time.monotonic() < settle:
            pods = (await client.pods.list("default")).items
            if sum(1 for p in pods if p.status.phase == "Running") >= len(created_at):
                break
            await asyncio.sleep(1)
        await asyncio.sleep(LEASE_INTERVAL)
        window = time.perf_counter() - start
        stop.set()
        await background
        lag_task.cancel()
        window_to = time.time()
        server_p99 = _server_p99_ms(buckets0, _request_buckets(rest))
        cpu = {name: round((_cpu_seconds(p.pid) - cpu0[name]) / window * 1000, 1) for name, p in procs.items()}
        cpu["etcd"] = round((_cpu_seconds(etcd.pid or 0) - cpu0["etcd"]) / window * 1000, 1)
        cpu["hollow-kubelets"] = round((sum(_cpu_seconds(p.pid) for p, _ in workers) - hollow0) / window * 1000, 1)
        rss = {name: _rss_mib(p.pid) for name, p in procs.items()} | {"etcd": _rss_mib(etcd.pid or 0)}
        nodes = (await client.nodes.list()).items
        not_ready = sorted(n.metadata.name for n in nodes
                           if any(c.type == "Ready" and c.status != "True" for c in n.status.conditions))
        db = _etcd_db_mib(etcd.endpoint)
        cached = await _encoded_mib(client)
        await client.close()
        running_at: dict[str, float] = {}
        renewed_at: dict[str, list[float]] = {}
        hollow_lags: list[float] = []
        for proc, out in workers:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            data = json.loads(out.read_text())
            for call, durations in data["seconds"].items():  # the window's: registration is not the test
                for at, seconds in durations:
                    if window_from <= at <= window_to:
                        timings.add(call, seconds)
            running_at |= data["running_at"]
            renewed_at |= data["renewed_at"]
            hollow_lags += [lag for at, lag in data["loop_lag"] if window_from <= at <= window_to]
        workers.clear()
        startup = [running_at[n] - created_at[n] for n in created_at if n in running_at]
        p99 = {call: round(_pct(v, 99) * 1000, 1) if v else None for call, v in sorted(timings.by_call.items())}
        def within(prefixes: tuple[str, ...], bound_s: float) -> bool:
            return all(v is not None and v <= bound_s * 1000 for c, v in p99.items() if c.startswith(prefixes))
        slos = {
            "no_failed_calls": not timings.failed,
            "mutating_p99_le_1s": within(("POST", "PUT"), SLO_MUTATING_S),
            "get_p99_le_1s": within(("GET",), SLO_GET_S),
            "list_p99_le_5s": within(("LIST",), SLO_LIST_S),
            "pod_startup_p99_le_5s": bool(startup) and len(startup) == len(created_at) and
            _pct(startup, 99) <= SLO_STARTUP_S,
            "no_node_not_ready": not not_ready}
        return {"nodes": count, "settle_seconds": settle_seconds, "pods_created": len(created_at),
                "pods_running": len(startup),
                "pods_per_s_held": round(len(created_at) / created_window, 1),
                "p99_ms": p99, "server_p99_ms": server_p99,
                "calls": {c: len(v) for c, v in timings.by_call.items()}, "failed": timings.failed,
                "pod_startup_p50_ms": round(_pct(startup, 50) * 1000, 1) if startup else None,
                "pod_startup_p99_ms": round(_pct(startup, 99) * 1000, 1) if startup else None,
                "lease_renewal_p99_ms": p99.get("PUT leases"), "nodes_not_ready": not_ready,
                # with cause when its kubelet went quiet: the longest time between two renewals
                "not_ready_longest_renewal_gap_s": {n: _longest_gap(renewed_at.get(n, [])) for n in not_ready},
                # how late the simulator's and the driver's own event loops ran (their timings include it)
                "hollow_loop_lag_p99_ms": round(_pct(hollow_lags, 99) * 1000, 1) if hollow_lags else None,
                "driver_loop_lag_p99_ms": round(_pct([lag for _, lag in driver_lags], 99) * 1000, 1)
                if driver_lags else None,
                "cpu_ms_per_s": cpu, "rss_mib": rss, "etcd_db_mib": db,
                # the apiserver's memory against what it caches (the goal: within 2x)
                "apiserver_rss_empty_mib": rss_empty, "objects_encoded_mib": cached,
                "apiserver_rss_added_over_encoded": round((rss["apiserver"] - rss_empty) / cached, 2)
                if cached else None,
                "slos": slos,
                "within_slos": all(slos.values())}
    finally:
        for proc, _ in workers:
            proc.kill()
            proc.wait()
        stop_servers(procs.values(), etcd)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-scale-"))
    try:
        curve = [await _one(int(n), args, work) for n in args.nodes.split(",")]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    within = [c["nodes"] for c in curve if c["within_slos"]]
    return {"benchmark": "scale", "cpus": os.cpu_count(), "rate": args.rate, "pods_per_node": args.pods_per_node,
            "max_seconds": args.max_seconds, "workers": args.workers, "simulator_nice": args.simulator_nice,
            "curve": curve,
            "largest_nodes_within_slos": max(within) if within else 0}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        address, first, count, out, nice = argv[1], int(argv[2]), int(argv[3]), Path(argv[4]), int(argv[5])
        # Kubemark's hollow nodes run on machines of their own; here they share the control
        # plane's cores, so they yield them first (their own timings still include their waits).
        os.nice(nice)
        FreezeAfterFull().install()  # as every component's app.run: no loop-stopping full collections
        uvloop.run(_work(address, first, count, out))  # the simulator as cheap as it can be: it shares the CPUs
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="100,1000", help="node counts, comma-separated")
    p.add_argument("--rate", type=float, default=30.0, help="pods created per second (ClusterLoader2's density: 30)")
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--max-seconds", type=float, default=120.0, help="the creation phase's time bound")
    p.add_argument("--workers", type=int, default=2, help="processes playing the hollow kubelets")
    p.add_argument("--simulator-nice", type=int, default=10, choices=range(0, 20), metavar="0..19",
                   help="the hollow kubelets' niceness: they yield the shared cores to the control plane, as "
                        "kubemark's run on machines of their own (0: compete as equals)")
    p.add_argument("--json", default="")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    args = p.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

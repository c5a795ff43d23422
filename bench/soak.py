"""A soak (not a test by itself; `tests/e2e/test_soak.py` runs it CI-sized): `python -m
bench.soak --minutes M | --hours H [--nodes 2] [--json OUT.json]`; exit 1 when it finds a leak.

Brings up a cluster as a user does (`kubeling up --detach`, a state dir and KUBELING_HOME
of its own, every component with $KUBELING_VITALS_DIR set so that each tells its asyncio
tasks, kubeling.vitals) and drives a steady mix through kubectl and the API, round after
round: a Deployment rolled, a Job run to completion and deleted, a Service and a ConfigMap
made, changed and deleted, an exec and a port-forward into a pod, watches opened and
dropped. Every `--interval` seconds (default: a minute, at most a 30th of the run) it
samples each component's RSS, open fds and threads (/proc), its asyncio tasks (its vitals
file), etcd's db size, what of it is in use, its revision and its keys by resource, the
nodes' CNI IPAM allocations and runc containers, and the API's latency (the round's probe).

Verdicts:
- **slopes**: after a warm-up, a least-squares line per series; its slope per hour and
  the 95 % bound (t-distribution) are reported. A series leaks when even the bound's low
  end is above its tolerance (RSS 8 MiB/h, fds 4/h, tasks 20/h, threads 2/h, etcd db
  8 MiB/h). Events live an hour, and until the first expire etcd's data and the caches
  grow by design: judged runs warm up for that hour and a compaction interval (65 min)
  and need 20 minutes after it (a run of 85 minutes or more); a shorter run's slopes,
  after a fifth of it (at most 10 minutes), are reported (`--judge-slopes` judges them).
- **after the churn** (strict, every run): what the mix made is deleted, then the runc
  containers and IPAM allocations must be what they were before it, and each Python
  component's asyncio tasks and fds within a small margin of it (a connection pool's
  size), once the cluster has had half a minute to settle.
- **restarts**: a component the supervisor had to start again is a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aetcd.rpc
import grpc
from aetcd.rpc import rpc_pb2

from apiserver.storage.etcd import EtcdTLS, open_channel, prefix_end
from apiserver.storage.maintenance import Maintenance
from bench.output import report
from kubeling.client import Client
from kubeling.kubeconfig import find_kubectl

CLUSTER_CIDR = "10.179.0.0/16"
# Events live an hour (the apiserver's --event-ttl, upstream's default, as `kubeling up`
# runs it): until the first of them expire, etcd's data and the caches that hold them grow
# by design. Judged slopes start after it and one compaction interval more.
EVENT_TTL_S, COMPACTION_S = 3600, 300
TOLERANCE_PER_HOUR = {"rss_mib": 8.0, "fds": 4.0, "asyncio_tasks": 20.0, "threads": 2.0, "etcd_db_mib": 8.0}
# after the churn: how far above its baseline a count may stay (pools, caches, a watch more)
SETTLED_MARGIN = {"asyncio_tasks": 10, "fds": 8}
JUDGED_WINDOW_S = 20 * 60  # the least window after the warm-up whose slopes are judged

WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: soak-web}
spec:
  replicas: 2
  selector: {matchLabels: {app: soak-web}}
  template:
    metadata: {labels: {app: soak-web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [httpd, -f, -p, "8080", -h, /etc]
        ports: [{containerPort: 8080}]
"""


def t_975(df: int) -> float:
    """Student's t, two-sided 95 %, df degrees of freedom (table to 30, then a close fit)."""
    table = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
             2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
             2.045, 2.042]
    if df < 1:
        return math.inf
    return table[df - 1] if df <= 30 else 1.960 + 2.4 / df


def fit(points: list[tuple[float, float]]) -> dict[str, float]:
    """Least squares of value on time (hours): slope per hour and its 95 % bound."""
    n = len(points)
    if n < 3:
        return {"slope_per_hour": 0.0, "bound_95": math.inf, "samples": n}
    xs = [p[0] / 3600 for p in points]
    ys = [p[1] for p in points]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return {"slope_per_hour": 0.0, "bound_95": math.inf, "samples": n}
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    residual = sum((y - (my + slope * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    stderr = math.sqrt(residual / (n - 2) / sxx)
    return {"slope_per_hour": round(slope, 3), "bound_95": round(t_975(n - 2) * stderr, 3), "samples": n}


def _proc(pid: int) -> dict[str, float] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = re.search(r"VmRSS:\s+(\d+)", status)
    threads = re.search(r"Threads:\s+(\d+)", status)
    return {"rss_mib": int(rss.group(1)) / 1024 if rss else 0.0, "fds": fds,
            "threads": int(threads.group(1)) if threads else 0}


@dataclass
class Soak:
    work: Path
    nodes: int
    interval: float
    kubectl_binary: str
    env: dict[str, str] = field(default_factory=dict)
    state: Path = field(init=False)
    vitals: Path = field(init=False)
    samples: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (when, seconds) of the probe's API calls
    sampled_latencies: int = 0  # how many of them earlier samples summed up
    rounds: int = 0
    errors: list[str] = field(default_factory=list)
    judge_slopes: bool = False

    def __post_init__(self) -> None:
        self.state = self.work / "cluster"
        self.vitals = self.work / "vitals"
        self.env = {**os.environ, "KUBELING_HOME": str(self.work / "home"), "HOME": str(self.work),
                    "KUBECONFIG": str(self.state / "kubeconfig"), "KUBELING_VITALS_DIR": str(self.vitals)}

    # -------------------------------------------------------------- commands

    def kubeling(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cluster", *args], env=self.env, capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"kubeling {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done.stdout

    async def kubectl(self, *args: str, timeout: float = 180) -> str:
        proc = await asyncio.create_subprocess_exec(self.kubectl_binary, *args, env=self.env,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"kubectl {' '.join(args)}: no answer in {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {err.decode()[-1000:]}")
        return out.decode()

    # -------------------------------------------------------------- the mix

    async def round(self) -> None:
        n = self.rounds = self.rounds + 1
        await self.kubectl("patch", "deployment", "soak-web", "-p",
                           json.dumps({"spec": {"template": {"metadata": {"annotations": {"soak/round": str(n)}}}}}))
        await self.kubectl("rollout", "status", "deployment/soak-web", "--timeout=170s")
        await self.kubectl("create", "job", f"soak-job-{n}", "--image=busybox", "--", "true")
        await self.kubectl("wait", "--for=condition=complete", f"job/soak-job-{n}", "--timeout=170s")
        await self.kubectl("delete", "job", f"soak-job-{n}", "--cascade=background", "--wait=false")
        await self.kubectl("create", "configmap", f"soak-cm-{n}", f"--from-literal=round={n}")
        await self.kubectl("create", "service", "clusterip", f"soak-svc-{n}", "--tcp=80:8080")
        await self.kubectl("patch", "configmap", f"soak-cm-{n}", "-p", json.dumps({"data": {"changed": "yes"}}))
        await self.kubectl("delete", "configmap", f"soak-cm-{n}")
        await self.kubectl("delete", "service", f"soak-svc-{n}")
        await self.kubectl("exec", "deploy/soak-web", "--", "cat", "/etc/hostname")
        await self._port_forward()
        await self._watches()

    async def _port_forward(self) -> None:
        proc = await asyncio.create_subprocess_exec(self.kubectl_binary, "port-forward", "deploy/soak-web", ":8080",
                                                    env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            async with asyncio.timeout(60):
                line = (await proc.stdout.readline()).decode()
            port = re.search(r"127\.0\.0\.1:(\d+)", line)
            if port is None:
                raise RuntimeError(f"kubectl port-forward said {line!r}")
            reader, writer = await asyncio.open_connection("127.0.0.1", int(port.group(1)))
            writer.write(b"GET /hostname HTTP/1.0\r\n\r\n")
            async with asyncio.timeout(30):
                answer = await reader.read()
            writer.close()
            if b"200 OK" not in answer:
                raise RuntimeError(f"port-forward answered {answer[:100]!r}")
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()

    async def _watches(self) -> None:
        """Ten watches opened, each read to its first event, and dropped; and the API's
        latency, as a client sees it: a LIST of the namespace's pods and one of the nodes
        (both consistent, on a new connection), timed (kubectl's own start would drown it)."""
        async with Client.from_kubeconfig(self.state / "kubeconfig") as client:
            for call in (lambda: client.pods.list("default"), lambda: client.nodes.list()):
                began = time.monotonic()
                await call()
                self.latencies.append((time.time(), time.monotonic() - began))
            for _ in range(10):
                async with asyncio.timeout(30):
                    async for _event in client.pods.watch("default"):
                        break

    # -------------------------------------------------------------- sampling

    def _plan(self) -> dict[str, Any]:
        return dict(json.loads((self.state / "cluster.json").read_text()))

    def _vitals(self) -> dict[int, int]:
        out = {}
        for f in self.vitals.glob("*.json"):
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            out[int(data["pid"])] = int(data["asyncio_tasks"])
        return out

    async def sample(self, began: float) -> dict[str, Any]:
        plan = self._plan()
        tasks = self._vitals()
        components: dict[str, dict[str, float]] = {}
        for name, pid in plan["components"].items():
            found = _proc(pid)
            if found is None:
                continue
            if pid in tasks:
                found["asyncio_tasks"] = tasks[pid]
            found["pid"] = pid
            components[name] = found
        pki = self.state / "pki"
        tls = EtcdTLS(*(p.read_bytes() for p in (pki / "ca.crt", pki / "apiserver-etcd-client.crt",
                                                  pki / "apiserver-etcd-client.key")))
        maintenance = Maintenance(tls, timeout=10)
        etcd = [await maintenance.status(f"127.0.0.1:{plan['etcd_port']}")]
        latencies = [d for _, d in self.latencies[self.sampled_latencies:]]  # the API probe's since the last sample
        self.sampled_latencies = len(self.latencies)
        return {"t": round(time.monotonic() - began, 1), "components": components, "api_p99_s": _p99(latencies),
                "etcd_db_mib": round(etcd[0].db_size / (1 << 20), 3),
                "etcd_db_in_use_mib": round(etcd[0].db_size_in_use / (1 << 20), 3), "etcd_revision": etcd[0].revision,
                "etcd_keys": await _keys_by_resource(f"127.0.0.1:{plan['etcd_port']}", tls),
                "runc_containers": self._runc_containers(plan), "ipam_allocations": self._ipam(plan)}

    def _runc_containers(self, plan: dict[str, Any]) -> int:
        count = 0
        for node in plan["nodes"]:
            root = self.state / "runc" / node
            if not root.is_dir():
                continue
            done = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True)
            count += len(done.stdout.split())
        return count

    def _ipam(self, plan: dict[str, Any]) -> int:
        count = 0
        for node in plan["nodes"]:
            for network in (self.state / "kubelet" / node / "cni-ipam").glob("*"):
                count += sum(1 for f in network.iterdir() if re.fullmatch(r"[0-9a-f.:]+", f.name))
        return count

    # -------------------------------------------------------------- the run

    async def run(self, seconds: float) -> dict[str, Any]:
        self.kubeling("up", "--nodes", str(self.nodes), "--detach", "--name", "soak", "--state-dir", str(self.state),
                      "--cluster-cidr", CLUSTER_CIDR, "--no-registry", "--kubeconfig", str(self.work / "kubeconfig"))
        baseline = await self._settled_sample()  # the cluster alone, before anything of the soak's
        (self.work / "web.yaml").write_text(WEB)
        await self.kubectl("apply", "-f", str(self.work / "web.yaml"))
        await self.kubectl("rollout", "status", "deployment/soak-web", "--timeout=170s")
        first_pids = {name: c["pid"] for name, c in baseline["components"].items()}
        began = time.monotonic()
        next_sample = 0.0
        while time.monotonic() - began < seconds:
            try:
                await self.round()
            except (RuntimeError, TimeoutError, OSError) as err:
                self.errors.append(f"round {self.rounds}: {err}")
            if time.monotonic() - began >= next_sample:
                try:
                    self.samples.append(await self.sample(began))
                except (grpc.RpcError, OSError, ValueError) as err:  # a failure of the run, kept with its data
                    self.errors.append(f"sample at {time.monotonic() - began:.0f} s: {err}")
                next_sample += self.interval
        await self.kubectl("delete", "deployment", "soak-web")
        after = await self._settled_sample(wait_for_pods_gone=True)
        return self._verdicts(seconds, baseline, after, first_pids)

    async def _settled_sample(self, wait_for_pods_gone: bool = False) -> dict[str, Any]:
        """A sample once the soak's own pods are gone (or, before the churn, once they run)
        and half a minute of quiet has passed for pools and caches to settle."""
        if wait_for_pods_gone:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                out = await self.kubectl("get", "pods", "-o", "name")
                if not [line for line in out.split() if "soak-" in line]:
                    break
                await asyncio.sleep(2)
        await asyncio.sleep(30)
        return await self.sample(time.monotonic())

    def _verdicts(self, seconds: float, baseline: dict[str, Any], after: dict[str, Any],
                  first_pids: dict[str, int]) -> dict[str, Any]:
        leaks: list[str] = []
        warmup: float = EVENT_TTL_S + COMPACTION_S
        judged = seconds - warmup >= JUDGED_WINDOW_S
        if not judged:  # a short run: its slopes after a short warm-up, reported (judged if asked)
            warmup = min(600.0, seconds / 5)
            judged = self.judge_slopes
        window = [s for s in self.samples if s["t"] >= warmup]
        slopes: dict[str, dict[str, Any]] = {}
        names = sorted({n for s in window for n in s["components"]})
        for name in names:
            for metric in ("rss_mib", "fds", "threads", "asyncio_tasks"):
                points = [(s["t"], s["components"][name][metric]) for s in window
                          if name in s["components"] and metric in s["components"][name]]
                if len(points) < 3:
                    continue
                line = fit(points)
                slopes[f"{name}.{metric}"] = line
                if judged and line["slope_per_hour"] - line["bound_95"] > TOLERANCE_PER_HOUR[metric]:
                    leaks.append(f"{name} {metric} grows {line['slope_per_hour']} ± {line['bound_95']}/h")
        for metric in ("etcd_db_mib", "etcd_revision", "runc_containers", "ipam_allocations"):
            line = fit([(s["t"], s[metric]) for s in window])
            slopes[metric] = line
            if judged and metric in TOLERANCE_PER_HOUR and \
                    line["slope_per_hour"] - line["bound_95"] > TOLERANCE_PER_HOUR[metric]:
                leaks.append(f"{metric} grows {line['slope_per_hour']} ± {line['bound_95']}/h")
        # after the churn: back where it started
        for metric in ("runc_containers", "ipam_allocations"):
            if after[metric] != baseline[metric]:
                leaks.append(f"{metric}: {baseline[metric]} before the churn, {after[metric]} after it")
        for name, before in baseline["components"].items():
            now = after["components"].get(name)
            if now is None:
                leaks.append(f"{name} is gone")
                continue
            if now["pid"] != first_pids.get(name):
                leaks.append(f"{name} was restarted (pid {first_pids.get(name)} → {now['pid']})")
            for metric, margin in SETTLED_MARGIN.items():
                if metric in before and metric in now and now[metric] > before[metric] + margin:
                    leaks.append(f"{name} {metric}: {before[metric]} before the churn, {now[metric]} after it")
        if self.errors:
            leaks.append(f"{len(self.errors)} round(s) or sample(s) failed: {self.errors[0]}")
        early = [d for t, d in self.latencies if t - self.latencies[0][0] < 600] if self.latencies else []
        late_from = self.latencies[-1][0] - 600 if self.latencies else 0
        late = [d for t, d in self.latencies if t >= late_from]
        return {"benchmark": "soak", "seconds": round(seconds), "nodes": self.nodes, "rounds": self.rounds,
                "interval_seconds": self.interval, "warmup_seconds": round(warmup), "slopes_judged": judged,
                "tolerance_per_hour": TOLERANCE_PER_HOUR, "slopes": slopes,
                "api_p99_first_10min_s": _p99(early), "api_p99_last_10min_s": _p99(late),
                "api_p99_last_over_first": round(_p99(late) / _p99(early), 2) if early and _p99(early) else None,
                "before_churn": _brief(baseline), "after_churn": _brief(after), "errors": self.errors[:20],
                "leaks": leaks, "samples": self.samples}


async def _keys_by_resource(endpoint: str, tls: EtcdTLS | None, page: int = 1_000) -> dict[str, int]:
    """How many keys etcd holds under each /registry/<resource>/ (what grows, when etcd does).
    Read in pages: an hour of Events' keys is past gRPC's 4 MiB message (the first 2-hour
    run ended there, at 58 minutes)."""
    channel = open_channel(endpoint, tls)
    counts: dict[str, int] = {}
    start, end = b"/registry/", prefix_end(b"/registry/")
    try:
        while True:
            resp = await aetcd.rpc.KVStub(channel).Range(rpc_pb2.RangeRequest(
                key=start, range_end=end, keys_only=True, limit=page), timeout=30)
            for kv in resp.kvs:
                resource = kv.key.split(b"/")[2].decode(errors="replace")
                counts[resource] = counts.get(resource, 0) + 1
            if not resp.more or not resp.kvs:
                break
            start = resp.kvs[-1].key + b"\0"
    finally:
        await channel.close()
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3)


def _brief(sample: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sample.items() if k != "t"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    length = parser.add_mutually_exclusive_group(required=True)
    length.add_argument("--minutes", type=float)
    length.add_argument("--hours", type=float)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between samples (default: 60, at most "
                                                                     "a 30th of the run)")
    parser.add_argument("--judge-slopes", action="store_true", help="judge the slopes of a run under 20 minutes too")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    seconds = args.minutes * 60 if args.minutes is not None else args.hours * 3600
    kubectl = find_kubectl()
    if kubectl is None:
        raise SystemExit("kubectl is needed (make deps installs it)")
    work = Path(tempfile.mkdtemp(prefix="kubeling-soak-"))
    soak = Soak(work, args.nodes, args.interval or min(60.0, seconds / 30), kubectl, judge_slopes=args.judge_slopes)
    try:
        result = asyncio.run(soak.run(seconds))
    finally:
        subprocess.run([sys.executable, "-m", "cluster", "down", "--state-dir", str(soak.state)], env=soak.env,
                       capture_output=True, timeout=300)
        shutil.rmtree(work, ignore_errors=True)
    samples = result.pop("samples")
    report(result)  # printed without the samples; the file has them
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({**result, "samples": samples}, indent=2) + "\n")
    for leak in result["leaks"]:
        print(f"LEAK: {leak}", file=sys.stderr)
    return 1 if result["leaks"] else 0


if __name__ == "__main__":
    sys.exit(main())

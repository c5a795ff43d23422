"""Apiserver benchmark (not a test): `python -m bench.apiserver --json OUT.json`.

Starts etcd and the apiserver as separate processes (as deployed) and measures, from
this load-generating process:

- etcd_txn_per_s: raw create-if-absent transactions through aetcd, 64 concurrent tasks;
- apiserver_create_per_s: pod creates through the apiserver, 64 concurrent clients
  (tasks over 8 gRPC channels); create_ratio = apiserver_create_per_s / etcd_txn_per_s;
- grpc_floor_create_per_s: the same load against bench/grpc_floor.py, a bare grpc.aio
  server doing only the etcd transaction: the ceiling for any Python gRPC apiserver here
  (floor_ratio = it / etcd_txn_per_s; apiserver_vs_floor = apiserver / it);
- apiserver_cpu_us_per_create: the apiserver process's CPU time per create;
- apiserver_rss_mib_per_10k_pods: what the created pods add to its RSS (its watch cache
  keeps each), against their protobuf size (`pods_rss_added_over_encoded`);
- watch fan-out, kubelet-shaped: 500 watchers, each filtered to its own node
  (fieldSelector spec.nodeName=node-i), plus 3 unfiltered watchers (a scheduler and
  controllers), while pods bound round-robin to those nodes are created at 200/s.
  watch_p50_ms / watch_p99_ms: from the moment the create is sent (an upper bound on its
  commit) to delivery to each watcher it concerns.

`--ha` then measures creates through HAProxy (Debian's, TCP mode, /readyz checks, as
`kubeling up --apiservers N` runs it) to one and to two apiservers on the same etcd:
`ha_create_ratio_2_over_1` (HAProxy balances connections: the 8 channels split 4 and 4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import aetcd
import yaml

from apiserver.storage.encryption import new_aescbc_config
from bench.output import report
from cluster.etcd import EtcdServer
from kubeling import pki
from kubeling.client import Client, TLSConfig
from kubeling.netutil import free_port
from protos.kubeling.v1 import core_pb2, meta_pb2

CONCURRENCY = 64


def _pod(name: str, node: str = "") -> core_pb2.Pod:
    return core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default", labels={"app": "bench"}),
        spec=core_pb2.PodSpec(nodeName=node, containers=[core_pb2.Container(
            name="main", image="busybox:1.35", command=["sleep", "3600"],
            resources=core_pb2.ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}))]))


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def bench_etcd(endpoint: str, total: int) -> float:
    host, _, port = endpoint.rpartition(":")
    value = _pod("x").SerializeToString()
    async with aetcd.Client(host=host, port=int(port)) as client:
        counter = iter(range(total))

        async def worker() -> None:
            for i in counter:
                key = f"/bench/raw/{i}".encode()
                await client.transaction(
                    compare=[client.transactions.mod(key) == 0],
                    success=[client.transactions.put(key, value)], failure=[])

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return total / (time.perf_counter() - start)


def _secret(name: str) -> core_pb2.Secret:
    return core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                           data={"password": b"p" * 64, "certificate": b"c" * 1024})


async def bench_creates(address: str, total: int, tls: TLSConfig | None = None,
                        secrets: bool = False) -> tuple[float, float]:
    """Creates/s and their median latency (ms): pods, or Secrets."""
    clients = [Client(address, tls=tls) for _ in range(8)]
    counter = iter(range(total))
    latencies: list[float] = []

    async def worker(c: Client) -> None:
        for i in counter:
            t = time.perf_counter()
            if secrets:
                await c.secrets.create(_secret(f"create-{i}"))
            else:
                await c.pods.create(_pod(f"create-{i}"))
            latencies.append(time.perf_counter() - t)

    for c in clients:  # connect first: measure requests, not handshakes
        await c.pods.list(limit=1)
    start = time.perf_counter()
    await asyncio.gather(*(worker(clients[i % len(clients)]) for i in range(CONCURRENCY)))
    rate = total / (time.perf_counter() - start)
    for c in clients:
        await c.close()
    return rate, statistics.median(latencies) * 1000


async def bench_watch(address: str, watchers: int, unfiltered: int, rate: float, seconds: float,
                      tls: TLSConfig | None = None) -> dict[str, float]:
    clients = [Client(address, tls=tls) for _ in range(8)]
    sent: dict[str, float] = {}
    latencies: list[float] = []
    expected = 0
    start_rv = (await clients[0].pods.list(limit=1)).metadata.resourceVersion
    opened = 0

    async def watch(c: Client, selector: str) -> None:
        nonlocal opened
        stream = c.pods.watch(resource_version=start_rv, field_selector=selector)
        opened += 1
        async for ev in stream:
            t = sent.get(ev.object.metadata.name)
            if t is not None and ev.type == "ADDED":
                latencies.append(time.perf_counter() - t)

    tasks = [asyncio.create_task(watch(clients[i % 8], f"spec.nodeName=node-{i}")) for i in range(watchers)]
    tasks += [asyncio.create_task(watch(clients[i % 8], "")) for i in range(unfiltered)]
    while opened < len(tasks):
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # every stream registered server-side

    creator = clients[0]
    count = int(rate * seconds)
    begin = time.perf_counter()
    pending: list[asyncio.Task[object]] = []
    for i in range(count):
        target = begin + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        name = f"w-{i}"
        sent[name] = time.perf_counter()
        pending.append(asyncio.create_task(creator.pods.create(_pod(name, f"node-{i % watchers}"))))
    await asyncio.gather(*pending)
    achieved = count / (time.perf_counter() - begin)
    expected = count * (1 + unfiltered)
    deadline = time.perf_counter() + 30
    while len(latencies) < expected and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in clients:
        await c.close()
    ms = [x * 1000 for x in latencies]
    return {
        "watchers": watchers + unfiltered,
        "watchers_filtered_by_node": watchers,
        "watchers_unfiltered": unfiltered,
        "watch_create_rate_per_s": round(achieved, 1),
        "watch_events_expected": expected,
        "watch_events_delivered": len(latencies),
        "watch_p50_ms": round(_pct(ms, 50), 2),
        "watch_p99_ms": round(_pct(ms, 99), 2),
        "watch_max_ms": round(max(ms), 2),
    }


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def start_server(args: list[str], workdir: Path, name: str) -> tuple[subprocess.Popen[bytes], str]:
    port_file = workdir / f"{name}.port"
    log = open(workdir / f"{name}.log", "ab")
    proc = subprocess.Popen([sys.executable, *args, str(port_file)] if name == "floor" else
                            [sys.executable, *args, "--port-file", str(port_file)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start; see {workdir / (name + '.log')}")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port_file.read_text().strip()}"


def stop_servers(procs: Iterable[subprocess.Popen[bytes]], etcd: EtcdServer) -> None:
    """The servers start_server started (each given 10 s to end), then etcd."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
        p.wait(10)
    etcd.stop()


async def _pods_memory(address: str, pid: int, rss_empty: float, count: int) -> dict[str, object]:
    """What the created pods cost the apiserver's memory (its watch cache keeps each one):
    RSS added per 10,000 pods, against their protobuf encoding (measured before the list
    that sizes them: a LIST keeps each object's encoding)."""
    added = _rss_mib(pid) - rss_empty
    async with Client(address, timeout=60) as client:
        encoded = sum(p.ByteSize() for p in (await client.pods.list()).items) / 2**20
    return {"apiserver_rss_empty_mib": rss_empty, "apiserver_rss_mib_per_10k_pods": round(added * 10_000 / count, 1),
            "pods_encoded_mib_per_10k": round(encoded * 10_000 / count, 2),
            "pods_rss_added_over_encoded": round(added / encoded, 1) if encoded else None}


async def run(args: argparse.Namespace) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix="kubeling-bench-"))
    etcd = EtcdServer(data_dir=workdir / "etcd").start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        etcd_rate = await bench_etcd(etcd.endpoint, args.creates)
        floor, floor_address = start_server(["-m", "bench.grpc_floor", etcd.endpoint], workdir, "floor")
        procs.append(floor)
        floor_rate, _ = await bench_creates(floor_address, args.creates)
        floor.terminate()
        proc, address = start_server(["-m", "apiserver", "--etcd", etcd.endpoint, "--listen", "127.0.0.1:0",
                                      "--log-level", "WARNING"], workdir, "apiserver")
        procs.append(proc)
        cpu_before, rss_empty = _cpu_seconds(proc.pid), _rss_mib(proc.pid)
        create_rate, create_p50 = await bench_creates(address, args.creates)
        cpu_per_create = (_cpu_seconds(proc.pid) - cpu_before) / args.creates
        memory = await _pods_memory(address, proc.pid, rss_empty, args.creates)
        watch = await bench_watch(address, args.watchers, args.unfiltered, args.rate, args.seconds)
        ha: dict[str, object] = {}
        if args.ha:
            ha = await _ha_run(etcd.endpoint, workdir, args, procs)
        secure: dict[str, object] = {}
        if args.secure:
            proc.terminate()
            proc.wait(10)
            secure = await _secure_run(etcd.endpoint, workdir, args, procs, cpu_per_create, watch)
        costs: dict[str, object] = {}
        if args.costs:
            costs = await _costs_run(etcd.endpoint, workdir, args.creates, procs)
        apf: dict[str, object] = {}
        if args.apf:  # its own run (its own etcd and apiservers), its JSON kept whole
            out = workdir / "flowcontrol.json"
            subprocess.run([sys.executable, "-m", "bench.flowcontrol", "--pods", str(args.apf_pods), "--seconds",
                            str(args.apf_seconds), "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
            apf = {"priority_and_fairness": json.loads(out.read_text())}
    finally:
        stop_servers(procs, etcd)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir} (etcd data, component logs)", file=sys.stderr)
    return {
        "benchmark": "apiserver",
        "cpus": os.cpu_count(),
        "concurrency": CONCURRENCY,
        "creates": args.creates,
        "etcd_txn_per_s": round(etcd_rate, 1),
        "apiserver_create_per_s": round(create_rate, 1),
        "create_ratio": round(create_rate / etcd_rate, 3),
        "apiserver_create_p50_ms": round(create_p50, 2),
        "apiserver_cpu_us_per_create": round(cpu_per_create * 1e6),
        "grpc_floor_create_per_s": round(floor_rate, 1),
        "floor_ratio": round(floor_rate / etcd_rate, 3),
        "apiserver_vs_floor": round(create_rate / floor_rate, 3),
        **memory,
        **watch,
        **secure,
        **ha,
        **costs,
        **apf,
    }


async def _costs_run(etcd: str, workdir: Path, creates: int, procs: list[subprocess.Popen[bytes]]) -> dict[str, object]:
    """What audit (every request at Metadata, to a file) and encryption (Secrets under
    aescbc) cost a Secret write: the same creates through an apiserver with neither, with
    audit, with encryption, on fresh key prefixes of one etcd, in one run."""
    (workdir / "audit-policy.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}))
    (workdir / "encryption.yaml").write_text(yaml.safe_dump(new_aescbc_config()))
    variants = {"plain": [], "audit_metadata": ["--audit-policy-file", str(workdir / "audit-policy.yaml"),
                                                "--audit-log-path", str(workdir / "audit.log")],
                "encryption_aescbc": ["--encryption-provider-config", str(workdir / "encryption.yaml")]}
    out: dict[str, object] = {}
    for name, extra in variants.items():
        proc, address = start_server(["-m", "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0", "--log-level",
                                      "WARNING", "--etcd-prefix", f"/costs-{name}", *extra], workdir, f"costs-{name}")
        procs.append(proc)
        cpu_before = _cpu_seconds(proc.pid)
        rate, p50 = await bench_creates(address, creates, secrets=True)
        out[name] = {"secret_create_per_s": round(rate, 1), "secret_create_p50_ms": round(p50, 2),
                     "apiserver_cpu_us_per_create": round((_cpu_seconds(proc.pid) - cpu_before) / creates * 1e6)}
        proc.terminate()
        proc.wait(10)
    plain = out["plain"]
    for name in ("audit_metadata", "encryption_aescbc"):
        mine = out[name]
        assert isinstance(plain, dict) and isinstance(mine, dict)
        mine["cpu_per_create_over_plain"] = round(mine["apiserver_cpu_us_per_create"]
                                                  / plain["apiserver_cpu_us_per_create"], 3)
        mine["rate_over_plain"] = round(mine["secret_create_per_s"] / plain["secret_create_per_s"], 3)
    out["audit_log_bytes_per_create"] = round((workdir / "audit.log").stat().st_size / creates)
    return {"costs": out}


def _haproxy_config(listen: int, backends: list[tuple[int, int]]) -> str:
    servers = "\n".join(f"    server a{i} 127.0.0.1:{grpc_port} check port {rest_port} inter 1s fall 2 rise 1"
                         for i, (grpc_port, rest_port) in enumerate(backends, 1))
    return ("global\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1h\n"
            f"    timeout server 1h\n\nfrontend api\n    bind 127.0.0.1:{listen}\n    default_backend api\n\n"
            "backend api\n    balance roundrobin\n    option httpchk GET /readyz\n    http-check expect status 200\n"
            + servers + "\n")


async def _ha_run(etcd: str, workdir: Path, args: argparse.Namespace,
                  procs: list[subprocess.Popen[bytes]]) -> dict[str, object]:
    """Creates through HAProxy to 1, then 2 apiservers (fresh key prefixes of one etcd)."""
    if shutil.which("haproxy") is None:
        raise SystemExit("--ha needs HAProxy: apt-get install haproxy (make deps does)")
    out: dict[str, object] = {}
    for count in (1, 2):
        backends: list[tuple[int, int]] = []
        started: list[subprocess.Popen[bytes]] = []
        for i in range(count):
            proc, _ = start_server(["-m", "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0", "--rest-listen",
                                    "127.0.0.1:0", "--log-level", "WARNING", "--etcd-prefix", f"/ha{count}"],
                                   workdir, f"apiserver-ha{count}-{i}")
            ports = (workdir / f"apiserver-ha{count}-{i}.port").read_text().split()
            backends.append((int(ports[0]), int(ports[1])))
            started.append(proc)
        listen = free_port()
        (workdir / f"haproxy-{count}.cfg").write_text(_haproxy_config(listen, backends))
        with open(workdir / f"haproxy-{count}.log", "ab") as log:
            haproxy = subprocess.Popen(["haproxy", "-f", str(workdir / f"haproxy-{count}.cfg"), "-db"],
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append(haproxy)
        procs.extend(started)
        address = f"127.0.0.1:{listen}"
        async with Client(address, timeout=5) as probe:  # HAProxy up and the servers checked healthy
            deadline = time.monotonic() + 30
            while True:
                try:
                    await probe.pods.list(limit=1)
                    break
                except Exception:  # noqa: BLE001 (not yet: connection refused, no server up)
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"HAProxy on {address} did not answer") from None
                    await asyncio.sleep(0.2)
        await asyncio.sleep(2.5)  # every server through its first health checks (rise 1, inter 1s)
        rate, p50 = await bench_creates(address, args.creates)
        out[f"ha_{count}_apiservers_create_per_s"] = round(rate, 1)
        out[f"ha_{count}_apiservers_create_p50_ms"] = round(p50, 2)
        for proc in started:
            proc.terminate()
            proc.wait(10)
    out["ha_create_ratio_2_over_1"] = round(float(out["ha_2_apiservers_create_per_s"])  # type: ignore[arg-type]
                                            / float(out["ha_1_apiservers_create_per_s"]), 3)  # type: ignore[arg-type]
    return out


async def _secure_run(etcd: str, workdir: Path, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]],
                      plain_cpu: float, plain_watch: dict[str, float]) -> dict[str, object]:
    """The same measures on an apiserver with TLS, client-certificate and token
    authentication and Node,RBAC as `kubeling up` runs it (the clients present the admin's
    certificate; admission, NodeRestriction and ServiceAccount, runs in both), on a fresh key
    prefix of the same etcd: the ratios to the plain run say what security costs."""
    root = workdir / "pki"
    pki.ensure(root, {})
    (root / "tokens.csv").write_text("bench-token,bench,uid-bench\n")
    proc, address = start_server(
        ["-m", "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0", "--log-level", "WARNING",
         "--etcd-prefix", "/secure", "--tls-cert-file", str(root / "apiserver.crt"),
         "--tls-private-key-file", str(root / "apiserver.key"), "--client-ca-file", str(root / "ca.crt"),
         "--token-auth-file", str(root / "tokens.csv"), "--authorization-mode", "Node,RBAC",
         "--service-account-signing-key-file", str(root / "sa.key")], workdir, "apiserver-secure")
    procs.append(proc)
    tls = TLSConfig.from_files(root / "ca.crt", root / "admin.crt", root / "admin.key")
    cpu_before = _cpu_seconds(proc.pid)
    rate, p50 = await bench_creates(address, args.creates, tls)
    cpu = (_cpu_seconds(proc.pid) - cpu_before) / args.creates
    watch = await bench_watch(address, args.watchers, args.unfiltered, args.rate, args.seconds, tls)
    return {"secure": {"apiserver_create_per_s": round(rate, 1), "apiserver_create_p50_ms": round(p50, 2),
                       "apiserver_cpu_us_per_create": round(cpu * 1e6), **watch},
            "secure_cpu_per_create_over_plain": round(cpu / plain_cpu, 3),
            "secure_watch_p99_over_plain": round(watch["watch_p99_ms"] / plain_watch["watch_p99_ms"], 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="", help="write the result here too")
    p.add_argument("--creates", type=int, default=10_000)
    p.add_argument("--watchers", type=int, default=500, help="watchers filtered to one node each")
    p.add_argument("--unfiltered", type=int, default=3, help="watchers of every pod")
    p.add_argument("--rate", type=float, default=200.0, help="pod creates per second during the watch phase")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--keep", action="store_true", help="keep the work dir (etcd data, logs)")
    p.add_argument("--ha", action="store_true",
                   help="then creates through HAProxy to 1 and to 2 apiservers (ha_create_ratio_2_over_1)")
    p.add_argument("--costs", action="store_true",
                   help="then Secret creates with audit at Metadata and with aescbc encryption, against neither")
    p.add_argument("--apf", action="store_true",
                   help="then bench.flowcontrol: Lease renewals under a LIST flood, with and without Priority and "
                        "Fairness")
    p.add_argument("--apf-pods", type=int, default=5000, help="pods the flood lists (default %(default)s)")
    p.add_argument("--apf-seconds", type=float, default=15.0, help="each APF phase's length")
    p.add_argument("--secure", action="store_true",
                   help="then the same on an apiserver with TLS, certificate and token authentication and RBAC, "
                        "and the ratios (benchmarks only: plain text is no default to measure against)")
    args = p.parse_args(argv)
    if args.watchers < 1 or args.creates < 1 or args.rate <= 0 or args.seconds <= 0:
        p.error("--watchers and --creates must be at least 1, --rate and --seconds above 0")
    result = asyncio.run(run(args))
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

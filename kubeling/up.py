"""`kubeling up` / `down` / `status`: a whole cluster on this machine as processes.

etcd, the apiserver, the scheduler and N kubelets (node-1..N, each with its own CRI
socket, pod CIDR and bridge), all on loopback with free ports, supervised: a
component that dies is started again with back-off (same command line, same ports).
Everything lives under the state dir (default ~/.kubeling): `cluster.json` (what
runs where), `kubeconfig`, `logs/<component>.log`, etcd's data, the kubelets' state.
`down` stops the kubelets, removes what the pods made on the machine (containers,
network namespaces, mounts, bridges) unless --keep-state, then stops the control
plane; etcd's data stays, so `up` again brings the same objects back and the
kubelets recreate their pods.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from kubelet.agent import bridge_name, runtime_config
from kubelet.config import KubeletConfig
from kubelet.cri.server import CRIServer
from kubelet.runtime import CRICallError, Runtime
from kubeling import errors
from kubeling.client import Client
from kubeling.etcd import etcd_binary
from kubeling.kubeconfig import write_kubeconfig
from kubeling.netutil import free_port

__all__ = ["ClusterPlan", "Supervisor", "add_parsers"]

log = logging.getLogger("kubeling.up")

DEFAULT_STATE_DIR = Path.home() / ".kubeling"
CLUSTER_CIDR = "10.88.0.0/16"
_BACKOFF_MAX = 30.0


@dataclass
class ClusterPlan:
    """Ports and names, chosen once per `up` and written to cluster.json."""

    state_dir: str
    nodes: list[str]
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    scheduler_metrics_port: int
    rest_port: int = 0  # the Kubernetes REST API (kubectl)
    cluster_cidr: str = CLUSTER_CIDR
    otlp_endpoint: str = ""  # every component exports its spans here ("" : nowhere)
    registry_config_dir: str = ""  # the kubelets' registry mirrors (hosts.toml directory); "" : none
    supervisor_pid: int = 0
    ready: bool = False
    error: str = ""
    components: dict[str, int] = field(default_factory=dict)  # name -> pid, kept current by the supervisor

    @property
    def apiserver(self) -> str:
        return f"127.0.0.1:{self.apiserver_port}"

    @property
    def rest(self) -> str:
        return f"127.0.0.1:{self.rest_port}"

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    def kubelet_config(self, node: str) -> KubeletConfig:
        return KubeletConfig(node_name=node, apiserver=self.apiserver, root_dir=self.root / "kubelet",
                             pod_logs_dir=self.root / "pod-logs", runc_root=self.root / "runc" / node,
                             cluster_cidr=self.cluster_cidr)

    def save(self) -> None:
        path = self.root / "cluster.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterPlan | None:
        try:
            return cls(**json.loads((state_dir / "cluster.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None


def _python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def commands(plan: ClusterPlan) -> dict[str, list[str]]:
    """Each component's command line, in start order."""
    root = plan.root
    client, peer = f"http://127.0.0.1:{plan.etcd_port}", f"http://127.0.0.1:{plan.etcd_peer_port}"
    out = {
        "etcd": [etcd_binary(), "--name", "kubeling", "--data-dir", str(root / "etcd"),
                 "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                 "--initial-advertise-peer-urls", peer, "--initial-cluster", f"kubeling={peer}",
                 "--log-level", "warn"],
        "apiserver": _python("apiserver", "--etcd", f"127.0.0.1:{plan.etcd_port}", "--listen", plan.apiserver,
                             "--rest-listen", plan.rest, "--cluster-cidr", plan.cluster_cidr),
        "scheduler": _python("scheduler", "--apiserver", plan.apiserver,
                             "--metrics-listen", f"127.0.0.1:{plan.scheduler_metrics_port}"),
    }
    for node in plan.nodes:
        config = plan.kubelet_config(node)
        out[f"kubelet-{node}"] = _python("kubelet", "--node-name", node, "--apiserver", plan.apiserver,
                                         "--root-dir", str(config.root_dir), "--pod-logs-dir",
                                         str(config.pod_logs_dir), "--runc-root", str(config.runc_root),
                                         "--cluster-cidr", plan.cluster_cidr,
                                         *(["--registry-config-dir", plan.registry_config_dir]
                                           if plan.registry_config_dir else []))
    return out


@dataclass
class _Component:
    name: str
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    delay: float = 1.0


@dataclass
class Supervisor:
    plan: ClusterPlan
    components: dict[str, _Component] = field(default_factory=dict)
    stopping: bool = False

    def _spawn(self, component: _Component) -> None:
        logs = self.plan.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        if self.plan.otlp_endpoint:
            env.update(OTEL_EXPORTER_OTLP_ENDPOINT=self.plan.otlp_endpoint, OTEL_EXPORTER_OTLP_INSECURE="true")
        with open(logs / f"{component.name}.log", "ab") as out:
            component.proc = subprocess.Popen(component.argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                              stdin=subprocess.DEVNULL, start_new_session=True)
        component.started_at = time.monotonic()
        self.plan.components[component.name] = component.proc.pid
        self.plan.save()

    async def _wait(self, what: str, check: Any, component: _Component, timeout: float = 120.0) -> None:
        print(f"  waiting for {what} ...", flush=True)
        deadline = time.monotonic() + timeout
        while not await check():
            assert component.proc is not None
            if component.proc.poll() is not None:
                raise RuntimeError(f"{component.name} exited with {component.proc.returncode}; see "
                                   f"{self.plan.root / 'logs' / (component.name + '.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{component.name}: {what} not reached in {timeout:.0f}s")
            await asyncio.sleep(0.2)

    async def start(self) -> None:
        plan = self.plan
        for name, argv in commands(plan).items():
            component = self.components[name] = _Component(name, argv)
            print(f"starting {name}", flush=True)
            self._spawn(component)
            if name == "etcd":
                await self._wait(f"etcd on 127.0.0.1:{plan.etcd_port}", self._etcd_healthy, component)
            elif name == "apiserver":
                await self._wait(f"the apiserver on {plan.apiserver}", self._apiserver_ready, component)
            elif name == "scheduler":
                await self._wait("the scheduler's /healthz", self._scheduler_healthy, component)
        for node in plan.nodes:
            await self._wait(f"node {node} to be Ready", lambda node=node: self._node_ready(node),
                             self.components[f"kubelet-{node}"])

    async def _http_ok(self, url: str) -> bool:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session, \
                    session.get(url) as reply:
                return reply.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def _etcd_healthy(self) -> bool:
        return await self._http_ok(f"http://127.0.0.1:{self.plan.etcd_port}/health")

    async def _scheduler_healthy(self) -> bool:
        return await self._http_ok(f"http://127.0.0.1:{self.plan.scheduler_metrics_port}/healthz")

    async def _apiserver_ready(self) -> bool:
        async with Client(self.plan.apiserver, timeout=2, wait_for_ready=False) as client:
            try:
                await client.namespaces.get("default")
                return True
            except errors.ApiError:
                return False

    async def _node_ready(self, node: str) -> bool:
        async with Client(self.plan.apiserver, timeout=2, wait_for_ready=False) as client:
            try:
                found = await client.nodes.get(node)
            except errors.ApiError:
                return False
        return any(c.type == "Ready" and c.status == "True" for c in found.status.conditions)

    async def supervise(self) -> None:
        """Restart what died, with back-off (1 s doubling to 30 s; reset after a minute up)."""
        while not self.stopping:
            for component in self.components.values():
                proc = component.proc
                if proc is None or proc.poll() is None or self.stopping:
                    continue
                now = time.monotonic()
                if component.next_start == 0.0:
                    if now - component.started_at > 60:
                        component.delay = 1.0
                    component.next_start = now + component.delay
                    log.warning("%s exited with %s; restarting in %.0fs (see logs/%s.log)", component.name,
                                proc.returncode, component.delay, component.name)
                    component.delay = min(component.delay * 2, _BACKOFF_MAX)
                elif now >= component.next_start:
                    component.restarts += 1
                    component.next_start = 0.0
                    self._spawn(component)
                    log.warning("%s restarted (restart %d)", component.name, component.restarts)
            await asyncio.sleep(0.2)

    def _terminate(self, names: list[str], timeout: float = 30.0) -> None:
        procs = [(n, self.components[n].proc) for n in names if n in self.components]
        for _, proc in procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", name, timeout)
                proc.kill()
                proc.wait()

    async def stop(self, keep_state: bool) -> None:
        """Kubelets first (their pods keep running), then the pods' leftovers unless
        keep_state, then scheduler, apiserver and etcd."""
        self.stopping = True
        self._terminate([f"kubelet-{n}" for n in self.plan.nodes])
        if not keep_state:
            for node in self.plan.nodes:
                await clean_node(self.plan, node)
        self._terminate(["scheduler", "apiserver"])
        self._terminate(["etcd"])


async def clean_node(plan: ClusterPlan, node: str) -> None:
    """Remove every sandbox (containers, netns, mounts) a stopped kubelet left, through
    its own CRI runtime started once more, then its bridge."""
    config = plan.kubelet_config(node)
    cri_config = runtime_config(config)
    if cri_config.state_dir.exists():
        cri_config.build_builtin_images = False
        server = CRIServer(cri_config)
        await server.start()
        runtime = Runtime(server.address, timeout=60)
        try:
            for sandbox in await runtime.list_sandboxes():
                try:
                    await runtime.stop_sandbox(sandbox.id)
                    await runtime.remove_sandbox(sandbox.id)
                except CRICallError as exc:
                    log.warning("node %s: sandbox %s not removed: %s", node, sandbox.id[:13], exc)
        finally:
            await runtime.close()
            await server.stop()
    subprocess.run(["ip", "link", "del", bridge_name(node)], capture_output=True)
    shutil.rmtree(config.runc_root or plan.root / "runc" / node, ignore_errors=True)  # type: ignore[arg-type]


# ---------------------------------------------------------------- commands


def _new_plan(state_dir: Path, nodes: int, prefix: str, cluster_cidr: str, otlp_endpoint: str = "",
              registry_config_dir: str = "") -> ClusterPlan:
    return ClusterPlan(state_dir=str(state_dir), nodes=[f"{prefix}{i}" for i in range(1, nodes + 1)],
                       etcd_port=free_port(), etcd_peer_port=free_port(), apiserver_port=free_port(),
                       rest_port=free_port(), scheduler_metrics_port=free_port(), cluster_cidr=cluster_cidr,
                       otlp_endpoint=otlp_endpoint, registry_config_dir=registry_config_dir)


def _alive(pid: int) -> bool:
    """pid runs (a zombie does not: an orphan's exit waits for whoever adopted it to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def _preflight() -> str:
    if os.geteuid() != 0:
        return "kubeling up needs root (network namespaces, mounts, runc)"
    for binary in ("runc", "ip", "iptables"):
        if shutil.which(binary) is None:
            return f"{binary} is not installed (run `make up`, or apt-get install runc iproute2 iptables)"
    if not Path("/usr/lib/cni/bridge").exists():
        return "the CNI plugins are missing: apt-get install containernetworking-plugins"
    for path, package in (("/bin/busybox", "busybox-static"), ("/usr/bin/catatonit", "catatonit")):
        if not Path(path).exists():
            return f"{path} is missing (the built-in images are made of it): apt-get install {package}"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containers' root filesystems): modprobe overlay"
    if not Path("/proc/self/ns/net").exists():
        return "the kernel has no network namespaces"
    try:
        etcd_binary()
    except RuntimeError as exc:
        return str(exc)
    return ""


async def _supervise(plan: ClusterPlan, keep_state_on_exit: bool) -> int:
    plan.supervisor_pid = os.getpid()
    plan.save()
    supervisor = Supervisor(plan)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    keep = [keep_state_on_exit]

    def stop_keeping_state() -> None:  # `kubeling down --keep-state`
        keep[0] = True
        stop.set()

    loop.add_signal_handler(signal.SIGUSR1, stop_keeping_state)
    try:
        await supervisor.start()
    except Exception as exc:  # noqa: BLE001 (reported to the user, then everything is stopped)
        plan.error = str(exc)
        plan.save()
        print(f"kubeling up failed: {exc}", flush=True)
        await supervisor.stop(keep_state=False)
        return 1
    plan.ready = True
    plan.save()
    write_kubeconfig(plan.root / "kubeconfig", plan.rest, plan.apiserver)
    _print_summary(plan)
    watcher = asyncio.create_task(supervisor.supervise())
    await stop.wait()
    print("stopping the cluster ...", flush=True)
    supervisor.stopping = True
    await watcher
    await supervisor.stop(keep_state=keep[0])
    plan.ready, plan.supervisor_pid = False, 0
    plan.save()
    print("cluster stopped", flush=True)
    return 0


def _print_summary(plan: ClusterPlan) -> None:
    root = plan.root
    print(f"""
kubeling is up: {len(plan.nodes)} node(s) Ready
  API (REST)   http://{plan.rest}   (kubectl)
  API (gRPC)   {plan.apiserver}
  kubeconfig   {root / 'kubeconfig'}
  logs         {root / 'logs'}/<component>.log
  metrics      scheduler http://127.0.0.1:{plan.scheduler_metrics_port}/metrics
  traces       {plan.otlp_endpoint + ' (OTLP)' if plan.otlp_endpoint else 'off (up --otlp-endpoint URL)'}

create a first pod:
  export KUBECONFIG={root / 'kubeconfig'}
  kubectl run hello --image=busybox -- sleep 3600
  kubectl get pods -o wide
  kubeling status --state-dir {root}
""", flush=True)


def cmd_up(args: Any) -> int:
    problem = _preflight()
    if problem:
        print(f"kubeling: {problem}", file=sys.stderr)
        return 1
    state_dir = Path(args.state_dir).resolve()
    existing = ClusterPlan.load(state_dir)
    if existing is not None and existing.supervisor_pid and _alive(existing.supervisor_pid):
        print(f"kubeling: a cluster is already running from {state_dir} (pid {existing.supervisor_pid}); "
              "`kubeling down` first", file=sys.stderr)
        return 1
    state_dir.mkdir(parents=True, exist_ok=True)
    registry_config_dir = str(Path(args.registry_config_dir).resolve()) if args.registry_config_dir else ""
    if registry_config_dir and not Path(registry_config_dir).is_dir():
        print(f"kubeling: --registry-config-dir {registry_config_dir} is not a directory", file=sys.stderr)
        return 1
    plan = _new_plan(state_dir, args.nodes, args.node_prefix, args.cluster_cidr, args.otlp_endpoint,
                     registry_config_dir)
    plan.save()
    if not args.detach:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        return asyncio.run(_supervise(plan, args.keep_state))
    argv = [sys.executable, "-m", "kubeling", "up", "--state-dir", str(state_dir), "--nodes", str(args.nodes),
            "--node-prefix", args.node_prefix, "--cluster-cidr", args.cluster_cidr,
            "--otlp-endpoint", args.otlp_endpoint, "--registry-config-dir", registry_config_dir] + \
        (["--keep-state"] if args.keep_state else [])
    (state_dir / "logs").mkdir(exist_ok=True)
    with open(state_dir / "logs" / "supervisor.log", "ab") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        current = ClusterPlan.load(state_dir)
        if current is not None and current.ready and current.supervisor_pid == child.pid:
            _print_summary(current)
            print(f"running in the background (pid {child.pid}); `kubeling down --state-dir {state_dir}` stops it")
            return 0
        if child.poll() is not None:
            print((state_dir / "logs" / "supervisor.log").read_text()[-3000:], file=sys.stderr)
            return 1
        time.sleep(0.3)
    print("kubeling: the cluster did not come up in 300 s; see the logs", file=sys.stderr)
    return 1


def cmd_down(args: Any) -> int:
    state_dir = Path(args.state_dir).resolve()
    plan = ClusterPlan.load(state_dir)
    if plan is None:
        print(f"kubeling: no cluster is running from {state_dir}", file=sys.stderr)
        return 1
    if not plan.supervisor_pid or not _alive(plan.supervisor_pid):
        orphans = _orphans(plan)
        if not orphans:
            print(f"kubeling: no cluster is running from {state_dir}", file=sys.stderr)
            return 1
        # The supervisor died (killed, OOM) and left its components running: stop them
        # here, in the supervisor's order, and clean up as it would have.
        print(f"the supervisor is gone; stopping {', '.join(orphans)} ...", flush=True)
        asyncio.run(_stop_orphans(plan, orphans, args.keep_state))
        plan.ready, plan.supervisor_pid = False, 0
        plan.save()
        print("cluster stopped")
        return 0
    os.kill(plan.supervisor_pid, signal.SIGUSR1 if args.keep_state else signal.SIGTERM)
    deadline = time.monotonic() + 300
    while _alive(plan.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(plan.supervisor_pid):
        print("kubeling: the cluster did not stop in 300 s", file=sys.stderr)
        return 1
    print("cluster stopped")
    return 0


def _orphans(plan: ClusterPlan) -> dict[str, int]:
    """The plan's components still running: a pid counts only when its command line is the
    one the supervisor started (a recycled pid belongs to somebody else)."""
    argv = commands(plan)
    out = {}
    for name, pid in plan.components.items():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if name in argv and [a.decode() for a in cmdline] == argv[name]:
            out[name] = pid
    return out


def _terminate_pids(pids: dict[str, int], timeout: float = 30.0) -> None:
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for name, pid in pids.items():
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            log.warning("%s did not stop in %.0fs; killing it", name, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def _stop_orphans(plan: ClusterPlan, orphans: dict[str, int], keep_state: bool) -> None:
    """Supervisor.stop for processes that are not our children."""
    def group(*names: str) -> dict[str, int]:
        return {n: orphans[n] for n in names if n in orphans}

    _terminate_pids(group(*(f"kubelet-{n}" for n in plan.nodes)))
    if not keep_state:
        for node in plan.nodes:
            await clean_node(plan, node)
    _terminate_pids(group("scheduler", "apiserver"))
    _terminate_pids(group("etcd"))


async def _status(plan: ClusterPlan) -> None:
    async with Client(plan.apiserver, timeout=5, wait_for_ready=False) as client:
        nodes, _ = await client.nodes.list_all()
        pods, _ = await client.pods.list_all()
    print("NODE            READY  POD CIDR")
    for node in nodes:
        ready = next((c.status for c in node.status.conditions if c.type == "Ready"), "Unknown")
        print(f"{node.metadata.name:<15} {ready:<6} {node.spec.podCIDR}")
    print("\nNAMESPACE/POD                        PHASE      NODE        IP")
    for pod in pods:
        print(f"{pod.metadata.namespace + '/' + pod.metadata.name:<36} {pod.status.phase or 'Pending':<10} "
              f"{pod.spec.nodeName:<11} {pod.status.podIP}")


def cmd_status(args: Any) -> int:
    state_dir = Path(args.state_dir).resolve()
    plan = ClusterPlan.load(state_dir)
    if plan is None or not plan.supervisor_pid or not _alive(plan.supervisor_pid):
        print(f"no cluster is running from {state_dir}")
        return 1
    print(f"cluster from {state_dir}: supervisor pid {plan.supervisor_pid}, API {plan.apiserver} (gRPC), "
          f"http://{plan.rest} (REST)")
    print("COMPONENT            PID      STATE")
    for name, pid in plan.components.items():
        print(f"{name:<20} {pid:<8} {'running' if _alive(pid) else 'restarting'}")
    print()
    try:
        asyncio.run(_status(plan))
    except errors.ApiError as exc:
        print(f"the apiserver does not answer: {exc}")
        return 1
    return 0


def add_parsers(commands: Any) -> None:
    up = commands.add_parser("up", help="run a cluster on this machine")
    up.add_argument("--nodes", type=int, default=1, help="kubelets to run (0: control plane only)")
    up.add_argument("--detach", action="store_true", help="run in the background; `kubeling down` stops it")
    up.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    up.add_argument("--keep-state", action="store_true",
                    help="on stop, leave the pods' containers and networks in place")
    up.add_argument("--cluster-cidr", default=CLUSTER_CIDR, help="pods' addresses; each node gets a /24 of it")
    up.add_argument("--otlp-endpoint", default="", help="send every component's traces here (OTLP gRPC, "
                                                         "e.g. http://127.0.0.1:4317); default: nowhere")
    up.add_argument("--registry-config-dir", default="",
                    help="registry mirrors for the kubelets' runtimes, containerd's hosts.toml layout: "
                         "DIR/<registry>/hosts.toml (e.g. /etc/containerd/certs.d)")
    up.add_argument("--node-prefix", default="node-", help=argparse.SUPPRESS)  # tests: names of their own
    up.set_defaults(run=cmd_up)
    down = commands.add_parser("down", help="stop the cluster started with --detach")
    down.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    down.add_argument("--keep-state", action="store_true")
    down.set_defaults(run=cmd_down)
    status = commands.add_parser("status", help="components, nodes and pods")
    status.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    status.set_defaults(run=cmd_status)

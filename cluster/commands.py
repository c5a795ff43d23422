"""The subcommands `up`, `down` and `status`.

`down` stops the kubelets, removes what the pods made on the machine (containers,
network namespaces, mounts, bridges) unless --keep-state, then stops the control
plane; etcd's data stays, so `up` again brings the same objects back and the
kubelets recreate their pods.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cluster.cleanup import stop_orphans
from cluster.plan import CLUSTER_CIDR, DEFAULT_STATE_DIR, DNS_IP, SERVICE_CIDR, ClusterPlan, new_plan
from cluster.preflight import preflight
from cluster.processes import alive, orphans
from cluster.supervisor import Supervisor
from kubeling import errors
from kubeling.app import EXIT_CONFIG

__all__ = ["add_parsers", "cmd_down", "cmd_status", "cmd_up"]


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


def _ingress_line(plan: ClusterPlan) -> str:
    if not plan.ingress:
        return "off"
    at = plan.ingress_address
    return f"http://{at}:{plan.ingress_http_port}, https://{at}:{plan.ingress_https_port} (HAProxy, class kubeling)"


def _print_summary(plan: ClusterPlan) -> None:
    root = plan.root
    print(f"""
kubeling is up: {len(plan.nodes)} node(s) Ready
  API (REST)   https://{plan.rest}   (kubectl)
  API (gRPC)   {plan.apiserver}   (TLS)
  kubeconfig   {root / 'kubeconfig'}   (kubernetes-admin; certificates in {root / 'pki'})
  logs         {root / 'logs'}/<component>.log
  metrics      scheduler http://127.0.0.1:{plan.scheduler_metrics_port}/metrics, controller manager http://127.0.0.1:{plan.controller_manager_metrics_port}/metrics
  traces       {plan.otlp_endpoint + ' (OTLP)' if plan.otlp_endpoint else 'off (up --otlp-endpoint URL)'}
  services     ClusterIPs {SERVICE_CIDR}, cluster DNS {DNS_IP} (on {plan.api_host}:{plan.dns_port})
  kube-proxy   {', '.join(plan.proxies) + ' (iptables)' if plan.proxies else 'none (no nodes)'}
  policies     {', '.join(plan.policy_controllers) + ' (iptables, ipset)' if plan.policy_controllers else 'off'}
  ingress      {_ingress_line(plan)}

create a first pod:
  export KUBECONFIG={root / 'kubeconfig'}
  kubectl run hello --image=busybox -- sleep 3600
  kubectl get pods -o wide
  kubeling status --state-dir {root}
""", flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    registry_config_dir = str(Path(args.registry_config_dir).resolve()) if args.registry_config_dir else ""
    if registry_config_dir and not Path(registry_config_dir).is_dir():
        print(f"kubeling: --registry-config-dir {registry_config_dir} is not a directory", file=sys.stderr)
        return EXIT_CONFIG
    problem = preflight()
    if problem:
        print(f"kubeling: {problem}", file=sys.stderr)
        return 1
    state_dir = Path(args.state_dir).resolve()
    existing = ClusterPlan.load(state_dir)
    if existing is not None and existing.supervisor_pid and alive(existing.supervisor_pid):
        print(f"kubeling: a cluster is already running from {state_dir} (pid {existing.supervisor_pid}); "
              "`kubeling down` first", file=sys.stderr)
        return 1
    state_dir.mkdir(parents=True, exist_ok=True)
    if args.apiservers > 1 and shutil.which("haproxy") is None:
        print("kubeling: --apiservers needs HAProxy in front of them: apt-get install haproxy", file=sys.stderr)
        return 1
    plan = new_plan(state_dir, args.nodes, args.node_prefix, args.cluster_cidr, args.otlp_endpoint,
                    registry_config_dir, args.etcd_members, existing, args.apiservers, args.hosts,
                    ingress=not args.no_ingress)
    plan.node_monitor_grace_period = args.node_monitor_grace_period
    plan.network_policy = not args.no_network_policy
    plan.default_unreachable_toleration_seconds = args.default_unreachable_toleration_seconds
    if args.apiservers > 1:
        plan.write_haproxy_config()
    issued = plan.prepare_credentials()
    if issued and not args.detach:
        print(f"certificates issued under {plan.pki}: {', '.join(issued)}", flush=True)
    plan.save()
    if not args.detach:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        return asyncio.run(_supervise(plan, args.keep_state))
    argv = [sys.executable, "-m", "cluster", "up", "--state-dir", str(state_dir), "--nodes", str(args.nodes),
            "--node-prefix", args.node_prefix, "--cluster-cidr", args.cluster_cidr,
            "--otlp-endpoint", args.otlp_endpoint, "--registry-config-dir", registry_config_dir,
            "--etcd-members", str(args.etcd_members), "--apiservers", str(args.apiservers)] + \
        (["--hosts"] if args.hosts else []) + (["--no-network-policy"] if args.no_network_policy else []) + \
        (["--no-ingress"] if args.no_ingress else []) + \
        ["--node-monitor-grace-period", str(args.node_monitor_grace_period),
         "--default-unreachable-toleration-seconds", str(args.default_unreachable_toleration_seconds)] + \
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


def cmd_down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).resolve()
    plan = ClusterPlan.load(state_dir)
    if plan is None:
        print(f"kubeling: no cluster is running from {state_dir}", file=sys.stderr)
        return 1
    if not plan.supervisor_pid or not alive(plan.supervisor_pid):
        running = orphans(plan)
        if not running:
            print(f"kubeling: no cluster is running from {state_dir}", file=sys.stderr)
            return 1
        # The supervisor died (killed, OOM) and left its components running: stop them
        # here, in the supervisor's order, and clean up as it would have.
        print(f"the supervisor is gone; stopping {', '.join(running)} ...", flush=True)
        asyncio.run(stop_orphans(plan, running, args.keep_state))
        plan.ready, plan.supervisor_pid = False, 0
        plan.save()
        print("cluster stopped")
        return 0
    os.kill(plan.supervisor_pid, signal.SIGUSR1 if args.keep_state else signal.SIGTERM)
    deadline = time.monotonic() + 300
    while alive(plan.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(plan.supervisor_pid):
        print("kubeling: the cluster did not stop in 300 s", file=sys.stderr)
        return 1
    print("cluster stopped")
    return 0


async def _status(plan: ClusterPlan) -> None:
    async with plan.admin_client(timeout=5, wait_for_ready=False) as client:
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


def cmd_status(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).resolve()
    plan = ClusterPlan.load(state_dir)
    if plan is None or not plan.supervisor_pid or not alive(plan.supervisor_pid):
        print(f"no cluster is running from {state_dir}")
        return 1
    print(f"cluster from {state_dir}: supervisor pid {plan.supervisor_pid}, API {plan.apiserver} (gRPC, TLS), "
          f"https://{plan.rest} (REST)")
    print("COMPONENT            PID      STATE")
    for name, pid in plan.components.items():
        print(f"{name:<20} {pid:<8} {'running' if alive(pid) else 'restarting'}")
    print()
    try:
        asyncio.run(_status(plan))
    except errors.ApiError as exc:
        print(f"the apiserver does not answer: {exc}")
        return 1
    return 0


def _pod_cidr(text: str) -> str:
    """--cluster-cidr: an IPv4 network (host bits zero) with room for each node's /24."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if network.version != 4 or network.prefixlen > 24:
        raise argparse.ArgumentTypeError(f"{text}: an IPv4 network of /24 or wider is needed (each node gets a /24)")
    return text


def _etcd_members(text: str) -> int:
    """--etcd-members: odd, as an even count adds no fault tolerance."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if count < 1 or count % 2 == 0:
        raise argparse.ArgumentTypeError(f"{count}: must be odd (1, 3, 5): an even count adds no fault tolerance")
    return count


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = commands.add_parser("up", help="run a cluster on this machine")
    up.add_argument("--nodes", type=int, default=1, help="kubelets to run (0: control plane only)")
    up.add_argument("--detach", action="store_true", help="run in the background; `kubeling down` stops it")
    up.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    up.add_argument("--keep-state", action="store_true",
                    help="on stop, leave the pods' containers and networks in place")
    up.add_argument("--cluster-cidr", type=_pod_cidr, default=CLUSTER_CIDR,
                    help="pods' addresses; each node gets a /24 of it")
    up.add_argument("--otlp-endpoint", default="", help="send every component's traces here (OTLP gRPC, "
                                                         "e.g. http://127.0.0.1:4317); default: nowhere")
    up.add_argument("--registry-config-dir", default="",
                    help="registry mirrors for the kubelets' runtimes, containerd's hosts.toml layout: "
                         "DIR/<registry>/hosts.toml (e.g. /etc/containerd/certs.d)")
    up.add_argument("--etcd-members", type=_etcd_members, default=1,
                    help="etcd cluster size (1, 3 or 5; real Raft): the apiserver is given every member and "
                         "moves to another when the one it uses dies (default 1)")
    up.add_argument("--apiservers", type=int, default=1,
                    help="apiservers to run, behind HAProxy (TCP, /readyz health checks) when more than one; the "
                         "kubeconfig points at HAProxy (default 1)")
    up.add_argument("--hosts", action="store_true",
                    help="each kubelet on a host of its own: a network namespace on an underlay bridge with its "
                         "own address (a private /24), pod CIDRs routed between hosts as flannel's host-gw")
    up.add_argument("--no-ingress", action="store_true",
                    help="run no ingress controller (HAProxy serving Ingresses on the first node's address)")
    up.add_argument("--no-network-policy", action="store_true",
                    help="enforce no NetworkPolicy (no network policy controller beside kube-proxy)")
    up.add_argument("--node-monitor-grace-period", type=float, default=40.0,
                    help="seconds without a kubelet heartbeat before its node is Unknown (default 40)")
    up.add_argument("--default-unreachable-toleration-seconds", type=int, default=300,
                    help="how long pods stay on an unreachable node before eviction (default 300)")
    up.add_argument("--node-prefix", default="node-", help=argparse.SUPPRESS)  # tests: names of their own
    up.set_defaults(run=cmd_up)
    down = commands.add_parser("down", help="stop the cluster started with --detach")
    down.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    down.add_argument("--keep-state", action="store_true")
    down.set_defaults(run=cmd_down)
    status = commands.add_parser("status", help="components, nodes and pods")
    status.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    status.set_defaults(run=cmd_status)

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
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cluster import clusterconfig, names, registry
from cluster.cleanup import stop_orphans
from cluster.plan import CLUSTER_CIDR, ClusterPlan, new_plan
from cluster.preflight import preflight
from cluster.processes import alive, orphans
from cluster.supervisor import Supervisor
from kubeling import errors, kubeconfig
from kubeling.app import EXIT_CONFIG
from kubeling.kubeconfig import user_kubeconfig

__all__ = ["add_parsers", "cmd_down", "cmd_get_clusters", "cmd_status", "cmd_up"]


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
    merge_context(plan)
    _print_summary(plan)
    watcher = asyncio.create_task(supervisor.supervise())
    await stop.wait()
    print("stopping the cluster ...", flush=True)
    supervisor.stopping = True
    await watcher
    await supervisor.stop(keep_state=keep[0])
    plan.ready, plan.supervisor_pid = False, 0
    plan.save()
    forget_context(plan)
    print("cluster stopped", flush=True)
    return 0


def merge_context(plan: ClusterPlan) -> None:
    """The context kubeling-<name> in the user's kubeconfig, as kind merges kind-<name>."""
    if not plan.user_kubeconfig:
        return
    try:
        kubeconfig.merge_context(Path(plan.user_kubeconfig), plan.context, plan.kubeconfig)
    except (OSError, ValueError) as err:  # the cluster is up; only the convenience is missing
        print(f"kubeling: context {plan.context} not merged into {plan.user_kubeconfig}: {err}", flush=True)


def forget_context(plan: ClusterPlan) -> None:
    if not plan.user_kubeconfig:
        return
    try:
        kubeconfig.remove_context(Path(plan.user_kubeconfig), plan.context)
    except (OSError, ValueError) as err:
        print(f"kubeling: context {plan.context} not removed from {plan.user_kubeconfig}: {err}", flush=True)


def _ingress_line(plan: ClusterPlan) -> str:
    if not plan.ingress:
        return "off"
    at = plan.ingress_address
    return f"http://{at}:{plan.ingress_http_port}, https://{at}:{plan.ingress_https_port} (HAProxy, class kubeling)"


def _registry_line(plan: ClusterPlan) -> str:
    if not plan.registry:
        return "off"
    return (f"localhost:{plan.registry_port} (push there; pods' images may say localhost:{plan.registry_port}/… or "
            f"{plan.registry_name}/…)")


def _print_summary(plan: ClusterPlan) -> None:
    root = plan.root
    print(f"""
kubeling is up: {len(plan.nodes)} node(s) Ready
  API (REST)   https://{plan.rest}   (kubectl)
  API (gRPC)   {plan.apiserver}   (TLS)
  cluster      {plan.name}{' (nodes on hosts of their own)' if plan.hosts else ''}
  kubeconfig   {root / 'kubeconfig'}   (kubernetes-admin; certificates in {root / 'pki'})
  context      {plan.context}{' in ' + plan.user_kubeconfig if plan.user_kubeconfig else ''}
  logs         {root / 'logs'}/<component>.log
  metrics      scheduler http://127.0.0.1:{plan.scheduler_metrics_port}/metrics, controller manager http://127.0.0.1:{plan.controller_manager_metrics_port}/metrics
  traces       {plan.otlp_endpoint + ' (OTLP)' if plan.otlp_endpoint else 'off (up --otlp-endpoint URL)'}
  services     ClusterIPs {plan.service_cidr}, cluster DNS {plan.dns_ip} (on {plan.api_host}:{plan.dns_port}, \
{plan.dns_domain})
  kube-proxy   {', '.join(plan.proxies) + ' (iptables)' if plan.proxies else 'none (no nodes)'}
  policies     {', '.join(plan.policy_controllers) + ' (iptables, ipset)' if plan.policy_controllers else 'off'}
  ingress      {_ingress_line(plan)}
  registry     {_registry_line(plan)}
  ports        {', '.join(f'{a}:{p} -> {n}:{q}' for a, p, n, q in plan.port_mappings) or 'none mapped (--config)'}

create a first pod:
  export KUBECONFIG={root / 'kubeconfig'}
  kubectl run hello --image=busybox -- sleep 3600
  kubectl get pods -o wide
  {f"kubeling status {_selector(plan)}".strip()}
""", flush=True)


def _cidr_in_use(cidr: str, name: str) -> str:
    """The running cluster (another name) whose pod CIDR overlaps cidr: its pods' addresses
    would meet these on the machine's bridges and in its netfilter."""
    network = ipaddress.ip_network(cidr)
    for other in names.registered():
        plan = ClusterPlan.load(other.state_dir)
        if other.name != name and plan is not None and plan.supervisor_pid and alive(plan.supervisor_pid) and \
                ipaddress.ip_network(plan.cluster_cidr).overlaps(network):
            return f"cluster {other.name} ({plan.cluster_cidr})"
    return ""


def _free_cluster_cidr(name: str) -> str:
    """The default pod CIDR for the cluster kubeling, the first of 10.89-127.0.0/16 no other
    running cluster uses for another name."""
    if name == names.DEFAULT_NAME:
        return CLUSTER_CIDR
    for second in range(89, 128):
        cidr = f"10.{second}.0.0/16"
        if not _cidr_in_use(cidr, name):
            return cidr
    raise RuntimeError("no free 10.K.0.0/16 for the pods of another cluster")


# `up`'s flags that shape the cluster, each a field of the cluster config (clusterconfig.py)
_SHAPING = ("nodes", "hosts", "etcd_members", "apiservers", "node_monitor_grace_period",
            "default_unreachable_toleration_seconds", "cluster_cidr", "no_ingress", "no_network_policy",
            "no_registry", "registry_name", "registry_config_dir", "otlp_endpoint")


def _config_of(args: argparse.Namespace) -> clusterconfig.ClusterConfig:
    """The cluster config `up` was given: its file (with --name and --state-dir, which
    only say where), or its flags read into the same form."""
    if args.config:
        given = [f"--{dest.replace('_', '-')}" for dest in _SHAPING
                 if getattr(args, dest) != args.parser.get_default(dest)]
        if given:
            raise clusterconfig.ConfigFileError(f"{' '.join(given)} with --config: set it in {args.config} instead")
        config = clusterconfig.load(Path(args.config))
        config.name = args.name or config.name
        return config
    return clusterconfig.ClusterConfig(
        name=args.name, hosts=args.hosts, etcd_members=args.etcd_members, apiservers=args.apiservers,
        node_monitor_grace_period=args.node_monitor_grace_period,
        default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        pod_subnet=args.cluster_cidr or "", nodes=[clusterconfig.NodeConfig() for _ in range(args.nodes)],
        ingress=not args.no_ingress, network_policy=not args.no_network_policy, registry=not args.no_registry,
        registry_name=args.registry_name, registry_config_dir=args.registry_config_dir,
        otlp_endpoint=args.otlp_endpoint)


def _ports_in_use(config: clusterconfig.ClusterConfig, name: str) -> str:
    """A host port of the config's mappings that another running cluster maps, or that
    something on this machine already listens on."""
    for other in names.registered():
        plan = ClusterPlan.load(other.state_dir)
        if other.name == name or plan is None or not plan.supervisor_pid or not alive(plan.supervisor_pid):
            continue
        theirs = {(listen, port) for listen, port, _, _ in plan.port_mappings}
        for node in config.nodes:
            for m in node.port_mappings:
                if (m.listen_address, m.host_port) in theirs:
                    return f"host port {m.listen_address}:{m.host_port} is mapped by the running cluster {other.name}"
    for node in config.nodes:
        for m in node.port_mappings:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((m.listen_address, m.host_port))
                except OSError as err:
                    return f"host port {m.listen_address}:{m.host_port} cannot be had: {err.strerror}"
    return ""


def _prepare(args: argparse.Namespace) -> ClusterPlan | str:
    """The plan of the cluster `up` is asked for, saved in its state dir; or what is wrong."""
    try:
        config = _config_of(args)
        names.check_name(config.name or names.DEFAULT_NAME)
        if not args.state_dir and config.name:
            args.name = config.name  # the file's name says where its state is, as --name would
        state_dir = names.state_dir_of(args)
    except (clusterconfig.ConfigFileError, names.ClusterNameError) as err:
        return str(err)
    registry_config_dir = str(Path(config.registry_config_dir).resolve()) if config.registry_config_dir else ""
    if registry_config_dir and not Path(registry_config_dir).is_dir():
        return f"--registry-config-dir {registry_config_dir} is not a directory"
    existing = ClusterPlan.load(state_dir)
    name = config.name or (existing.name if existing is not None else names.DEFAULT_NAME)
    if existing is not None and existing.supervisor_pid and alive(existing.supervisor_pid):
        return (f"a cluster is already running from {state_dir} (pid {existing.supervisor_pid}); "
                f"`kubeling down --state-dir {state_dir}` first")
    if existing is not None and existing.name != name:
        return f"{state_dir} holds the cluster {existing.name!r}, not {name!r}: another --state-dir, or no --name"
    elsewhere = names.resolve(name)
    if elsewhere is not None and elsewhere != state_dir:
        other = ClusterPlan.load(elsewhere)
        if other is not None and other.supervisor_pid and alive(other.supervisor_pid):
            return f"a cluster named {name} is already running from {elsewhere}; another --name, or `kubeling down " \
                   f"--name {name}` first"
    cluster_cidr = config.pod_subnet or _free_cluster_cidr(name)
    overlap = _cidr_in_use(cluster_cidr, name)
    if overlap:
        return f"--cluster-cidr {cluster_cidr} overlaps the pods of the running {overlap}"
    if ipaddress.ip_network(cluster_cidr).overlaps(ipaddress.ip_network(config.service_subnet)):
        return f"the pod CIDR {cluster_cidr} overlaps the service CIDR {config.service_subnet}"
    taken = _ports_in_use(config, name)
    if taken:
        return taken
    needs_haproxy = config.apiservers > 1 or config.registry or any(n.port_mappings for n in config.nodes)
    missing = [tool for tool, needed in (("haproxy", needs_haproxy), ("docker-registry", config.registry))
               if needed and shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} needed (apiservers behind HAProxy, the local registry, port mappings): " \
               f"apt-get install {' '.join(missing)}"
    if config.registry and config.registry_name:
        problem = _registry_name_problem(config.registry_name)
        if problem:
            return problem
    # Only the cluster called kubeling may run its nodes in the machine's own network
    # namespace (as it did before names): another's kube-proxy there would rewrite the same
    # chains. Every other cluster's nodes are hosts of their own (kind's node containers).
    hosts = config.hosts or name != names.DEFAULT_NAME
    state_dir.mkdir(parents=True, exist_ok=True)
    plan = new_plan(state_dir, len(config.nodes), args.node_prefix, cluster_cidr, config.otlp_endpoint,
                    registry_config_dir, config.etcd_members, existing, config.apiservers, hosts,
                    ingress=config.ingress, registry_name=config.registry_name if config.registry else None)
    _shape(plan, config, args.node_prefix)
    plan.name = name
    plan.user_kubeconfig = str(Path(args.kubeconfig).resolve()) if args.kubeconfig else str(user_kubeconfig())
    if config.apiservers > 1:
        plan.write_haproxy_config()
    if plan.registry:
        plan.local_registry().write_config()
    plan.write_node_files()
    issued = plan.prepare_credentials()
    if issued and not args.detach:
        print(f"certificates issued under {plan.pki}: {', '.join(issued)}", flush=True)
    plan.save()
    names.register(name, state_dir)
    return plan


def _shape(plan: ClusterPlan, config: clusterconfig.ClusterConfig, prefix: str) -> None:
    """What the config says beyond new_plan's ports and names: the nodes' own settings."""
    plan.nodes = config.node_names(prefix)
    plan.node_monitor_grace_period = config.node_monitor_grace_period
    plan.network_policy = config.network_policy
    plan.default_unreachable_toleration_seconds = config.default_unreachable_toleration_seconds
    plan.service_cidr, plan.dns_domain = config.service_subnet, config.dns_domain
    for name, node in zip(plan.nodes, config.nodes, strict=True):
        labels = dict(node.labels)
        taints = list(node.taints)
        if node.role == "control-plane":  # as kubeadm marks a control-plane node
            labels.setdefault(clusterconfig.CONTROL_PLANE_LABEL, "")
            if clusterconfig.CONTROL_PLANE_TAINT not in taints:
                taints.append(clusterconfig.CONTROL_PLANE_TAINT)
        if labels:
            plan.node_labels[name] = labels
        if taints:
            plan.node_taints[name] = taints
        if node.kubelet:
            plan.node_kubelet[name] = node.kubelet
        if node.mounts:
            plan.node_mounts[name] = node.mounts
        plan.port_mappings += [[m.listen_address, m.host_port, name, m.container_port] for m in node.port_mappings]


def cmd_up(args: argparse.Namespace) -> int:
    try:
        names.check_name(args.name or names.DEFAULT_NAME)
    except names.ClusterNameError as err:
        print(f"kubeling: {err}", file=sys.stderr)
        return EXIT_CONFIG
    problem = preflight()
    if problem:
        print(f"kubeling: {problem}", file=sys.stderr)
        return 1
    plan = _prepare(args)
    if isinstance(plan, str):
        print(f"kubeling: {plan}", file=sys.stderr)
        return EXIT_CONFIG
    if not args.detach:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        return asyncio.run(_supervise(plan, args.keep_state))
    state_dir = plan.root
    # The supervisor runs the plan just saved (everything `up` was told is in it).
    argv = [sys.executable, "-m", "cluster", "supervise", "--state-dir", str(state_dir)] + \
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
            down = f"kubeling down {_selector(current)}".strip()
            print(f"running in the background (pid {child.pid}); `{down}` stops it")
            return 0
        if child.poll() is not None:
            print((state_dir / "logs" / "supervisor.log").read_text()[-3000:], file=sys.stderr)
            return 1
        time.sleep(0.3)
    print("kubeling: the cluster did not come up in 300 s; see the logs", file=sys.stderr)
    return 1


def cmd_supervise(args: argparse.Namespace) -> int:
    """`up --detach`'s background half: supervise the plan `up` saved."""
    plan = ClusterPlan.load(Path(args.state_dir))
    if plan is None:
        print(f"kubeling: no cluster plan in {args.state_dir}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    return asyncio.run(_supervise(plan, args.keep_state))


def _selector(plan: ClusterPlan) -> str:
    """How commands name this cluster: by name when it lives where that name's would."""
    if plan.root == names.default_state_dir(plan.name):
        return "" if plan.name == names.DEFAULT_NAME else f"--name {plan.name}"
    return f"--state-dir {plan.root}"


def cmd_down(args: argparse.Namespace) -> int:
    try:
        state_dir = names.state_dir_of(args)
    except names.ClusterNameError as err:
        print(f"kubeling: {err}", file=sys.stderr)
        return EXIT_CONFIG
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
        forget_context(plan)
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
    try:
        state_dir = names.state_dir_of(args)
    except names.ClusterNameError as err:
        print(f"kubeling: {err}", file=sys.stderr)
        return EXIT_CONFIG
    plan = ClusterPlan.load(state_dir)
    if plan is None or not plan.supervisor_pid or not alive(plan.supervisor_pid):
        print(f"no cluster is running from {state_dir}")
        return 1
    print(f"cluster {plan.name} from {state_dir}: supervisor pid {plan.supervisor_pid}, "
          f"API {plan.apiserver} (gRPC, TLS), https://{plan.rest} (REST)")
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


def cmd_get_clusters(args: argparse.Namespace) -> int:
    """`kubeling get clusters`: every named cluster on this machine (kind's `get clusters`)."""
    found = names.registered()
    if not found:
        print("No kubeling clusters found.", file=sys.stderr)
        return 0
    rows = [("NAME", "STATUS", "NODES", "API", "CONTEXT", "STATE DIR")]
    for entry in found:
        plan = ClusterPlan.load(entry.state_dir)
        if plan is None:
            continue
        running = bool(plan.supervisor_pid and alive(plan.supervisor_pid))
        status = ("Running" if plan.ready else "Starting") if running else "Stopped"
        rows.append((entry.name, status, str(len(plan.nodes)), f"https://{plan.rest}" if running else "-",
                     plan.context if running else "-", str(entry.state_dir)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "   " + row[-1])
    return 0


def _registry_name_problem(name: str) -> str:
    """--registry-name: what an image reference may start with (a host with a dot or a
    port, as Docker tells a registry from a Docker Hub user), not a machine's real registry."""
    host, _, port = name.partition(":")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", host) or (port and not port.isdigit()) or \
            ("." not in host and not port):
        return f"--registry-name {name!r}: expected HOST:PORT or a host name with a dot (as in image references)"
    if host in ("localhost", "docker.io", "registry-1.docker.io"):
        return f"--registry-name {name!r}: that name already means another registry"
    return ""


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
    up.add_argument("--config", default="", help="a cluster config file (kubeling.io/v1alpha1 Cluster, "
                                                 "docs/cluster-config.md) instead of the flags that shape the cluster")
    names.add_cluster_args(up, "; another name's nodes are always on hosts of their own, as with --hosts")
    up.add_argument("--kubeconfig", default="",
                    help="merge the context kubeling-NAME into this kubeconfig (default: $KUBECONFIG's first file, "
                         "else ~/.kube/config); removed again at down")
    up.add_argument("--keep-state", action="store_true",
                    help="on stop, leave the pods' containers and networks in place")
    up.add_argument("--cluster-cidr", type=_pod_cidr, default=None,
                    help=f"pods' addresses; each node gets a /24 of it (default {CLUSTER_CIDR} for the cluster "
                         "kubeling, a free 10.K.0.0/16 for another)")
    up.add_argument("--otlp-endpoint", default="", help="send every component's traces here (OTLP gRPC, "
                                                         "e.g. http://127.0.0.1:4317); default: nowhere")
    up.add_argument("--registry-config-dir", default="",
                    help="registry mirrors for the kubelets' runtimes, containerd's hosts.toml layout: "
                         "DIR/<registry>/hosts.toml (e.g. /etc/containerd/certs.d)")
    up.add_argument("--no-registry", action="store_true",
                    help="run no local registry (docker-registry on a free port, pushed to as localhost:PORT)")
    up.add_argument("--registry-name", default=registry.DEFAULT_NAME,
                    help="a name the pods' images may give the local registry besides localhost:PORT "
                         "(default %(default)s, as kind's kind-registry:5000)")
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
    up.set_defaults(run=cmd_up, parser=up)
    down = commands.add_parser("down", help="stop the cluster started with --detach")
    names.add_cluster_args(down)
    down.add_argument("--keep-state", action="store_true")
    down.set_defaults(run=cmd_down)
    status = commands.add_parser("status", help="components, nodes and pods")
    names.add_cluster_args(status)
    status.set_defaults(run=cmd_status)
    supervise = commands.add_parser("supervise", help="the background half of `up --detach` (run by it)")
    supervise.add_argument("--state-dir", required=True)
    supervise.add_argument("--keep-state", action="store_true")
    supervise.set_defaults(run=cmd_supervise)
    get = commands.add_parser("get", help="list kubeling's own objects: `kubeling get clusters`")
    get.add_argument("what", choices=["clusters"])
    get.set_defaults(run=cmd_get_clusters)

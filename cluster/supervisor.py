"""Start a plan's components in order, wait for each to be healthy, restart what dies."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from ssl import SSLContext
from typing import Any

import aiohttp
import dns.asyncquery
import dns.exception
import dns.message

from cluster import bootstrap, hosts
from cluster.cleanup import clean_node, remove_network
from cluster.hosts import bridge_of
from cluster.plan import ClusterPlan, commands
from clusterdns.addon import publish
from controllers.controllerref import update_with_retry
from csi.addon import install_default_class
from csi.hostpath import DRIVER_NAME
from ingress.addon import install_class as install_ingress_class
from kubeling import errors
from kubeling.dynamic import content_of
from metricsserver.addon import APISERVICE as METRICS_APISERVICE
from metricsserver.addon import register as register_metrics
from netpol.rules import FORWARD_CHAIN
from proxy.proxier import Iptables

__all__ = ["Supervisor"]

log = logging.getLogger("kubeling.up")

_BACKOFF_MAX = 30.0
NOT_READY_TAINT = "node.kubernetes.io/not-ready"  # the node lifecycle controller's, while a node is not Ready


def _labelled(labels: dict[str, str]) -> Callable[[Any], bool]:
    """A mutation for update_with_retry: the node with these labels (changed: whether any was missing)."""
    def mutate(node: Any) -> bool:
        changed = any(node.metadata.labels.get(k) != v for k, v in labels.items())
        node.metadata.labels.update(labels)
        return changed
    return mutate


async def _accepts(host: str, port: int) -> bool:
    try:
        async with asyncio.timeout(2):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


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
            in_host = component.argv[0] == "nsenter"  # a node's component on its host (--hosts)
            env.update(OTEL_EXPORTER_OTLP_ENDPOINT=self.plan.otlp_endpoint_for(in_host),
                       OTEL_EXPORTER_OTLP_INSECURE="true")
        with open(logs / f"{component.name}.log", "ab") as out:
            component.proc = subprocess.Popen(component.argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                              stdin=subprocess.DEVNULL, start_new_session=True)
        component.started_at = time.monotonic()
        self.plan.components[component.name] = component.proc.pid
        self.plan.save()

    async def _wait(self, what: str, check: Callable[[], Awaitable[bool]], component: _Component,
                    timeout: float = 120.0) -> None:
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
        if plan.hosts_subnet:
            print(f"making the underlay {plan.hosts_subnet} (bridge {bridge_of(plan.state_dir)})"
                  + (f" with {len(plan.nodes)} hosts" if plan.hosts else ""), flush=True)
            hosts.create(plan.state_dir, plan.hosts_subnet, [plan.netns(n) for n in plan.nodes] if plan.hosts else [])
        members = {name: client for name, client, _ in plan.etcd_members}
        apiservers = {name: grpc_port for name, grpc_port, _ in plan.apiserver_backends}
        for name, argv in commands(plan).items():
            component = self.components[name] = _Component(name, argv)
            print(f"starting {name}", flush=True)
            self._spawn(component)
            if name in members and name == next(reversed(members)):
                # every member runs before any is waited for: a cluster answers once it has quorum
                for member, port in members.items():
                    await self._wait(f"{member} on 127.0.0.1:{port}", functools.partial(self._etcd_healthy, port),
                                     self.components[member])
            elif name in apiservers:
                host = plan.api_host if len(apiservers) == 1 else "127.0.0.1"  # as commands() listens
                address = f"{host}:{apiservers[name]}"
                await self._wait(f"the apiserver on {address}", functools.partial(self._apiserver_ready, address),
                                 component)
            elif name == "haproxy":
                await self._wait(f"HAProxy on {plan.apiserver}", functools.partial(self._apiserver_ready, ""),
                                 component)
            elif name == "scheduler":
                await self._wait("the scheduler's /healthz", self._scheduler_healthy, component)
            elif name == "controller-manager":
                await self._wait("the controller manager's /healthz", self._controller_manager_healthy, component)
            elif name == "cluster-dns":
                await self._wait(f"the cluster DNS on {plan.api_host}:{plan.dns_port}", self._dns_serving, component)
            elif name == "metrics-server":
                await self._wait(f"the metrics server on {plan.api_host}:{plan.metrics_port} available through the "
                                 "aggregator", self._metrics_available, component)
            elif name in plan.proxies:
                await self._wait(f"{name}'s rules", functools.partial(self._proxy_synced, plan.proxies[name]),
                                 component)
            elif name == "registry":
                await self._wait(f"the registry on {plan.api_host}:{plan.registry_port}",
                                 functools.partial(self._http_ok, f"http://{plan.api_host}:{plan.registry_port}/v2/"),
                                 component)
            elif name == "registry-loopback":
                await self._wait(f"the registry on 127.0.0.1:{plan.registry_port}",
                                 functools.partial(self._http_ok, f"http://127.0.0.1:{plan.registry_port}/v2/"),
                                 component)
            elif name == "port-mappings":
                for listen, port, node, node_port in plan.port_mappings:
                    await self._wait(f"{listen}:{port} (to {node}:{node_port})",
                                     functools.partial(_accepts, listen, port), component)
            elif name == "ingress-controller":
                await self._wait(f"the ingress controller on {plan.ingress_address}:{plan.ingress_http_port}",
                                 self._ingress_serving, component)
            elif name in plan.policy_controllers:
                await self._wait(f"{name}'s rules", functools.partial(
                    self._proxy_synced, plan.policy_controllers[name], ("filter", FORWARD_CHAIN)), component)
        for node in plan.nodes:
            await self._wait(f"node {node} to be Ready (and schedulable)", functools.partial(self._node_ready, node),
                             self.components[f"kubelet-{node}"])
        if plan.node_labels:
            print("  labelling " + ", ".join(plan.node_labels), flush=True)
            async with plan.admin_client(timeout=10) as client:
                for node, labels in plan.node_labels.items():
                    await update_with_retry(client.nodes, await client.nodes.get(node), _labelled(labels))
        for node in plan.nodes:
            await self._wait(f"the hostpath CSI driver registered on {node}",
                             functools.partial(self._csi_registered, node), self.components[f"csi-hostpath-{node}"])
        async with plan.admin_client(timeout=10) as client:
            # what `kubeling join` reads (kubeadm's bootstrap-token and upload-config phases)
            await bootstrap.install(client, bootstrap.cluster_info_kubeconfig(
                (plan.pki / "ca.crt").read_bytes(), plan.rest, plan.apiserver), bootstrap.kubelet_settings(plan))
            if plan.nodes:
                await install_default_class(client, DRIVER_NAME)  # as kubeadm's addon phase: the admin's
                if plan.ingress:
                    await install_ingress_class(client)

    async def _http_ok(self, url: str, ssl: SSLContext | None = None) -> bool:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session, \
                    session.get(url, ssl=ssl or True) as reply:
                return reply.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def _ingress_serving(self) -> bool:
        """HAProxy answers (404 from the default backend while no Ingress routes anything)."""
        plan = self.plan
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session, \
                    session.get(f"http://{plan.ingress_address}:{plan.ingress_http_port}/") as reply:
                return reply.status in (200, 404, 503)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def _etcd_healthy(self, port: int) -> bool:
        return await self._http_ok(f"https://127.0.0.1:{port}/health", self.plan.etcd_ssl())

    async def _scheduler_healthy(self) -> bool:
        return await self._http_ok(f"http://127.0.0.1:{self.plan.scheduler_metrics_port}/healthz")

    async def _controller_manager_healthy(self) -> bool:
        return await self._http_ok(f"http://127.0.0.1:{self.plan.controller_manager_metrics_port}/healthz")

    async def _apiserver_ready(self, address: str) -> bool:
        async with self.plan.admin_client(timeout=2, wait_for_ready=False, address=address) as client:
            try:
                await client.namespaces.get("default")
                return True
            except errors.ApiError:
                return False

    async def _dns_serving(self) -> bool:
        """kube-dns published (as kubeadm's addon phase: with the admin's credentials) and
        the server answering for the kubernetes Service."""
        plan = self.plan
        try:
            async with plan.admin_client(timeout=5, wait_for_ready=False) as client:
                await publish(client, plan.dns_ip, plan.api_host, plan.dns_port)
            reply = await dns.asyncquery.udp(dns.message.make_query(f"kubernetes.default.svc.{plan.dns_domain}", "A"),
                                             plan.api_host, port=plan.dns_port, timeout=1)
        except (errors.ApiError, dns.exception.DNSException, OSError):
            return False
        return bool(reply.answer)

    async def _metrics_available(self) -> bool:
        """Registered with the aggregator (as metrics-server's manifests do: with the admin's
        credentials), and its APIService Available."""
        plan = self.plan
        try:
            async with plan.admin_client(timeout=5, wait_for_ready=False) as client:
                await register_metrics(client, plan.api_host, plan.metrics_port,
                                       (plan.pki / "ca.crt").read_bytes())
                apiservice = await client.apiservices.get(METRICS_APISERVICE)
        except (errors.ApiError, OSError):
            return False
        conditions = (content_of(apiservice).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)

    async def _proxy_synced(self, nodes: list[str], chain: tuple[str, str] = ("nat", "KUBE-SERVICES")) -> bool:
        """Its chains exist in its network namespace (kube-proxy's, or `chain`): the first sync is done."""
        iptables = Iptables(f"/run/netns/{self.plan.netns(nodes[0])}" if self.plan.hosts else "")
        done = await asyncio.to_thread(iptables.run, ["iptables", "-w", "-t", chain[0], "-S", chain[1]])
        return done.returncode == 0

    async def _csi_registered(self, node: str) -> bool:
        async with self.plan.admin_client(timeout=2, wait_for_ready=False) as client:
            try:
                found = await client.csinodes.get(node)
            except errors.ApiError:
                return False
        return any(d.name == DRIVER_NAME for d in found.spec.drivers)

    async def _node_ready(self, node: str) -> bool:
        async with self.plan.admin_client(timeout=2, wait_for_ready=False) as client:
            try:
                found = await client.nodes.get(node)
            except errors.ApiError:
                return False
        # Ready, and the node lifecycle controller has taken its not-ready taint off: a pod
        # created the moment `up` returns may land on any node (it could not, found in a test)
        return any(c.type == "Ready" and c.status == "True" for c in found.status.conditions) and \
            not any(t.key == NOT_READY_TAINT for t in found.spec.taints)

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
        keep_state, then scheduler and controller manager, apiserver and etcd."""
        self.stopping = True
        self._terminate([f"kubelet-{n}" for n in self.plan.nodes])
        if not keep_state:
            for node in self.plan.nodes:
                await clean_node(self.plan, node)
        self._terminate([f"csi-hostpath-{n}" for n in self.plan.nodes])
        # One after the other: the scheduler and the controller manager give their leases
        # up through the apiserver.
        self._terminate(self.plan.addons)
        self._terminate(["haproxy", *(name for name, _, _ in self.plan.apiserver_backends)])
        self._terminate([name for name, _, _ in self.plan.etcd_members])
        remove_network(self.plan)

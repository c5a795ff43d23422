"""kube-proxy's loop: Services, EndpointSlices and Nodes from informers; after any change
the rules are rendered and applied in one `iptables-restore --noflush` no sooner than
`min_sync_period` after the last (upstream's BoundedFrequencyRunner), and at least every
`sync_period` in full (chains read back, anything of ours changed by hand put right).
Each sync also brings the health-check node ports of Local load balancers up to date
(`proxy.healthcheck`).
At a clean stop every rule and chain of kube-proxy's is removed; a killed proxy leaves
its rules, and the one that starts next takes them over (same chain names), so
connections keep flowing while it restarts (conntrack holds their translations anyway).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.netfilter import Netfilter
from kubeling.netutil import cidr_arg
from kubeling.options import flag
from kubeling.periodic import cancel_and_wait
from protos.kubeling.v1 import core_pb2, discovery_pb2
from proxy.healthcheck import ServiceHealthServer, health_checks
from proxy.iptables import FILTER_CHAINS, JUMPS, NAT_CHAINS, OWN_PREFIXES, ProxyRules, RuleSet, render
from proxy.serviceinfo import service_ports

__all__ = ["ProxyConfig", "Proxier", "Iptables"]

log = logging.getLogger(__name__)

BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def _addresses(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


@dataclass
class ProxyConfig:
    """kube-proxy's settings, each with its flag."""

    node_names: list[str] = flag(help="a node whose pods are local here (repeat for nodes sharing this network "
                                 "namespace)", name="node-name", action="append", default_factory=list)
    cluster_cidr: str = flag("", "the pods' range: traffic from outside it to a ClusterIP is masqueraded (empty: "
                             "all is)", type=cidr_arg)
    service_cidr: str = flag("10.96.0.0/16", "the Services' range: what is addressed to it and not a Service is "
                             "rejected (default %(default)s)", name="service-cluster-ip-range", type=cidr_arg)
    nodeport_addresses: list[str] = flag(help="comma-separated addresses node ports answer on (default: the nodes' "
                                         "InternalIPs)", type=_addresses, default_factory=list)
    min_sync_period: float = flag(1.0, "seconds between two rule syncs at least (default %(default)s)", type=float)
    sync_period: float = flag(30.0, "a full sync at least this often (default %(default)s)", type=float)
    masquerade_all: bool = flag(False, "masquerade all traffic to ClusterIPs", action="store_true")
    netns: str = ""  # a network namespace's path to program instead of this process's (tests)


@dataclass(frozen=True)
class Iptables(Netfilter):
    """kube-proxy's chains in this network namespace, or in `netns`."""

    def own_chains(self) -> set[str]:
        """The per-service chains of kube-proxy's in the nat table now."""
        out = self.run(["iptables-save", "-t", "nat"]).stdout
        return {line[1:].split()[0] for line in out.splitlines()
                if line.startswith(":") and line[1:].startswith(OWN_PREFIXES)}

    def ensure_jumps(self) -> None:
        for table, chain, rule in JUMPS:
            if self.run(["iptables", "-w", "-t", table, "-C", chain, *rule]).returncode != 0:
                done = self.run(["iptables", "-w", "-t", table, "-I", chain, "1", *rule])
                if done.returncode != 0:
                    raise RuntimeError(f"iptables -t {table} -I {chain}: {done.stderr.strip()}")

    def cleanup(self) -> None:
        """Remove every rule and chain of kube-proxy's (`kube-proxy --cleanup`)."""
        for table, chain, rule in JUMPS:
            while self.run(["iptables", "-w", "-t", table, "-D", chain, *rule]).returncode == 0:
                pass
        saved = {t: self.run(["iptables-save", "-t", t]).stdout for t in ("filter", "nat")}
        present = {t: {line[1:].split()[0] for line in text.splitlines() if line.startswith(":KUBE-")}
                   for t, text in saved.items()}
        flt = sorted(present["filter"] & set(FILTER_CHAINS))
        nat = sorted(present["nat"] & (set(NAT_CHAINS) | {c for c in present["nat"] if c.startswith(OWN_PREFIXES)}))
        lines = ["*filter", *(f":{c} - [0:0]" for c in flt), *(f"-X {c}" for c in flt), "COMMIT",
                 "*nat", *(f":{c} - [0:0]" for c in nat), *(f"-X {c}" for c in nat), "COMMIT", ""]
        try:
            self.restore("\n".join(lines))
        except RuntimeError as err:
            log.warning("kube-proxy cleanup: %s", err)


class Proxier:
    def __init__(self, client: Client, config: ProxyConfig) -> None:
        self.client = client
        self.config = config
        self.iptables = Iptables(config.netns)
        self.services: Informer[core_pb2.Service] = Informer(client.services)
        self.slices: Informer[discovery_pb2.EndpointSlice] = Informer(client.endpointslices)
        self.nodes: Informer[core_pb2.Node] = Informer(client.nodes)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._chains: set[str] = set()  # per-service chains found in the table at start (a predecessor's)
        self._applied: RuleSet | None = None  # what the last sync left in the tables
        self._last_full = 0.0
        self._last_sync_at = 0.0
        self._masquerade_all = config.masquerade_all or not config.cluster_cidr
        self.syncs = 0  # applied syncs, for tests and the benchmark
        self.last_sync_seconds = 0.0
        self.last_rules = ""
        self.health = ServiceHealthServer()
        for informer in (self.services, self.slices, self.nodes):
            informer.add_handler(on_add=self._poke, on_update=lambda old, new: self._poke(new),
                                 on_delete=self._poke)

    def _poke(self, _obj: object) -> None:
        self._changed.set()

    async def start(self, sync_timeout: float = 60.0) -> None:
        if not self._masquerade_all and not await asyncio.to_thread(self._bridge_netfilter):
            log.warning("bridged traffic bypasses iptables here (br_netfilter): masquerading all service traffic "
                        "so that replies from pods on the same bridge find their way back")
            self._masquerade_all = True
        for informer in (self.services, self.slices, self.nodes):
            await informer.start()
        for informer in (self.services, self.slices, self.nodes):
            await informer.wait_synced(sync_timeout)
        self._chains = await asyncio.to_thread(self.iptables.own_chains)  # a killed predecessor's, taken over
        await self.sync()
        self._task = asyncio.create_task(self._loop(), name="kube-proxy-sync")

    def _bridge_netfilter(self) -> bool:
        if not BRIDGE_NF.exists():
            try:
                subprocess.run(["modprobe", "br_netfilter"], capture_output=True, check=False)
            except OSError:
                pass  # no modprobe here (a container): judged by what the kernel has
        done = self.iptables.run(["cat", str(BRIDGE_NF)])  # the setting is per network namespace
        return done.returncode == 0 and done.stdout.strip() == "1"

    async def _loop(self) -> None:
        cfg = self.config
        while True:
            try:
                async with asyncio.timeout(cfg.sync_period):
                    await self._changed.wait()
            except TimeoutError:
                pass
            # the bounded frequency: at most one sync per min_sync_period, batching changes
            wait = self._last_sync_at + cfg.min_sync_period - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                await self.sync()
            except Exception as err:  # noqa: BLE001 (retried at the next change or period)
                log.warning("kube-proxy sync failed: %s", err)
                self._changed.set()
                await asyncio.sleep(cfg.min_sync_period)

    def _node_addresses(self) -> tuple[str, ...]:
        if self.config.nodeport_addresses:
            return tuple(self.config.nodeport_addresses)
        out: list[str] = []
        for name in self.config.node_names:
            node = self.nodes.store.get(name)
            if node is None:
                continue
            out.extend(a.address for a in node.status.addresses if a.type == "InternalIP")
        return tuple(sorted(set(out)))

    async def sync(self, *, full: bool = False) -> None:
        """Render and apply; only the changed chains unless `full` or a full sync is due."""
        self._changed.clear()
        self._last_sync_at = time.monotonic()
        full = full or self._applied is None or self._last_sync_at - self._last_full >= self.config.sync_period
        cfg = self.config
        rules = ProxyRules(cfg.cluster_cidr, cfg.service_cidr, self._node_addresses(), frozenset(cfg.node_names),
                           self._masquerade_all)
        ports = service_ports(self.services.store.list(), self.slices.store.list())
        started = time.perf_counter()
        wanted = render(ports, rules)
        known = self._chains | (self._applied.own_chains if self._applied else set())
        text = wanted.restore_input(None if full else self._applied, known)
        try:
            if text:
                await asyncio.to_thread(self._apply, text, full)
        except BaseException:
            # the tables are unknown now: the next sync is a full one, deleting what may be stale
            self._applied, self._chains = None, known | wanted.own_chains
            raise
        self._applied, self._chains = wanted, set()
        if full:
            self._last_full = self._last_sync_at
        if not cfg.netns:  # its listeners belong in the node's network namespace, which is this process's
            await self.health.sync(health_checks(ports, frozenset(cfg.node_names)), rules.node_addresses)
        self.last_sync_seconds = time.perf_counter() - started
        self.last_rules = text
        self.syncs += 1
        log.debug("kube-proxy synced %d service ports (%d of %d rule lines written) in %.3f s", len(ports),
                  text.count("\n"), wanted.lines, self.last_sync_seconds)

    def _apply(self, text: str, full: bool) -> None:
        self.iptables.restore(text)
        if full:
            # after the chains exist, and again now and then: someone may have flushed a built-in chain
            self.iptables.ensure_jumps()

    async def stop(self, *, clean: bool = True) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for informer in (self.services, self.slices, self.nodes):
            await informer.stop()
        await self.health.stop()
        if clean:
            await asyncio.to_thread(self.iptables.cleanup)

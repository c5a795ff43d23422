"""The network policy controller's loop (one per network namespace, beside kube-proxy, as
kube-router's netpol controller runs on every node): NetworkPolicies, pods and namespaces
from informers; after a change the rules are rendered (`netpol.rules`) and applied no
sooner than `min_sync_period` after the last sync: changed sets rebuilt aside and swapped
in (a set is never seen half-filled), then the changed chains in one iptables-restore,
then sets no rule uses any more destroyed. Every `sync_period` a full sync rewrites it all
and puts the jumps from FORWARD and INPUT back in first place. A clean stop removes every
chain and set of its; a killed controller leaves them in force, and the next one takes
them over."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.netfilter import Netfilter
from kubeling.netutil import cidr_arg
from kubeling.options import flag
from kubeling.periodic import cancel_and_wait
from kubeling.selectors import SelectorError
from netpol.rules import (
    CHAIN_PREFIX,
    FORWARD_CHAIN,
    INPUT_CHAIN,
    JUMPS,
    SET_PREFIX,
    TEMP_SET_PREFIX,
    IPSet,
    PodInfo,
    Policy,
    PolicyRules,
    parse_policy,
    render,
)
from protos.kubeling.v1 import core_pb2, custom_pb2

__all__ = ["PolicyConfig", "PolicyController", "pod_info", "restore_input", "sets_input"]

log = logging.getLogger(__name__)


@dataclass
class PolicyConfig:
    """The network policy controller's settings, each with its flag."""

    node_names: list[str] = flag(help="a node whose pods are local here (repeat for nodes sharing this network "
                                 "namespace)", name="node-name", action="append", default_factory=list)
    cluster_cidr: str = flag("", "the pods' range: destinations outside it are no pods (default: unknown)",
                             type=cidr_arg)
    min_sync_period: float = flag(0.2, "seconds between two syncs at least (default %(default)s)", type=float)
    sync_period: float = flag(30.0, "a full sync at least this often (default %(default)s)", type=float)
    netns: str = ""  # a network namespace's path to program instead of this process's (tests)


def pod_info(pod: core_pb2.Pod) -> PodInfo | None:
    """A pod as a peer or a target: one with its own address (not the node's), not finished."""
    if not pod.status.podIP or pod.spec.hostNetwork or pod.status.phase in ("Succeeded", "Failed"):
        return None
    ports = tuple((p.name, p.containerPort, p.protocol or "TCP") for c in pod.spec.containers for p in c.ports
                  if p.name)
    return PodInfo(pod.metadata.namespace, pod.metadata.name, pod.status.podIP, pod.spec.nodeName,
                   dict(pod.metadata.labels), ports)


def sets_input(wanted: dict[str, IPSet], before: dict[str, IPSet] | None) -> str:
    """ipset restore input rebuilding every set of `wanted` that differs from `before`
    (all of them without it) aside, then swapping it in."""
    out: list[str] = []
    for name, ipset in sorted(wanted.items()):
        if before is not None and before.get(name) == ipset:
            continue
        temp = TEMP_SET_PREFIX + name[len(SET_PREFIX):]
        kind = f"{ipset.kind} family inet"
        out += [f"create {temp} {kind} -exist", f"flush {temp}", *(f"add {temp} {e}" for e in ipset.entries),
                f"create {name} {kind} -exist", f"swap {temp} {name}", f"destroy {temp}"]
    return "\n".join(out) + "\n" if out else ""


def restore_input(wanted: PolicyRules, before: PolicyRules | None, stale: set[str]) -> str:
    """iptables-restore --noflush input: the chains that differ from `before` (all without
    it), and per-pod chains no longer wanted (of `before`, or `stale`) flushed and deleted."""
    write = [c for c, rules in wanted.chains.items() if before is None or before.chains.get(c) != rules]
    gone = sorted((stale | (before.pod_chains if before else set())) - set(wanted.chains))
    if not write and not gone:
        return ""
    # the top chains first: they stop jumping to a chain before it goes
    write.sort(key=lambda c: (c not in (FORWARD_CHAIN, INPUT_CHAIN), c))
    lines = ["*filter", *(f":{c} - [0:0]" for c in [*write, *gone])]
    for chain in write:
        lines += wanted.chains[chain]
    lines += [f"-X {c}" for c in gone]
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


class PolicyController:
    def __init__(self, client: Client, config: PolicyConfig) -> None:
        self.client = client
        self.config = config
        self.netfilter = Netfilter(config.netns)
        self.policies: Informer[custom_pb2.CustomResource] = Informer(client.networkpolicies)
        self.pods: Informer[core_pb2.Pod] = Informer(client.pods)
        self.namespaces: Informer[core_pb2.Namespace] = Informer(client.namespaces)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._applied: PolicyRules | None = None
        self._stale_chains: set[str] = set()
        self._stale_sets: set[str] = set()
        self._last_full = 0.0
        self._last_sync_at = 0.0
        self.syncs = 0  # applied syncs, for tests and the benchmark
        self.last_sync_seconds = 0.0
        self.last_change_at = 0.0  # when the change the last sync applied was seen (monotonic)
        self._parsed: dict[str, tuple[str, Policy | None]] = {}  # key -> (resourceVersion, parsed)
        for informer in (self.policies, self.pods, self.namespaces):
            informer.add_handler(on_add=self._poke, on_update=lambda old, new: self._poke(new), on_delete=self._poke)

    def _poke(self, _obj: object) -> None:
        if not self._changed.is_set():
            self.last_change_at = time.monotonic()
        self._changed.set()

    async def start(self, sync_timeout: float = 60.0) -> None:
        for informer in (self.policies, self.pods, self.namespaces):
            await informer.start()
        for informer in (self.policies, self.pods, self.namespaces):
            await informer.wait_synced(sync_timeout)
        # a killed predecessor's, taken over: what the first sync does not want goes
        self._stale_chains = await asyncio.to_thread(self.netfilter.chains, "filter", CHAIN_PREFIX)
        self._stale_sets = await asyncio.to_thread(self.netfilter.ipsets, SET_PREFIX)
        await self.sync()
        self._task = asyncio.create_task(self._loop(), name="network-policy-sync")

    async def _loop(self) -> None:
        cfg = self.config
        while True:
            try:
                async with asyncio.timeout(cfg.sync_period):
                    await self._changed.wait()
            except TimeoutError:
                pass
            wait = self._last_sync_at + cfg.min_sync_period - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                await self.sync()
            except Exception as err:  # noqa: BLE001 (retried at the next change or period)
                log.warning("network policy sync failed: %s", err)
                self._changed.set()
                await asyncio.sleep(cfg.min_sync_period)

    def _policies(self) -> list[Policy]:
        out: list[Policy] = []
        parsed: dict[str, tuple[str, Policy | None]] = {}
        for obj in self.policies.store.list():
            key = f"{obj.metadata.namespace}/{obj.metadata.name}"
            known = self._parsed.get(key)
            if known is None or known[0] != obj.metadata.resourceVersion:
                try:
                    spec = json.loads(obj.content or "{}").get("spec") or {}
                    known = (obj.metadata.resourceVersion, parse_policy(obj.metadata.namespace, obj.metadata.name,
                                                                        spec))
                except (ValueError, SelectorError, TypeError) as err:
                    log.warning("network policy %s not enforced: %s", key, err)
                    known = (obj.metadata.resourceVersion, None)
            parsed[key] = known
            if known[1] is not None:
                out.append(known[1])
        self._parsed = parsed
        return out

    async def sync(self, *, full: bool = False) -> None:
        self._changed.clear()
        seen_at = self.last_change_at
        self._last_sync_at = time.monotonic()
        full = full or self._applied is None or self._last_sync_at - self._last_full >= self.config.sync_period
        started = time.perf_counter()
        pods = [info for pod in self.pods.store.list() if (info := pod_info(pod)) is not None]
        namespaces = {ns.metadata.name: dict(ns.metadata.labels) for ns in self.namespaces.store.list()}
        wanted = render(self._policies(), pods, namespaces, frozenset(self.config.node_names),
                        self.config.cluster_cidr)
        before = None if full else self._applied
        sets = sets_input(wanted.sets, before.sets if before else None)
        rules = restore_input(wanted, before, self._stale_chains)
        gone_sets = (self._stale_sets | set(self._applied.sets if self._applied else ())) - set(wanted.sets)
        try:
            await asyncio.to_thread(self._apply, sets, rules, gone_sets, full)
        except BaseException:
            # the tables are unknown now: the next sync is a full one, deleting what may be stale
            self._stale_chains |= set(self._applied.pod_chains if self._applied else ()) | wanted.pod_chains
            self._stale_sets |= set(self._applied.sets if self._applied else ()) | set(wanted.sets)
            self._applied = None
            raise
        self._applied, self._stale_chains, self._stale_sets = wanted, set(), set()
        if full:
            self._last_full = self._last_sync_at
        self.last_sync_seconds = time.perf_counter() - started
        self.syncs += 1
        log.debug("network policies synced: %d chains, %d sets (%.3f s, change seen %.3f s before)",
                  len(wanted.chains), len(wanted.sets), self.last_sync_seconds,
                  time.monotonic() - seen_at if seen_at else 0.0)

    def _apply(self, sets: str, rules: str, gone_sets: set[str], full: bool) -> None:
        if sets:
            self.netfilter.ipset_restore(sets)
        if rules:
            self.netfilter.restore(rules)
        if full:
            for table, chain, rule in JUMPS:
                self.netfilter.ensure_first(table, chain, rule)
        for name in sorted(gone_sets):
            # one by one: a set already gone (a predecessor's half-done cleanup) fails alone
            self.netfilter.run(["ipset", "destroy", name])

    async def stop(self, *, clean: bool = True) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for informer in (self.policies, self.pods, self.namespaces):
            await informer.stop()
        if clean:
            await asyncio.to_thread(cleanup, self.netfilter)


def cleanup(netfilter: Netfilter) -> None:
    """Remove every chain and set of the controller's (`python -m netpol --cleanup`)."""
    for table, chain, rule in JUMPS:
        netfilter.remove_jump(table, chain, rule)
    chains = sorted(netfilter.chains("filter", CHAIN_PREFIX), key=lambda c: (c not in (FORWARD_CHAIN, INPUT_CHAIN), c))
    if chains:
        lines = ["*filter", *(f":{c} - [0:0]" for c in chains), *(f"-X {c}" for c in chains), "COMMIT", ""]
        try:
            netfilter.restore("\n".join(lines))
        except RuntimeError as err:
            log.warning("network policy cleanup: %s", err)
    sets = netfilter.ipsets(SET_PREFIX) | netfilter.ipsets(TEMP_SET_PREFIX)
    for name in sorted(sets):
        netfilter.run(["ipset", "destroy", name])

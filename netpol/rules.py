"""What the network policy controller programs, rendered from the cluster's NetworkPolicies,
pods and namespaces (as kube-router's netpol controller does it): ipsets for the peers
and iptables chains in the filter table for this node's pods.

- `KUBE-NP-FORWARD` (from FORWARD, first) and `KUBE-NP-INPUT` (from INPUT, first: a pod
  reaching its own node, e.g. the cluster DNS of `kubeling up`): packets of established
  flows return at once (a policy never cuts a flow it did not see start); a new one from
  a pod isolated for egress goes through its `KUBE-NP-EG-<hash>` chain, one to a pod
  isolated for ingress through its `KUBE-NP-IN-<hash>`.
- A pod's chain holds one rule per (policy rule, peer, port) of the policies that select
  it, each RETURNing (allowed: on to the next check, kube-proxy's rules, the pod);
  nothing matched, the last rule DROPs (the client times out, as upstream's tests expect).
  Ingress from the node itself is never filtered (its traffic leaves by OUTPUT, not
  FORWARD): kubelet probes work under any policy, as the API documents.
- Peers are ipsets: `hash:ip` of the pods a pod/namespace selector pair picks,
  `hash:net` of an ipBlock (its `except` entries `nomatch`), `hash:ip,port` of the pods
  that have a named port an egress rule names (resolved per destination pod). Sets are
  named for what they select, so a pod coming or going changes set members, not rules.
- Ports: numbers and ranges (`endPort`), protocols, names (an ingress name resolved
  against the pod's own containers). A destination that is no pod (the cluster DNS and
  the apiserver of `kubeling up` run beside the cluster, not in it) has no port of its
  own to name: for it an egress port also matches the Service port the pod connected to,
  so the usual "allow DNS: port 53" policy allows DNS.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeling.selectors import LabelSelector, from_label_selector_dict

__all__ = ["PodInfo", "Policy", "IPSet", "PolicyRules", "render", "parse_policy", "FORWARD_CHAIN", "INPUT_CHAIN",
           "CHAIN_PREFIX", "SET_PREFIX", "TEMP_SET_PREFIX", "JUMPS"]

CHAIN_PREFIX = "KUBE-NP-"
FORWARD_CHAIN = "KUBE-NP-FORWARD"
INPUT_CHAIN = "KUBE-NP-INPUT"
SET_PREFIX = "KUBE-NP-"  # ipsets live in a namespace of their own: the same prefix is no clash
TEMP_SET_PREFIX = "KUBE-NT-"  # a set being rebuilt, swapped with the live one
_COMMENT = ("-m", "comment", "--comment")
JUMPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("filter", "FORWARD", (*_COMMENT, "kubernetes network policies", "-j", FORWARD_CHAIN)),
    ("filter", "INPUT", (*_COMMENT, "kubernetes network policies", "-j", INPUT_CHAIN)),
)


def _hash(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:16]


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    ip: str
    node: str
    labels: Mapping[str, str]
    ports: tuple[tuple[str, int, str], ...] = ()  # container ports: (name, number, protocol)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Peer:
    pods: LabelSelector | None = None
    namespaces: LabelSelector | None = None
    cidr: str = ""
    excepts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Port:
    protocol: str
    port: int | str | None = None  # a number, a name, or none (every port)
    end_port: int = 0


@dataclass(frozen=True)
class Rule:
    peers: tuple[Peer, ...]  # empty: every peer
    ports: tuple[Port, ...]  # empty: every port


@dataclass(frozen=True)
class Policy:
    namespace: str
    name: str
    selector: LabelSelector
    ingress: tuple[Rule, ...] | None  # None: the policy does not isolate for ingress
    egress: tuple[Rule, ...] | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _selector(raw: Any) -> LabelSelector | None:
    return from_label_selector_dict(raw) if raw is not None else None


def _rules(raw: list[dict[str, Any]] | None, peers_key: str) -> tuple[Rule, ...]:
    rules = []
    for rule in raw or []:
        peers = []
        for peer in rule.get(peers_key) or []:
            block = peer.get("ipBlock")
            if block:
                peers.append(Peer(cidr=str(block.get("cidr", "")), excepts=tuple(block.get("except") or ())))
            else:
                peers.append(Peer(pods=_selector(peer.get("podSelector")),
                                  namespaces=_selector(peer.get("namespaceSelector"))))
        ports = tuple(Port(str(p.get("protocol") or "TCP"), p.get("port"), int(p.get("endPort") or 0))
                      for p in rule.get("ports") or [])
        rules.append(Rule(tuple(peers), ports))
    return tuple(rules)


def parse_policy(namespace: str, name: str, spec: Mapping[str, Any]) -> Policy:
    """A NetworkPolicy's spec (as the API stores it: validated, policyTypes defaulted)."""
    types = spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])
    selector = from_label_selector_dict(spec.get("podSelector") or {})  # SelectorError: the caller skips it
    assert selector is not None  # a dict always makes one
    return Policy(namespace, name, selector,
                  _rules(spec.get("ingress"), "from") if "Ingress" in types else None,
                  _rules(spec.get("egress"), "to") if "Egress" in types else None)


@dataclass(frozen=True)
class IPSet:
    name: str
    kind: str  # hash:ip, hash:net, hash:ip,port
    entries: tuple[str, ...]


@dataclass
class PolicyRules:
    """The filter chains (name -> rules) and the sets they use."""

    chains: dict[str, list[str]] = field(default_factory=dict)
    sets: dict[str, IPSet] = field(default_factory=dict)

    @property
    def pod_chains(self) -> set[str]:
        return {c for c in self.chains if c not in (FORWARD_CHAIN, INPUT_CHAIN)}


def _networks(cidr: str, excepts: tuple[str, ...]) -> tuple[str, ...]:
    """hash:net entries for cidr minus excepts; hash:net has no /0, so 0.0.0.0/0 is two /1s."""
    net = ipaddress.ip_network(cidr, strict=False)
    if net.version != 4:
        return ()
    base = [str(n) for n in net.subnets(new_prefix=1)] if net.prefixlen == 0 else [str(net)]
    out = [*base]
    for text in excepts:
        try:
            held = ipaddress.ip_network(text, strict=False)
        except ValueError:
            continue
        if held.version == 4 and held.prefixlen > 0:
            out.append(f"{held} nomatch")
    return tuple(out)


class _Renderer:
    def __init__(self, pods: list[PodInfo], namespaces: Mapping[str, Mapping[str, str]], cluster_cidr: str) -> None:
        self.pods = pods
        self.namespaces = namespaces
        self.cluster_cidr = cluster_cidr
        self.out = PolicyRules()

    def _set(self, key: str, kind: str, entries: Iterable[str]) -> str:
        name = SET_PREFIX + _hash(key)
        if name not in self.out.sets:
            self.out.sets[name] = IPSet(name, kind, tuple(sorted(set(entries))))
        return name

    def _peer_pods(self, policy: Policy, peer: Peer | None) -> list[PodInfo]:
        """The pods a peer picks (None: every pod)."""
        if peer is None:
            return self.pods
        if peer.namespaces is None:
            in_ns = [p for p in self.pods if p.namespace == policy.namespace]
        else:
            selected = {ns for ns, labels in self.namespaces.items() if peer.namespaces.matches(labels)}
            in_ns = [p for p in self.pods if p.namespace in selected]
        return [p for p in in_ns if peer.pods is None or peer.pods.matches(p.labels)]

    def _peer_key(self, policy: Policy, peer: Peer) -> str:
        scope = policy.namespace if peer.namespaces is None else "*"
        return json.dumps([scope, str(peer.pods) if peer.pods is not None else None,
                           str(peer.namespaces) if peer.namespaces is not None else None])

    def _peer_match(self, policy: Policy, peer: Peer, direction: str) -> str:
        """An iptables match for the peer's addresses (src for ingress, dst for egress)."""
        if peer.cidr:
            try:
                entries = _networks(peer.cidr, peer.excepts)
            except ValueError:
                entries = ()
            name = self._set(json.dumps(["net", peer.cidr, sorted(peer.excepts)]), "hash:net", entries)
        else:
            name = self._set(self._peer_key(policy, peer), "hash:ip",
                             (p.ip for p in self._peer_pods(policy, peer)))
        return f"-m set --match-set {name} {direction}"

    def _port_matches(self, policy: Policy, rule: Rule, port: Port, pod: PodInfo, egress: bool,
                      peer: Peer | None) -> list[str]:
        proto = port.protocol.lower()
        if port.port is None:
            return [f"-p {proto}"]
        if isinstance(port.port, str) and not port.port.isdigit():
            if not egress:  # the pod's own port of that name
                number = next((n for name, n, pr in pod.ports if name == port.port and pr == port.protocol), 0)
                return [f"-p {proto} -m {proto} --dport {number}"] if number else []
            # the destination's port of that name: the (address, port) pairs of the pods the peer picks
            # (any pod for an ipBlock, whose own match narrows it)
            picks = None if peer is None or peer.cidr else peer
            entries = [f"{p.ip},{proto}:{n}" for p in self._peer_pods(policy, picks) for name, n, pr in p.ports
                       if name == port.port and pr == port.protocol]
            key = json.dumps(["named", self._peer_key(policy, picks) if picks else "*", port.port, port.protocol])
            return [f"-p {proto} -m set --match-set {self._set(key, 'hash:ip,port', entries)} dst,dst"]
        number = int(port.port)
        span = f"{number}:{port.end_port}" if port.end_port else str(number)
        out = [f"-p {proto} -m {proto} --dport {span}"]
        if egress and peer is None and self.cluster_cidr:
            # a destination that is no pod: the port is the Service's the pod connected to
            out.append(f"! -d {self.cluster_cidr} -p {proto} -m conntrack --ctstate DNAT --ctorigdstport {span}")
        return out

    def _chain(self, pod: PodInfo, policies: list[Policy], egress: bool) -> str:
        chain = CHAIN_PREFIX + ("EG-" if egress else "IN-") + _hash(pod.key)
        lines: list[str] = []
        direction = "dst" if egress else "src"
        for policy in policies:
            rules = policy.egress if egress else policy.ingress
            comment = f'-m comment --comment "{pod.key} {"egress" if egress else "ingress"} by {policy.key}"'
            for rule in rules or ():
                peers: list[Peer | None] = list(rule.peers) or [None]
                for peer in peers:
                    peer_match = self._peer_match(policy, peer, direction) if peer is not None else ""
                    port_matches: list[str] = []
                    for port in rule.ports:
                        port_matches += self._port_matches(policy, rule, port, pod, egress, peer)
                    if rule.ports and not port_matches:
                        continue  # only names this pod does not have: matches nothing
                    for port_match in port_matches or [""]:
                        parts = [f"-A {chain}", comment, peer_match, port_match, "-j RETURN"]
                        lines.append(" ".join(p for p in parts if p))
        lines.append(f'-A {chain} -m comment --comment "{pod.key}: no {"egress" if egress else "ingress"} '
                     f'policy allows it" -j DROP')
        self.out.chains[chain] = lines
        return chain

    def render(self, policies: list[Policy], local: list[PodInfo]) -> PolicyRules:
        forward = [f'-A {FORWARD_CHAIN} -m comment --comment "established flows are kept" '
                   "-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"]
        to_node = [f'-A {INPUT_CHAIN} -m comment --comment "established flows are kept" '
                   "-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"]
        ingress_rules: list[str] = []
        for pod in sorted(local, key=lambda p: p.key):
            selecting = [p for p in policies if p.namespace == pod.namespace and p.selector.matches(pod.labels)]
            outgoing = [p for p in selecting if p.egress is not None]
            incoming = [p for p in selecting if p.ingress is not None]
            if outgoing:
                chain = self._chain(pod, outgoing, egress=True)
                forward.append(f"-A {FORWARD_CHAIN} -s {pod.ip}/32 -j {chain}")
                to_node.append(f"-A {INPUT_CHAIN} -s {pod.ip}/32 -j {chain}")
            if incoming:
                chain = self._chain(pod, incoming, egress=False)
                ingress_rules.append(f"-A {FORWARD_CHAIN} -d {pod.ip}/32 -j {chain}")
        self.out.chains[FORWARD_CHAIN] = forward + ingress_rules
        self.out.chains[INPUT_CHAIN] = to_node
        return self.out


def render(policies: list[Policy], pods: list[PodInfo], namespaces: Mapping[str, Mapping[str, str]],
           local_nodes: frozenset[str], cluster_cidr: str = "") -> PolicyRules:
    """The rules for the pods on `local_nodes` under `policies`; `pods` are every pod with an
    address (peers), `namespaces` every namespace's labels."""
    local = [p for p in pods if p.node in local_nodes]
    return _Renderer(pods, namespaces, cluster_cidr).render(policies, local)

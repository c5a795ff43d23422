"""The network policy controller's rules from policies, pods and namespaces: who is isolated,
peers as ipsets (pod and namespace selectors, ipBlocks with except, named ports), ports
and ranges, the DNS exception for destinations that are no pods, the sets' swap-in, and
stale chains deleted."""

from __future__ import annotations

from typing import Any

from netpol.controller import restore_input, sets_input
from netpol.rules import FORWARD_CHAIN, INPUT_CHAIN, PodInfo, Policy, parse_policy, render

NODE = frozenset({"node-1"})
NAMESPACES = {"default": {"kubernetes.io/metadata.name": "default"},
              "team-a": {"kubernetes.io/metadata.name": "team-a", "team": "a"}}
PODS = [
    PodInfo("default", "nginx", "10.88.1.2", "node-1", {"app": "nginx"}, (("http", 80, "TCP"),)),
    PodInfo("default", "client", "10.88.1.3", "node-1", {"access": "true"}),
    PodInfo("default", "stranger", "10.88.2.4", "node-2", {}),
    PodInfo("team-a", "friend", "10.88.2.5", "node-2", {"role": "client"}),
]


def _policy(spec: dict[str, Any], name: str = "p", namespace: str = "default") -> Policy:
    return parse_policy(namespace, name, spec)


def _chain_of(rules: Any, pod_ip: str, direction: str) -> list[str]:
    flag = "-d" if direction == "in" else "-s"
    jump = next(r for r in rules.chains[FORWARD_CHAIN] if f"{flag} {pod_ip}/32 " in r)
    return rules.chains[jump.split("-j ")[1]]


def test_the_walkthrough_policy_isolates_nginx_for_ingress_only() -> None:
    policy = _policy({"podSelector": {"matchLabels": {"app": "nginx"}}, "policyTypes": ["Ingress"],
                      "ingress": [{"from": [{"podSelector": {"matchLabels": {"access": "true"}}}]}]})
    rules = render([policy], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    forward = rules.chains[FORWARD_CHAIN]
    assert "--ctstate RELATED,ESTABLISHED -j RETURN" in forward[0]
    assert len(forward) == 2 and "-d 10.88.1.2/32" in forward[1]  # nginx only; the client is not isolated
    chain = _chain_of(rules, "10.88.1.2", "in")
    assert len(chain) == 2 and chain[0].endswith("src -j RETURN") and chain[1].endswith("-j DROP")
    [allowed] = [s for s in rules.sets.values() if s.name in chain[0]]
    assert allowed.kind == "hash:ip" and allowed.entries == ("10.88.1.3",)
    assert rules.chains[INPUT_CHAIN] == [rules.chains[INPUT_CHAIN][0]]  # no egress isolation: nothing to check


def test_default_deny_egress_and_the_dns_exception() -> None:
    deny = _policy({"podSelector": {}, "policyTypes": ["Egress"]}, "deny")
    rules = render([deny], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    chain = _chain_of(rules, "10.88.1.3", "out")
    assert len(chain) == 1 and chain[0].endswith("-j DROP")
    # the pod reaching its own node (the cluster DNS of `kubeling up`) goes through the same chain
    assert any("-s 10.88.1.3/32" in r for r in rules.chains[INPUT_CHAIN])
    dns = _policy({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [
        {"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]}, "dns")
    rules = render([deny, dns], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    chain = _chain_of(rules, "10.88.1.3", "out")
    assert any(r.endswith("-p udp -m udp --dport 53 -j RETURN") for r in chain)
    assert any("! -d 10.88.0.0/16 -p udp -m conntrack --ctstate DNAT --ctorigdstport 53 -j RETURN" in r
               for r in chain)
    assert chain[-1].endswith("-j DROP") and len(chain) == 5


def test_namespace_selectors_ip_blocks_ports_and_ranges() -> None:
    policy = _policy({"podSelector": {"matchLabels": {"app": "nginx"}}, "ingress": [
        {"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "podSelector": {"matchLabels":
                                                                                          {"role": "client"}}}],
         "ports": [{"port": "http"}]},
        {"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.88.2.0/24"]}}],
         "ports": [{"port": 8000, "endPort": 8080, "protocol": "TCP"}, {"port": "missing"}]}]})
    rules = render([policy], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    chain = _chain_of(rules, "10.88.1.2", "in")
    assert chain[0].endswith("src -p tcp -m tcp --dport 80 -j RETURN")  # the name resolved on nginx itself
    assert chain[1].endswith("src -p tcp -m tcp --dport 8000:8080 -j RETURN") and len(chain) == 3
    by_kind = {s.kind: s for s in rules.sets.values()}
    assert by_kind["hash:ip"].entries == ("10.88.2.5",)  # the friend in team-a, not the stranger
    assert by_kind["hash:net"].entries == ("0.0.0.0/1", "10.88.2.0/24 nomatch", "128.0.0.0/1")


def test_egress_to_a_named_port_is_resolved_per_destination() -> None:
    policy = _policy({"podSelector": {"matchLabels": {"access": "true"}}, "policyTypes": ["Egress"],
                      "egress": [{"to": [{"podSelector": {}}], "ports": [{"port": "http"}]}]})
    rules = render([policy], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    chain = _chain_of(rules, "10.88.1.3", "out")
    assert "-p tcp -m set --match-set" in chain[0] and chain[0].endswith("dst,dst -j RETURN")
    assert {s.kind: s.entries for s in rules.sets.values()}["hash:ip,port"] == ("10.88.1.2,tcp:80",)


def test_sets_are_swapped_in_and_stale_chains_deleted() -> None:
    policy = _policy({"podSelector": {"matchLabels": {"app": "nginx"}}, "ingress": [{"from": [
        {"podSelector": {"matchLabels": {"access": "true"}}}]}]})
    first = render([policy], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    text = sets_input(first.sets, None)
    [name] = first.sets
    temp = "KUBE-NT-" + name[len("KUBE-NP-"):]
    assert text.splitlines() == [f"create {temp} hash:ip family inet -exist", f"flush {temp}",
                                 f"add {temp} 10.88.1.3", f"create {name} hash:ip family inet -exist",
                                 f"swap {temp} {name}", f"destroy {temp}"]
    assert sets_input(first.sets, first.sets) == ""
    # the client goes: the set changes, the rules do not
    second = render([policy], PODS[:1] + PODS[2:], NAMESPACES, NODE, "10.88.0.0/16")
    assert sets_input(second.sets, first.sets).count("add ") == 0 and restore_input(second, first, set()) == ""
    # the policy goes: nginx's chain is flushed and deleted, the top chains rewritten first
    third = render([], PODS, NAMESPACES, NODE, "10.88.0.0/16")
    text = restore_input(third, first, set())
    [pod_chain] = first.pod_chains
    assert text.index(f":{FORWARD_CHAIN}") < text.index(f":{pod_chain}") and f"-X {pod_chain}" in text

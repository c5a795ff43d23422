"""kube-proxy's rules as upstream's iptables proxier writes them: chain names from the
service port's hash, 1/n probabilities, masquerade marks only where needed, rejects for
Services without endpoints, node ports, session affinity, the terminating fallback,
Local traffic policies and stale chains deleted."""

from __future__ import annotations

from protos.kubeling.v1 import core_pb2, discovery_pb2, meta_pb2
from proxy.iptables import ProxyRules, RuleSet, ext_chain, fw_chain, render, sep_chain, svc_chain, svl_chain
from proxy.serviceinfo import Endpoint, ServicePort, service_ports

RULES = ProxyRules("10.244.0.0/16", "10.96.0.0/16", ("172.31.5.1",), frozenset({"node-1"}))


def _ep(ip: str, node: str = "node-1", ready: bool = True, terminating: bool = False) -> Endpoint:
    return Endpoint(ip, 8080, node, ready, ready or terminating, terminating)


def _sp(*endpoints: Endpoint, **fields: object) -> ServicePort:
    return ServicePort("default", "web", "http", "TCP", "10.96.0.20", 80, endpoints=list(endpoints),
                       **fields)  # type: ignore[arg-type]


def _render(ports: list[ServicePort], stale: set[str] | None = None) -> tuple[str, set[str]]:
    rules = render(ports, RULES)
    return rules.restore_input(None, stale or set()), rules.own_chains


def _rules(text: str, chain: str, table: str = "nat") -> list[str]:
    body = text.split(f"*{table}\n", 1)[1].split("COMMIT", 1)[0]
    return [line for line in body.splitlines() if line.startswith(f"-A {chain} ")]


def test_cluster_ip_spreads_over_endpoints_with_equal_odds() -> None:
    sp = _sp(_ep("10.244.1.2"), _ep("10.244.1.3"), _ep("10.244.2.2", node="node-2"))
    text, chains = _render([sp])
    chain = svc_chain(sp)
    assert chain.startswith("KUBE-SVC-") and len(chain) == len("KUBE-SVC-") + 16
    assert f':{chain} - [0:0]' in text
    assert _rules(text, "KUBE-SERVICES")[0] == (f'-A KUBE-SERVICES -m comment --comment "default/web:http cluster IP" '
                                                f'-d 10.96.0.20/32 -p tcp -m tcp --dport 80 -j {chain}')
    svc = _rules(text, chain)
    assert '! -s 10.244.0.0/16 -d 10.96.0.20/32' in svc[0] and svc[0].endswith("-j KUBE-MARK-MASQ")
    assert "--probability 0.3333333333" in svc[1] and "--probability 0.5000000000" in svc[2]
    assert "statistic" not in svc[3] and svc[3].endswith(sep_chain(sp, sp.endpoints[2]))
    sep = _rules(text, sep_chain(sp, sp.endpoints[0]))
    assert sep[0].endswith("-s 10.244.1.2/32 -j KUBE-MARK-MASQ")  # hairpin only
    assert sep[1].endswith("-p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080") and len(sep) == 2
    assert {chain} | {sep_chain(sp, e) for e in sp.endpoints} == chains
    # the guard: anything still addressed to the service range after DNAT is rejected
    assert _rules(text, "KUBE-SERVICES", "filter")[-1].endswith(
        "-d 10.96.0.0/16 -j REJECT --reject-with icmp-net-unreachable")


def test_no_endpoints_rejects_and_terminating_ones_are_the_fallback() -> None:
    text, chains = _render([_sp(_ep("10.244.1.2", ready=False))])
    assert not chains
    assert '-A KUBE-SERVICES -m comment --comment "default/web:http has no endpoints" -d 10.96.0.20/32 -p tcp ' \
           '-m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable' in text
    only_terminating = _sp(_ep("10.244.1.2", ready=False, terminating=True))
    text, chains = _render([only_terminating])
    assert svc_chain(only_terminating) in chains and "DNAT --to-destination 10.244.1.2:8080" in text


def test_node_ports_masquerade_and_reject_without_endpoints() -> None:
    sp = _sp(_ep("10.244.1.2"), node_port=30080)
    text, _ = _render([sp])
    ext = next(c for c in text.split() if c.startswith("-j") is False and c.startswith("KUBE-EXT-"))
    assert f"-A KUBE-NODEPORTS -m comment --comment \"default/web:http\" -p tcp -m tcp --dport 30080 -j {ext}" in text
    assert _rules(text, ext) == [
        f'-A {ext} -m comment --comment "masquerade traffic for default/web:http external destinations" '
        '-j KUBE-MARK-MASQ', f"-A {ext} -j {svc_chain(sp)}"]
    assert _rules(text, "KUBE-SERVICES")[-1].endswith("-d 172.31.5.1/32 -j KUBE-NODEPORTS")
    text, _ = _render([_sp(node_port=30080)])
    assert '-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no endpoints" -d 172.31.5.1/32 ' \
           '-p tcp -m tcp --dport 30080 -j REJECT' in text


def test_local_policies_and_affinity_and_off_network_endpoints() -> None:
    local = _sp(_ep("10.244.1.2"), _ep("10.244.2.2", node="node-2"), internal_local=True)
    text, _ = _render([local])
    assert "10.244.2.2" not in text  # another node's endpoint is not used for internalTrafficPolicy Local
    sticky = _sp(_ep("10.244.1.2"), affinity_seconds=10800)
    text, _ = _render([sticky])
    sep = sep_chain(sticky, sticky.endpoints[0])
    assert f"-m recent --name {sep} --rcheck --seconds 10800 --reap -j {sep}" in text
    assert f"-m recent --name {sep} --set -j DNAT" in text
    api = _sp(_ep("172.31.5.1"))  # the apiserver, off the pod network: replies must come back through us
    text, _ = _render([api])
    assert '--comment "default/web:http off the pod network" -j KUBE-MARK-MASQ' in text


def test_stale_chains_are_flushed_then_deleted() -> None:
    sp = _sp(_ep("10.244.1.2"))
    _, chains = _render([sp])
    text, now = _render([], chains)
    assert not now
    for chain in chains:
        assert f":{chain} - [0:0]" in text and f"-X {chain}" in text


def test_a_sync_writes_only_what_changed() -> None:
    web, db = _sp(_ep("10.244.1.2"), _ep("10.244.1.3")), ServicePort(
        "default", "db", "", "TCP", "10.96.0.30", 5432, endpoints=[_ep("10.244.2.2")])
    before = render([db, web], RULES)
    assert before.restore_input(before) == ""  # nothing changed: nothing to write
    after = render([db, _sp(_ep("10.244.1.2"))], RULES)  # one of web's endpoints gone
    text = after.restore_input(before)
    assert svc_chain(web) in text and sep_chain(web, web.endpoints[1]) in text
    assert f"-X {sep_chain(web, web.endpoints[1])}" in text
    assert svc_chain(db) not in text and sep_chain(db, db.endpoints[0]) not in text  # untouched
    assert "*filter" not in text and text.count("\n") < before.lines / 2
    assert isinstance(after, RuleSet) and after.own_chains < before.own_chains


def test_service_ports_from_slices() -> None:
    svc = core_pb2.Service(metadata=meta_pb2.ObjectMeta(name="web", namespace="default"), spec=core_pb2.ServiceSpec(
        clusterIP="10.96.0.20", type="NodePort", sessionAffinity="ClientIP",
        ports=[core_pb2.ServicePort(name="http", protocol="TCP", port=80, nodePort=30080)]))
    svc.spec.sessionAffinityConfig.clientIP.timeoutSeconds = 60
    es = discovery_pb2.EndpointSlice(
        metadata=meta_pb2.ObjectMeta(name="web-a", namespace="default", labels={"kubernetes.io/service-name": "web"}),
        addressType="IPv4", ports=[discovery_pb2.EndpointSlicePort(name="http", protocol="TCP", port=8080)],
        endpoints=[discovery_pb2.Endpoint(addresses=["10.244.1.3"], nodeName="node-1"),  # unset: ready
                   discovery_pb2.Endpoint(addresses=["10.244.1.2"], conditions=discovery_pb2.EndpointConditions(
                       ready=False, serving=False, terminating=False))])
    headless = core_pb2.Service(metadata=meta_pb2.ObjectMeta(name="db", namespace="default"),
                                spec=core_pb2.ServiceSpec(clusterIP="None", ports=[core_pb2.ServicePort(port=5432)]))
    [sp] = service_ports([svc, headless], [es, es])
    assert (sp.id, sp.node_port, sp.affinity_seconds) == ("default/web:http", 30080, 60)
    assert [(e.ip, e.port, e.ready) for e in sp.endpoints] == [("10.244.1.2", 8080, False), ("10.244.1.3", 8080, True)]
    assert [e.ip for e in sp.usable()] == ["10.244.1.3"]


def test_load_balancer_and_external_ips_enter_the_external_chain() -> None:
    sp = _sp(_ep("10.244.1.2"), node_port=30080, external_ips=("192.0.2.7",), load_balancer_ips=("172.31.5.1",))
    text, chains = _render([sp])
    ext = ext_chain(sp)
    assert ext in chains
    assert (f'-A KUBE-SERVICES -m comment --comment "default/web:http external IP" -d 192.0.2.7/32 -p tcp -m tcp '
            f'--dport 80 -j {ext}') in text
    assert (f'-A KUBE-SERVICES -m comment --comment "default/web:http loadbalancer IP" -d 172.31.5.1/32 -p tcp '
            f'-m tcp --dport 80 -j {ext}') in text
    # a load balancer with endpoints needs no filter rule; without any, its addresses are refused
    assert "KUBE-EXTERNAL-SERVICES -m" not in text
    text, _ = _render([_sp(load_balancer_ips=("172.31.5.1",))])
    assert ('-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no endpoints" -d 172.31.5.1/32 '
            '-p tcp -m tcp --dport 80 -j REJECT') in text


def test_external_traffic_policy_local_keeps_the_client_and_drops_where_no_endpoint_is() -> None:
    sp = _sp(_ep("10.244.1.2"), _ep("10.244.2.2", node="node-2"), load_balancer_ips=("172.31.5.1",),
             external_local=True)
    text, _ = _render([sp])
    ext, local = ext_chain(sp), svl_chain(sp)
    rules = _rules(text, ext)
    assert rules[0].endswith(f"-s 10.244.0.0/16 -j {svc_chain(sp)}")  # pods reach every endpoint
    assert rules[1].endswith("-m addrtype --src-type LOCAL -j KUBE-MARK-MASQ")
    assert rules[2].endswith(f"-m addrtype --src-type LOCAL -j {svc_chain(sp)}")
    assert rules[3] == f"-A {ext} -j {local}" and len(rules) == 4
    assert not any("KUBE-MARK-MASQ" in r for r in _rules(text, local))  # the client's address is kept
    assert "10.244.2.2:8080" not in "".join(_rules(text, local))
    # endpoints only elsewhere: outside traffic is not translated here, and dropped (not refused)
    elsewhere = _sp(_ep("10.244.2.2", node="node-2"), load_balancer_ips=("172.31.5.1",), external_local=True)
    text, chains = _render([elsewhere])
    assert svl_chain(elsewhere) not in chains and len(_rules(text, ext_chain(elsewhere))) == 3
    assert ('-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no local endpoints" '
            '-d 172.31.5.1/32 -p tcp -m tcp --dport 80 -j DROP') in text


def test_source_ranges_admit_only_their_clients() -> None:
    sp = _sp(_ep("10.244.1.2"), load_balancer_ips=("172.31.5.1",), source_ranges=("192.0.2.0/24",))
    text, chains = _render([sp])
    fw = fw_chain(sp)
    assert fw in chains
    assert _rules(text, "KUBE-SERVICES")[1].endswith(f"-d 172.31.5.1/32 -p tcp -m tcp --dport 80 -j {fw}")
    assert [r.split('" ', 1)[1] for r in _rules(text, fw)] == [
        f"-s 192.0.2.0/24 -j {ext_chain(sp)}", f"-s 172.31.5.1/32 -j {ext_chain(sp)}", "-j ACCEPT"]
    assert (f'-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http traffic not accepted by {fw}" '
            '-d 172.31.5.1/32 -p tcp -m tcp --dport 80 -j DROP') in text


def test_service_ports_read_the_load_balancer_status() -> None:
    svc = core_pb2.Service(metadata=meta_pb2.ObjectMeta(name="web", namespace="default"), spec=core_pb2.ServiceSpec(
        clusterIP="10.96.0.20", type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=30999,
        loadBalancerSourceRanges=[" 192.0.2.1/24", "2001:db8::/64"], externalIPs=["192.0.2.9", "2001:db8::9"],
        ports=[core_pb2.ServicePort(name="http", protocol="TCP", port=80, nodePort=30080)]))
    svc.status.loadBalancer.ingress.add(ip="172.31.5.1", ipMode="VIP")
    svc.status.loadBalancer.ingress.add(ip="172.31.5.2", ipMode="Proxy")  # arrives addressed to a node: not ours
    svc.status.loadBalancer.ingress.add(hostname="lb.example.com")
    [sp] = service_ports([svc], [])
    assert sp.load_balancer_ips == ("172.31.5.1",) and sp.external_ips == ("192.0.2.9",)
    assert sp.source_ranges == ("192.0.2.0/24",) and sp.health_check_node_port == 30999 and sp.external_local

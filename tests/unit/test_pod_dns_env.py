"""A pod's resolv.conf by dnsPolicy and dnsConfig (upstream's kubelet DNS configurer) and
the Service environment variables of its containers (upstream's envvars.FromServices)."""

from __future__ import annotations

from pathlib import Path

from kubelet.dns import DNSSettings, parse_resolv_conf, pod_dns_config
from kubelet.envvars import service_env
from kubelet.podconfig import PodPaths, container_config
from protos.kubeling.v1 import core_pb2, meta_pb2


def _pod(namespace: str = "team", **spec: object) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace=namespace, uid="u"),
                        spec=core_pb2.PodSpec(containers=[core_pb2.Container(name="c", image="busybox")],
                                              **spec))  # type: ignore[arg-type]


def _settings(tmp_path: Path) -> DNSSettings:
    host = tmp_path / "resolv.conf"
    host.write_text("# the node's\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0 ndots:2\n")
    return DNSSettings(["10.96.0.10"], "cluster.local", host)


def test_cluster_first_and_fallbacks(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    dns = pod_dns_config(_pod(), settings)
    assert list(dns.servers) == ["10.96.0.10"]
    assert list(dns.searches) == ["team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"]
    assert list(dns.options) == ["ndots:5"]
    host_net = pod_dns_config(_pod(hostNetwork=True), settings)  # ClusterFirst on the host network: the node's
    assert list(host_net.servers) == ["192.0.2.53"] and list(host_net.options) == ["edns0", "ndots:2"]
    assert list(pod_dns_config(_pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), settings).servers) == \
        ["10.96.0.10"]
    assert list(pod_dns_config(_pod(dnsPolicy="Default"), settings).servers) == ["192.0.2.53"]
    no_cluster_dns = DNSSettings([], "cluster.local", settings.resolv_conf)
    assert list(pod_dns_config(_pod(), no_cluster_dns).servers) == ["192.0.2.53"]


def test_dns_config_merges_and_none(tmp_path: Path) -> None:
    config = core_pb2.PodDNSConfig(nameservers=["1.1.1.1", "10.96.0.10", "2.2.2.2", "3.3.3.3"],
                                   searches=["extra.example"],
                                   options=[core_pb2.PodDNSConfigOption(name="ndots", value="2"),
                                            core_pb2.PodDNSConfigOption(name="single-request")])
    dns = pod_dns_config(_pod(dnsConfig=config), _settings(tmp_path))
    assert list(dns.servers) == ["10.96.0.10", "1.1.1.1", "2.2.2.2"]  # deduplicated, at most 3
    assert list(dns.searches)[-1] == "extra.example" and list(dns.options) == ["ndots:2", "single-request"]
    only = pod_dns_config(_pod(dnsPolicy="None", dnsConfig=core_pb2.PodDNSConfig(nameservers=["9.9.9.9"])),
                          _settings(tmp_path))
    assert (list(only.servers), list(only.searches), list(only.options)) == (["9.9.9.9"], [], [])
    assert parse_resolv_conf("domain a.example\nsearch b.example c.example\n").searches == ("b.example", "c.example")


def _svc(name: str, namespace: str, ip: str, *ports: core_pb2.ServicePort) -> core_pb2.Service:
    return core_pb2.Service(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace),
                            spec=core_pb2.ServiceSpec(clusterIP=ip, ports=list(ports)))


SERVICES = [
    _svc("kubernetes", "default", "10.96.0.1", core_pb2.ServicePort(name="https", port=443, protocol="TCP")),
    _svc("redis-primary", "team", "10.96.0.11", core_pb2.ServicePort(name="redis", port=6379, protocol="TCP"),
         core_pb2.ServicePort(name="metrics", port=9121, protocol="TCP")),
    _svc("headless", "team", "None", core_pb2.ServicePort(port=80)),
    _svc("elsewhere", "other", "10.96.0.12", core_pb2.ServicePort(port=80)),
]


def test_service_environment_variables() -> None:
    env = service_env(_pod(), SERVICES)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1" and env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443" and env["KUBERNETES_PORT"] == "tcp://10.96.0.1:443"
    assert env["REDIS_PRIMARY_SERVICE_HOST"] == "10.96.0.11" and env["REDIS_PRIMARY_SERVICE_PORT_METRICS"] == "9121"
    assert env["REDIS_PRIMARY_PORT_6379_TCP"] == "tcp://10.96.0.11:6379"
    assert (env["REDIS_PRIMARY_PORT_6379_TCP_PROTO"], env["REDIS_PRIMARY_PORT_6379_TCP_PORT"],
            env["REDIS_PRIMARY_PORT_6379_TCP_ADDR"]) == ("tcp", "6379", "10.96.0.11")
    assert not any(k.startswith(("HEADLESS_", "ELSEWHERE_")) for k in env)
    off = service_env(_pod(enableServiceLinks=False), SERVICES)
    assert set(off) == {k for k in env if k.startswith("KUBERNETES_")}  # the API's, always


def test_the_containers_own_env_wins(tmp_path: Path) -> None:
    pod = _pod()
    pod.spec.containers[0].env.add(name="KUBERNETES_SERVICE_HOST", value="mine")
    config = container_config(pod, pod.spec.containers[0], init=False, restart_count=0,
                              paths=PodPaths(tmp_path, tmp_path), pod_ip="", host_ip="",
                              service_env=service_env(pod, SERVICES))
    envs = {kv.key: kv.value for kv in config.envs}
    assert envs["KUBERNETES_SERVICE_HOST"] == "mine" and envs["KUBERNETES_SERVICE_PORT"] == "443"

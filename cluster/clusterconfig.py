"""`kubeling up --config cluster.yaml`: a cluster described in a file, as kind's `Cluster`
config (kind.x-k8s.io/v1alpha4) is, committed to repositories and used in CI. Every flag
of `up` that shapes the cluster has a field here; `up`'s flags are read into the same
ClusterConfig, so the file and the flags make the same plans.

    apiVersion: kubeling.io/v1alpha1
    kind: Cluster
    name: dev                               # --name
    hosts: false                            # --hosts
    controlPlane: {etcdMembers: 1, apiservers: 1, nodeMonitorGracePeriodSeconds: 40,
                   defaultUnreachableTolerationSeconds: 300}
    networking: {podSubnet: 10.88.0.0/16, serviceSubnet: 10.96.0.0/16, dnsDomain: cluster.local}
    nodes:                                  # default: one worker
    - name: node-1                          # default node-<i>
      role: control-plane                   # labelled and tainted as kubeadm's; default worker
      labels: {disk: ssd}
      taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
      kubelet: {maxPods: 50}                # KubeletConfiguration's keys, as `python -m kubelet --config`
      extraMounts: [{hostPath: /srv/data, containerPath: /data}]
      extraPortMappings: [{containerPort: 30080, hostPort: 8080, listenAddress: 127.0.0.1}]
    addons: {ingress: true, networkPolicy: true, registry: true}
    registry: {name: kubeling-registry:5000, configDir: /etc/containerd/certs.d}
    tracing: {otlpEndpoint: ""}

Problems are one line naming the file and the field (`cluster.yaml: nodes[1].taints[0].effect:
must be one of NoSchedule, PreferNoSchedule, NoExecute`)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster.plan import SERVICE_CIDR
from cluster.registry import DEFAULT_NAME as DEFAULT_REGISTRY_NAME
from kubelet.config import TAINT_EFFECTS, ConfigError, KubeletConfig

__all__ = ["API_VERSION", "ClusterConfig", "ConfigFileError", "NodeConfig", "PortMapping", "load",
           "CONTROL_PLANE_LABEL", "CONTROL_PLANE_TAINT"]

API_VERSION = "kubeling.io/v1alpha1"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"  # kubeadm's mark-control-plane phase
CONTROL_PLANE_TAINT = f"{CONTROL_PLANE_LABEL}:NoSchedule"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class ConfigFileError(Exception):
    """What is wrong with a cluster config, naming the field."""


@dataclass(frozen=True)
class PortMapping:
    """A host port relayed to a node's port (a NodePort), as kind's extraPortMappings."""

    container_port: int
    host_port: int
    listen_address: str = "127.0.0.1"
    protocol: str = "TCP"


@dataclass
class NodeConfig:
    name: str = ""  # "": node-<i>
    role: str = "worker"
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)  # key[=value]:Effect
    kubelet: dict[str, Any] = field(default_factory=dict)  # KubeletConfiguration's keys
    mounts: dict[str, str] = field(default_factory=dict)  # the node's path -> the machine's
    port_mappings: list[PortMapping] = field(default_factory=list)


@dataclass
class ClusterConfig:
    name: str = ""  # "": the state dir's cluster, else kubeling
    hosts: bool = False
    etcd_members: int = 1
    apiservers: int = 1
    node_monitor_grace_period: float = 40.0
    default_unreachable_toleration_seconds: int = 300
    pod_subnet: str = ""  # "": 10.88.0.0/16 for kubeling, a free 10.K.0.0/16 for another
    service_subnet: str = SERVICE_CIDR
    dns_domain: str = "cluster.local"
    nodes: list[NodeConfig] = field(default_factory=lambda: [NodeConfig()])
    ingress: bool = True
    network_policy: bool = True
    registry: bool = True
    registry_name: str = DEFAULT_REGISTRY_NAME
    registry_config_dir: str = ""
    otlp_endpoint: str = ""

    def node_names(self, prefix: str = "node-") -> list[str]:
        return [n.name or f"{prefix}{i}" for i, n in enumerate(self.nodes, 1)]


class _Reader:
    """Walks the document, each value checked against its field's type and each mapping
    against its known keys."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> ConfigFileError:
        return ConfigFileError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")

    def mapping(self, value: Any, where: str, known: tuple[str, ...]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        for key in value:
            if key not in known:
                near = f" (known: {', '.join(known)})"
                raise self.fail(f"{where}.{key}" if where else str(key), f"unknown field{near}")
        return value

    def typed(self, value: Any, where: str, kind: type, default: Any) -> Any:
        if value is None:
            return default
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(where, f"expected {'a number' if kind in (int, float) else kind.__name__}, "
                                   f"got {value!r}")
        return value

    def cidr(self, value: Any, where: str, default: str, widest: int) -> str:
        text = self.typed(value, where, str, default)
        if not text:
            return text
        try:
            network = ipaddress.ip_network(text, strict=True)
        except ValueError as err:
            raise self.fail(where, str(err)) from None
        if network.version != 4 or network.prefixlen > widest:
            raise self.fail(where, f"{text}: an IPv4 network of /{widest} or wider is needed")
        return text


def _node(reader: _Reader, value: Any, where: str) -> NodeConfig:
    raw = reader.mapping(value, where, ("name", "role", "labels", "taints", "kubelet", "extraMounts",
                                        "extraPortMappings"))
    node = NodeConfig(name=reader.typed(raw.get("name"), f"{where}.name", str, ""),
                      role=reader.typed(raw.get("role"), f"{where}.role", str, "worker"))
    if node.name and (len(node.name) > 63 or not _SUBDOMAIN.match(node.name)):
        raise reader.fail(f"{where}.name", f"{node.name!r}: must be a DNS subdomain of at most 63 characters")
    if node.role not in ("worker", "control-plane"):
        raise reader.fail(f"{where}.role", f"{node.role!r}: must be worker or control-plane")
    for key, label in (reader.typed(raw.get("labels"), f"{where}.labels", dict, {})).items():
        prefix, _, name = str(key).rpartition("/")
        if not isinstance(label, str) or not name or len(name) > 63 or not _LABEL_NAME.match(name) or \
                (prefix and not _SUBDOMAIN.match(prefix)) or len(label) > 63 or not _LABEL_NAME.match(label):
            raise reader.fail(f"{where}.labels.{key}", f"not a valid label ({key!r}: {label!r})")
        node.labels[str(key)] = label
    for i, taint in enumerate(reader.typed(raw.get("taints"), f"{where}.taints", list, [])):
        at = f"{where}.taints[{i}]"
        spec = reader.mapping(taint, at, ("key", "value", "effect"))
        key = reader.typed(spec.get("key"), f"{at}.key", str, "")
        value = reader.typed(spec.get("value"), f"{at}.value", str, "")
        effect = reader.typed(spec.get("effect"), f"{at}.effect", str, "")
        if not key:
            raise reader.fail(f"{at}.key", "required")
        if effect not in TAINT_EFFECTS:
            raise reader.fail(f"{at}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
        node.taints.append(f"{key}={value}:{effect}" if value else f"{key}:{effect}")
    node.kubelet = reader.typed(raw.get("kubelet"), f"{where}.kubelet", dict, {})
    probe = KubeletConfig(node_name=node.name or "probe", apiserver="127.0.0.1:1")
    try:
        probe.apply(node.kubelet)  # unknown keys and wrong types, as the kubelet would refuse them
    except ConfigError as err:
        raise reader.fail(f"{where}.kubelet", str(err)) from None
    for i, mount in enumerate(reader.typed(raw.get("extraMounts"), f"{where}.extraMounts", list, [])):
        at = f"{where}.extraMounts[{i}]"
        spec = reader.mapping(mount, at, ("hostPath", "containerPath"))
        host = reader.typed(spec.get("hostPath"), f"{at}.hostPath", str, "")
        inside = reader.typed(spec.get("containerPath"), f"{at}.containerPath", str, "")
        for name, path in (("hostPath", host), ("containerPath", inside)):
            if not path.startswith("/") or path == "/":
                raise reader.fail(f"{at}.{name}", f"{path!r}: an absolute path other than / is needed")
        if not Path(host).is_dir():
            raise reader.fail(f"{at}.hostPath", f"{host}: no such directory on this machine")
        node.mounts[inside.rstrip("/")] = host.rstrip("/")
    for i, mapping in enumerate(reader.typed(raw.get("extraPortMappings"), f"{where}.extraPortMappings", list, [])):
        at = f"{where}.extraPortMappings[{i}]"
        spec = reader.mapping(mapping, at, ("containerPort", "hostPort", "listenAddress", "protocol"))
        ports = []
        for name in ("containerPort", "hostPort"):
            port = reader.typed(spec.get(name), f"{at}.{name}", int, 0)
            if not 1 <= port <= 65535:
                raise reader.fail(f"{at}.{name}", f"{port}: must be a port, 1-65535")
            ports.append(port)
        listen = reader.typed(spec.get("listenAddress"), f"{at}.listenAddress", str, "127.0.0.1")
        try:
            ipaddress.IPv4Address(listen)
        except ValueError:
            raise reader.fail(f"{at}.listenAddress", f"{listen!r}: an IPv4 address is needed") from None
        protocol = reader.typed(spec.get("protocol"), f"{at}.protocol", str, "TCP")
        if protocol != "TCP":
            raise reader.fail(f"{at}.protocol", f"{protocol!r}: only TCP is relayed (HAProxy)")
        node.port_mappings.append(PortMapping(ports[0], ports[1], listen))
    return node


def parse(document: Any, source: str) -> ClusterConfig:
    reader = _Reader(source)
    raw = reader.mapping(document, "", ("apiVersion", "kind", "name", "hosts", "controlPlane", "networking",
                                        "nodes", "addons", "registry", "tracing"))
    if raw.get("apiVersion") != API_VERSION:
        raise reader.fail("apiVersion", f"must be {API_VERSION}, got {raw.get('apiVersion')!r}")
    if raw.get("kind") != "Cluster":
        raise reader.fail("kind", f"must be Cluster, got {raw.get('kind')!r}")
    config = ClusterConfig(name=reader.typed(raw.get("name"), "name", str, ""),
                           hosts=reader.typed(raw.get("hosts"), "hosts", bool, False))
    plane = reader.mapping(raw.get("controlPlane"), "controlPlane", (
        "etcdMembers", "apiservers", "nodeMonitorGracePeriodSeconds", "defaultUnreachableTolerationSeconds"))
    config.etcd_members = reader.typed(plane.get("etcdMembers"), "controlPlane.etcdMembers", int, 1)
    if config.etcd_members < 1 or config.etcd_members % 2 == 0:
        raise reader.fail("controlPlane.etcdMembers", f"{config.etcd_members}: must be odd (1, 3, 5): an even "
                                                      "count adds no fault tolerance")
    config.apiservers = reader.typed(plane.get("apiservers"), "controlPlane.apiservers", int, 1)
    if config.apiservers < 1:
        raise reader.fail("controlPlane.apiservers", "at least 1")
    config.node_monitor_grace_period = reader.typed(plane.get("nodeMonitorGracePeriodSeconds"),
                                                    "controlPlane.nodeMonitorGracePeriodSeconds", float, 40.0)
    config.default_unreachable_toleration_seconds = reader.typed(
        plane.get("defaultUnreachableTolerationSeconds"), "controlPlane.defaultUnreachableTolerationSeconds", int,
        300)
    if config.node_monitor_grace_period <= 0 or config.default_unreachable_toleration_seconds < 0:
        raise reader.fail("controlPlane", "durations must be positive")
    net = reader.mapping(raw.get("networking"), "networking", ("podSubnet", "serviceSubnet", "dnsDomain"))
    config.pod_subnet = reader.cidr(net.get("podSubnet"), "networking.podSubnet", "", 24)
    config.service_subnet = reader.cidr(net.get("serviceSubnet"), "networking.serviceSubnet", SERVICE_CIDR, 28)
    if config.pod_subnet and ipaddress.ip_network(config.pod_subnet).overlaps(
            ipaddress.ip_network(config.service_subnet)):
        raise reader.fail("networking.serviceSubnet", f"{config.service_subnet} overlaps podSubnet "
                                                      f"{config.pod_subnet}")
    config.dns_domain = reader.typed(net.get("dnsDomain"), "networking.dnsDomain", str, "cluster.local")
    if not _SUBDOMAIN.match(config.dns_domain):
        raise reader.fail("networking.dnsDomain", f"{config.dns_domain!r}: must be a DNS domain")
    if "nodes" in raw:
        config.nodes = [_node(reader, n, f"nodes[{i}]")
                        for i, n in enumerate(reader.typed(raw["nodes"], "nodes", list, []))]
    names = config.node_names()
    for i, name in enumerate(names):
        if name in names[:i]:
            raise reader.fail(f"nodes[{i}].name", f"{name!r} is already the name of nodes[{names.index(name)}]")
    taken: dict[tuple[str, int], str] = {}
    for i, node in enumerate(config.nodes):
        for j, mapping in enumerate(node.port_mappings):
            key, at = (mapping.listen_address, mapping.host_port), f"nodes[{i}].extraPortMappings[{j}]"
            if key in taken:
                raise reader.fail(f"{at}.hostPort", f"{mapping.host_port} on {mapping.listen_address} is "
                                                    f"{taken[key]}'s too")
            taken[key] = at
    addons = reader.mapping(raw.get("addons"), "addons", ("ingress", "networkPolicy", "registry"))
    config.ingress = reader.typed(addons.get("ingress"), "addons.ingress", bool, True)
    config.network_policy = reader.typed(addons.get("networkPolicy"), "addons.networkPolicy", bool, True)
    config.registry = reader.typed(addons.get("registry"), "addons.registry", bool, True)
    registry = reader.mapping(raw.get("registry"), "registry", ("name", "configDir"))
    config.registry_name = reader.typed(registry.get("name"), "registry.name", str, DEFAULT_REGISTRY_NAME)
    config.registry_config_dir = reader.typed(registry.get("configDir"), "registry.configDir", str, "")
    tracing = reader.mapping(raw.get("tracing"), "tracing", ("otlpEndpoint",))
    config.otlp_endpoint = reader.typed(tracing.get("otlpEndpoint"), "tracing.otlpEndpoint", str, "")
    return config


def load(path: Path) -> ClusterConfig:
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigFileError(f"{path}: {err.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{path}: not YAML: {str(err).splitlines()[0]}") from None
    return parse(document, str(path))

"""`kubeling up --config`: the Cluster file read, checked field by field, and turned into
the same plan its flags would make."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from cluster import clusterconfig, commands
from cluster.__main__ import build_parser
from cluster.plan import ClusterPlan, new_plan
from cluster.plan import commands as argv_of

FULL = """\
apiVersion: kubeling.io/v1alpha1
kind: Cluster
name: dev
controlPlane: {etcdMembers: 3, apiservers: 2, nodeMonitorGracePeriodSeconds: 8}
networking: {podSubnet: 10.120.0.0/16, serviceSubnet: 10.121.0.0/24, dnsDomain: dev.local}
nodes:
- role: control-plane
- name: big
  labels: {disk: ssd, example.com/team: a}
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: spot, effect: PreferNoSchedule}]
  kubelet: {maxPods: 50, imageGCHighThresholdPercent: 90}
  extraMounts: [{hostPath: HOST, containerPath: /data}]
  extraPortMappings: [{containerPort: 30080, hostPort: 18080}]
addons: {ingress: false, networkPolicy: false}
registry: {name: registry.dev.local:5000}
"""


def _load(tmp_path: Path, text: str) -> clusterconfig.ClusterConfig:
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace("HOST", str(tmp_path)))
    return clusterconfig.load(path)


def test_a_full_config(tmp_path: Path) -> None:
    config = _load(tmp_path, FULL)
    assert (config.name, config.etcd_members, config.apiservers, config.node_monitor_grace_period) == \
        ("dev", 3, 2, 8.0)
    assert (config.pod_subnet, config.service_subnet, config.dns_domain) == \
        ("10.120.0.0/16", "10.121.0.0/24", "dev.local")
    assert config.node_names() == ["node-1", "big"]
    big = config.nodes[1]
    assert big.taints == ["dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"]
    assert big.mounts == {"/data": str(tmp_path)}
    assert big.port_mappings == [clusterconfig.PortMapping(30080, 18080, "127.0.0.1", "TCP")]
    assert not config.ingress and not config.network_policy and config.registry
    assert config.registry_name == "registry.dev.local:5000"


def test_the_plan_carries_the_nodes_settings(tmp_path: Path) -> None:
    config = _load(tmp_path, FULL)
    plan = new_plan(tmp_path / "state", 2, "node-", "10.120.0.0/16", etcd_members=3, apiservers=2)
    commands._shape(plan, config, "node-")
    assert plan.nodes == ["node-1", "big"]
    assert plan.node_labels == {"node-1": {"node-role.kubernetes.io/control-plane": ""},
                                "big": {"disk": "ssd", "example.com/team": "a"}}
    assert plan.node_taints["node-1"] == ["node-role.kubernetes.io/control-plane:NoSchedule"]
    assert plan.dns_ip == "10.121.0.10" and plan.port_mappings == [["127.0.0.1", 18080, "big", 30080]]
    plan.root.mkdir()
    plan.write_node_files()
    kubelet_file = yaml.safe_load((plan.root / "kubelet-big.yaml").read_text())
    assert kubelet_file["maxPods"] == 50 and kubelet_file["kind"] == "KubeletConfiguration"
    argv = argv_of(plan)
    big = argv["kubelet-big"]
    assert big[big.index("--config") + 1] == str(plan.root / "kubelet-big.yaml")
    assert big[big.index("--register-with-taints") + 1] == "dedicated=gpu:NoSchedule,spot:PreferNoSchedule"
    assert big[big.index("--host-path-mounts") + 1] == f"/data={tmp_path}"
    assert big[big.index("--cluster-domain") + 1] == "dev.local" and "--config" not in argv["kubelet-node-1"]
    assert argv["apiserver-1"][argv["apiserver-1"].index("--service-cluster-ip-range") + 1] == "10.121.0.0/24"
    assert argv["port-mappings"][:2] == ["haproxy", "-f"]
    assert "bind 127.0.0.1:18080\n" in (plan.root / "port-mappings.cfg").read_text()
    plan.save()
    again = ClusterPlan.load(plan.root)
    assert again is not None and again.node_mounts == plan.node_mounts  # cluster.json keeps it all


def test_flags_make_the_same_config(tmp_path: Path) -> None:
    args = build_parser().parse_args(["up", "--nodes", "3", "--etcd-members", "3", "--no-ingress",
                                      "--cluster-cidr", "10.120.0.0/16"])
    from_flags = commands._config_of(args)
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\ncontrolPlane: {etcdMembers: 3}\n"
                    "networking: {podSubnet: 10.120.0.0/16}\nnodes: [{}, {}, {}]\naddons: {ingress: false}\n")
    from_file = commands._config_of(build_parser().parse_args(["up", "--config", str(path)]))
    assert from_file == from_flags


def test_shaping_flags_beside_a_config_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\n")
    args = build_parser().parse_args(["up", "--config", str(path), "--nodes", "3", "--name", "x"])
    with pytest.raises(clusterconfig.ConfigFileError, match="--nodes with --config: set it in"):
        commands._config_of(args)
    args = build_parser().parse_args(["up", "--config", str(path), "--name", "x", "--detach"])
    assert commands._config_of(args).name == "x"  # where and how, not what: allowed


@pytest.mark.parametrize(("text", "line"), [
    ("kind: Cluster\n", "apiVersion: must be kubeling.io/v1alpha1, got None"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nworkers: 3\n", "workers: unknown field"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{role: master}]\n",
     "nodes[0].role: 'master': must be worker or control-plane"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{}, {labels: {disk: 1}}]\n",
     "nodes[1].labels.disk: not a valid label"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{taints: [{key: a, effect: Never}]}]\n",
     "nodes[0].taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{kubelet: {maxPod: 3}}]\n",
     "nodes[0].kubelet: unknown kubelet config key 'maxPod'"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{kubelet: {maxPods: many}}]\n",
     "nodes[0].kubelet: kubelet config maxPods: expected int, got 'many'"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnetworking: {podSubnet: 10.300.0.0/16}\n",
     "networking.podSubnet: '10.300.0.0/16' does not appear to be an IPv4 or IPv6 network"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnetworking: {podSubnet: 10.1.0.0/25}\n",
     "networking.podSubnet: 10.1.0.0/25: an IPv4 network of /24 or wider is needed"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnetworking: {podSubnet: 10.96.0.0/12}\n",
     "networking.serviceSubnet: 10.96.0.0/16 overlaps podSubnet 10.96.0.0/12"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\ncontrolPlane: {etcdMembers: 2}\n",
     "controlPlane.etcdMembers: 2: must be odd"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{name: a}, {name: a}]\n",
     "nodes[1].name: 'a' is already the name of nodes[0]"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{extraMounts: [{hostPath: /no/such/dir, "
     "containerPath: /data}]}]\n", "nodes[0].extraMounts[0].hostPath: /no/such/dir: no such directory"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{extraPortMappings: [{containerPort: 30080, "
     "hostPort: 80, protocol: UDP}]}]\n", "nodes[0].extraPortMappings[0].protocol: 'UDP': only TCP"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nnodes: [{extraPortMappings: [{containerPort: 1, hostPort: "
     "9000}]}, {extraPortMappings: [{containerPort: 2, hostPort: 9000}]}]\n",
     "nodes[1].extraPortMappings[0].hostPort: 9000 on 127.0.0.1 is nodes[0].extraPortMappings[0]'s too"),
    ("apiVersion: kubeling.io/v1alpha1\nkind: Cluster\nhosts: yes please\n", "hosts: expected bool"),
    ("{not yaml", "not YAML"),
])
def test_bad_configs_name_the_field(tmp_path: Path, text: str, line: str) -> None:
    with pytest.raises(clusterconfig.ConfigFileError) as err:
        _load(tmp_path, text)
    message = str(err.value)
    assert message.startswith(str(tmp_path / "cluster.yaml") + ": ") and line in message, message
    assert "\n" not in message


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(clusterconfig.ConfigFileError, match="No such file"):
        clusterconfig.load(tmp_path / "absent.yaml")


def test_parser_keeps_itself_for_defaults() -> None:
    args = build_parser().parse_args(["up"])
    assert isinstance(args.parser, argparse.ArgumentParser)


def test_a_hosts_components_send_spans_to_the_machine(tmp_path: Path) -> None:
    plan = new_plan(tmp_path, 1, "n", "10.88.0.0/16", otlp_endpoint="http://127.0.0.1:4317", hosts=True)
    assert plan.otlp_endpoint_for(in_host=False) == "http://127.0.0.1:4317"
    assert plan.otlp_endpoint_for(in_host=True) == f"http://{plan.api_host}:4317" != "http://127.0.0.1:4317"
    plan.otlp_endpoint = "http://collector.example:4317"
    assert plan.otlp_endpoint_for(in_host=True) == "http://collector.example:4317"

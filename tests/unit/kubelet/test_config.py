"""The kubelet's flags and config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.__main__ import build_parser
from kubelet.agent import bridge_name
from kubelet.config import ConfigError
from kubelet.config import from_command_line as make_config


def test_config_file_then_flags(tmp_path: Path) -> None:
    file = tmp_path / "kubelet.yaml"
    file.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                    "maxPods: 20\nsyncFrequency: 5\nnodeLabels: {zone: a}\nrootDir: /tmp/x\n")
    args = build_parser().parse_args(["--node-name", "n1", "--apiserver", "127.0.0.1:1", "--config", str(file),
                                      "--max-pods", "30", "--node-labels", "disk=ssd"])
    config = make_config(args)
    assert config.max_pods == 30 and config.sync_frequency == 5.0 and config.root_dir == Path("/tmp/x")
    assert config.node_labels == {"zone": "a", "disk": "ssd"} and config.state_dir == Path("/tmp/x/n1")


@pytest.mark.parametrize("text, message", [("maxPods: many\n", "maxPods: expected int"),
                                           ("maxPods: true\n", "maxPods: expected int"),
                                           ("podRoutes: 1\n", "podRoutes: expected bool"),
                                           ("cgroupRoot: pods\n", "cgroupRoot 'pods': expected an absolute"),
                                           ("nodeName2: x\n", "unknown kubelet config key"),
                                           ("nodeLeaseDurationSeconds: 0\n",
                                            "nodeLeaseDurationSeconds must be greater than 0"),
                                           ("nodeStatusUpdateFrequency: -1\n",
                                            r"nodeStatusUpdateFrequency \(--node-status-update-frequency\) -1.0 must"),
                                           ("- a\n", "expected a mapping")])
def test_bad_config_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "kubelet.yaml"
    file.write_text(text)
    args = build_parser().parse_args(["--node-name", "n1", "--apiserver", "a:1", "--config", str(file)])
    with pytest.raises(ConfigError, match=message):
        make_config(args)


def test_cgroup_root_and_pod_routes(tmp_path: Path) -> None:
    base = ["--node-name", "n1", "--apiserver", "a:1"]
    default = make_config(build_parser().parse_args(base))
    assert default.cgroup_root == "" and default.pod_routes is False
    flags = make_config(build_parser().parse_args([*base, "--cgroup-root", "/docker/abc", "--pod-routes"]))
    assert flags.cgroup_root == "/docker/abc" and flags.pod_routes is True
    file = tmp_path / "kubelet.yaml"
    file.write_text("podRoutes: true\ncgroupRoot: /k\n")
    assert make_config(build_parser().parse_args([*base, "--config", str(file)])).pod_routes is True


def test_bridge_names_fit_ifnamsiz() -> None:
    assert bridge_name("node-1") == "kbl-node-1"
    long = bridge_name("a-very-long-node-name.example")
    assert len(long) == 15 and long != bridge_name("a-very-long-node-name.example2")

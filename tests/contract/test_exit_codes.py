"""Every command line as a user meets it (the components through kubeling.app, and
`kubeling`): bad flags or configuration exit 2, a failure at run time exits 1, each with one line that says what."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from apiserver.server import APIServer
from kubeling.netutil import free_port


def _run(*argv: str, timeout: float = 60) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    return done.returncode, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""


@pytest.mark.parametrize("argv, line", [
    (["apiserver", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["apiserver", "--listen", "nowhere"], "argument --listen: expected HOST:PORT"),
    (["scheduler", "--leader-elect", "perhaps"], "argument --leader-elect: expected true or false, got 'perhaps'"),
    (["controllers", "--node-monitor-grace-period", "soon"], "argument --node-monitor-grace-period: invalid float"),
    (["kubelet", "--apiserver", "127.0.0.1:1"], "the following arguments are required: --node-name"),
    (["proxy", "--cluster-cidr", "10.0.0.1/8"], "argument --cluster-cidr: 10.0.0.1/8 has host bits set"),
    (["cri", "--streaming-listen", "loopback"], "argument --streaming-listen: expected HOST:PORT"),
    (["cni", "attach", "ns"], "argument command: invalid choice: 'attach'"),
    (["cluster", "up", "--cluster-cidr", "10.0.0.1/8"], "argument --cluster-cidr: 10.0.0.1/8 has host bits set"),
    (["cluster", "up", "--cluster-cidr", "10.0.0.0/25"], "10.0.0.0/25: an IPv4 network of /24 or wider is needed"),
    (["cluster", "up", "--etcd-members", "2"], "argument --etcd-members: 2: must be odd (1, 3, 5)"),
    (["cluster", "why"], "the following arguments are required: pod"),
    (["cluster", "up", "--name", "Big_Cluster"], "cluster name 'Big_Cluster': must be a DNS label"),
    (["cluster", "up", "--registry-name", "registry"], "expected HOST:PORT or a host name with a dot"),
    (["cluster", "up", "--registry-name", "localhost:5000"], "that name already means another registry"),
    (["cluster", "down", "--name", "x.y"], "cluster name 'x.y': must be a DNS label"),
])
def test_bad_flags_exit_2(argv: list[str], line: str) -> None:
    code, last = _run(*argv)
    assert code == 2 and line in last, (code, last)


def test_bad_configuration_exits_2_naming_what(tmp_path: Path) -> None:
    bad_profile = tmp_path / "scheduler.yaml"
    bad_profile.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                           "profiles:\n- schedulerName: x\n  plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n")
    bad_kubelet = tmp_path / "kubelet.yaml"
    bad_kubelet.write_text("maxPods: many\n")
    bad_policy = tmp_path / "policy.json"
    bad_policy.write_text('{"kind": "Policy", "apiVersion": "v1", "priorities": [{"name": "MostRequestedPriority"}]}')
    cases = [
        (["apiserver", "--tls-cert-file", str(tmp_path / "c.crt")],
         "apiserver: invalid configuration: --tls-cert-file and --tls-private-key-file go together"),
        (["apiserver", "--service-cluster-ip-range", "10.88.0.0/16"],
         "apiserver: invalid configuration: --service-cluster-ip-range 10.88.0.0/16 overlaps --cluster-cidr"),
        (["scheduler"], "scheduler: invalid configuration: --apiserver or --kubeconfig is required"),
        (["scheduler", "--apiserver", "127.0.0.1:1", "--config", str(bad_profile)], "NoSuchPlugin"),
        (["scheduler", "--apiserver", "127.0.0.1:1", "--policy-config-file", str(bad_policy)],
         f"scheduler: invalid configuration: policy file {bad_policy}: priorities[0].weight: priority "
         "MostRequestedPriority should have a positive weight applied to it or it has overflown"),
        (["scheduler", "--policy-config-file", str(tmp_path / "nope.json"), "--print-config"],
         f"scheduler: invalid configuration: missing policy config file {tmp_path / 'nope.json'}"),
        (["scheduler", "--apiserver", "127.0.0.1:1", "--use-legacy-policy-config", "true"],
         "scheduler: invalid configuration: policyConfigFile: Required value: required when "
         "--use-legacy-policy-config is true"),
        (["controllers"], "controller-manager: invalid configuration: --apiserver or --kubeconfig is required"),
        (["kubelet", "--node-name", "n1"], "kubelet-n1: invalid configuration: --apiserver or --kubeconfig is "
                                           "required"),
        (["kubelet", "--node-name", "n1", "--apiserver", "127.0.0.1:1", "--config", str(bad_kubelet)],
         "kubelet-n1: invalid configuration: kubelet config maxPods: expected int, got 'many'"),
        (["proxy", "--apiserver", "127.0.0.1:1"], "kube-proxy: invalid configuration: --node-name is required"),
        (["clusterdns", "--kubeconfig", str(tmp_path / "missing.conf")],
         f"cluster-dns: invalid configuration: --kubeconfig {tmp_path / 'missing.conf'}:"),
        (["cni", "add"], "cni: invalid configuration: a network namespace is required"),
        (["cluster", "up", "--registry-config-dir", str(tmp_path / "mirrors")],
         f"kubeling: --registry-config-dir {tmp_path / 'mirrors'} is not a directory"),
        (["cluster", "why", "p1", "--kubeconfig", str(tmp_path / "missing.conf")],
         f"kubeling why: no kubeconfig at {tmp_path / 'missing.conf'}"),
    ]
    for argv, line in cases:
        code, last = _run(*argv)
        assert code == 2 and line in last, (argv, code, last)
        assert "Traceback" not in last


async def test_a_failure_at_run_time_exits_1_saying_what(apiserver: APIServer, tmp_path: Path) -> None:
    etcd = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, last = await asyncio.to_thread(_run, "apiserver", "--etcd", etcd, "--listen", "127.0.0.1:0",
                                         "--etcd-wait", "1")
    assert code == 1 and last.startswith(f"apiserver: etcd at {etcd} is not reachable after 1s"), (code, last)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:  # the DNS port, already in use
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        code, last = await asyncio.to_thread(_run, "clusterdns", "--apiserver", apiserver.address, "--listen",
                                             f"127.0.0.1:{port}")
    assert code == 1 and last.startswith("cluster-dns: ") and "in use" in last, (code, last)
    code, last = _run("cni", "status", "--conf-dir", str(tmp_path))
    assert code == 1 and last == f"cni: no valid networks found in {tmp_path}", (code, last)
    code, last = _run("cluster", "down", "--state-dir", str(tmp_path))
    assert code == 1 and last == f"kubeling: no cluster is running from {tmp_path}", (code, last)

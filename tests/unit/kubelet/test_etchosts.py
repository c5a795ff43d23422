"""The pod's hostname and managed /etc/hosts, with upstream's cases (kubelet_pods_test.go:
TestGeneratePodHostNameAndDomain, TestTruncatePodHostname, managed hosts file content)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.etchosts import HostnameError, hosts_file_content, pod_hostname_and_domain, write_hosts_file
from kubelet.podconfig import ConfigError, PodPaths, container_config, sandbox_config
from protos.kubeling.v1 import core_pb2


def _pod(name: str = "web-0", hostname: str = "", subdomain: str = "", host_network: bool = False) -> core_pb2.Pod:
    return core_pb2.Pod(metadata={"name": name, "namespace": "shop", "uid": "uid-1"},
                        spec={"hostname": hostname, "subdomain": subdomain, "hostNetwork": host_network,
                              "containers": [{"name": "app", "image": "busybox"}]})


@pytest.mark.parametrize(("name", "hostname", "subdomain", "expected"), [
    ("web-0", "", "", ("web-0", "")),
    ("web-0", "db", "", ("db", "")),
    ("web-0", "db", "backend", ("db", "backend.shop.svc.cluster.local")),
    ("web-0", "", "backend", ("web-0", "backend.shop.svc.cluster.local")),
    # Upstream's truncation cases: 63 characters, then no trailing '-' or '.'.
    ("1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567", "", "",
     ("1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567"[:63], "")),
    ("1234567." * 7 + "123456-.abc", "", "", ("1234567." * 7 + "123456", "")),
    ("1234567.1234567.1234567.1234567.1234567.1234567.1234567.12345678", "", "",
     ("1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567", "")),
])
def test_hostname_and_domain(name: str, hostname: str, subdomain: str, expected: tuple[str, str]) -> None:
    got = pod_hostname_and_domain(_pod(name, hostname, subdomain), "cluster.local")
    assert got == expected
    assert len(got[0]) <= 63 and not got[0].endswith(("-", "."))


def test_invalid_hostname_or_subdomain_is_refused_naming_it() -> None:
    with pytest.raises(HostnameError, match="pod hostname 'Bad_Name'"):
        pod_hostname_and_domain(_pod(hostname="Bad_Name"), "cluster.local")
    with pytest.raises(HostnameError, match="pod subdomain"):
        pod_hostname_and_domain(_pod(subdomain="x" * 64), "cluster.local")


def test_managed_hosts_file() -> None:
    content = hosts_file_content(["10.88.1.7"], "db", "backend.shop.svc.cluster.local")
    assert content.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert content.endswith("10.88.1.7\tdb.backend.shop.svc.cluster.local\tdb\n")
    assert hosts_file_content(["10.88.1.7"], "web-0", "").endswith("10.88.1.7\tweb-0\n")


def test_host_network_gets_the_nodes_hosts(tmp_path: Path) -> None:
    node = tmp_path / "node-hosts"
    node.write_text("127.0.0.1 localhost\n192.0.2.1 node-1\n")
    target = tmp_path / "pod" / "etc-hosts"
    write_hosts_file(target, ["192.0.2.1"], "node-1", "", host_network=True, node_hosts=node)
    assert target.read_text() == "# Kubernetes-managed hosts file (host network).\n" + node.read_text()


def test_sandbox_and_container_configs(tmp_path: Path) -> None:
    paths = PodPaths(tmp_path / "logs", tmp_path / "pods")
    long_name = "a" * 62 + "-bc"  # a valid pod name, too long for a hostname
    pod = _pod(long_name)
    assert sandbox_config(pod, paths, 0).hostname == "a" * 62
    assert sandbox_config(_pod(host_network=True), paths, 0).hostname == ""  # the runtime uses the node's
    with pytest.raises(ConfigError, match="not a valid DNS label"):
        sandbox_config(_pod(hostname="No"), paths, 0)
    sub = _pod(hostname="db", subdomain="backend")
    config = container_config(sub, sub.spec.containers[0], init=False, restart_count=0, paths=paths,
                              pod_ip="10.88.1.7", host_ip="192.0.2.1")
    [hosts] = [m for m in config.mounts if m.container_path == "/etc/hosts"]
    assert Path(hosts.host_path).read_text().endswith("10.88.1.7\tdb.backend.shop.svc.cluster.local\tdb\n")
    # A volume mounted at /etc/hosts wins over the managed file.
    sub.spec.volumes.add(name="h", emptyDir={})
    sub.spec.containers[0].volumeMounts.add(name="h", mountPath="/etc/hosts")
    config = container_config(sub, sub.spec.containers[0], init=False, restart_count=0, paths=paths,
                              pod_ip="10.88.1.7", host_ip="192.0.2.1")
    assert [m.host_path for m in config.mounts if m.container_path == "/etc/hosts"] == \
        [str(paths.volume_dir(sub, "kubernetes.io~empty-dir", "h"))]

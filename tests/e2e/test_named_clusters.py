"""Named clusters and cluster config files. Two clusters side by side, as `kind create
cluster --name`: the cluster called kubeling
on the machine's own network namespace and another, named, whose nodes are hosts of their
own; each with a Deployment behind a Service reached by its DNS name; `down` of one leaves
the other's rules, pods and Services working; contexts merged into the user's kubeconfig
and taken out again; a name or pod CIDR already in use refused in one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from cluster.hosts import netns_name
from cluster.plan import ClusterPlan
from cni import netns
from kubeling.netutil import free_port
from tests.e2e.images import docker_archive, one_per_node
from tests.e2e.kubectl import Kubectl
from tests.wait import until

NAME = f"e2e-{os.getpid() % 1000}"
CIDR = f"10.{160 + os.getpid() % 5}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


async def _serve(kubectl: Kubectl, context: str, text: str) -> None:
    """A Deployment of two answering `text`, a Service before it, and a client pod."""
    await kubectl("--context", context, "create", "deployment", "web", "--image=busybox", "--replicas=2", "--",
                  "sh", "-c", f"trap 'exit 0' TERM; echo {text} > /tmp/index.html; httpd -f -p 8080 -h /tmp & wait")
    await kubectl("--context", context, "expose", "deployment", "web", "--port=80", "--target-port=8080")
    await kubectl("--context", context, "run", "client", "--image=busybox", "--", "sleep", "3600")
    await kubectl("--context", context, "rollout", "status", "deployment/web", "--timeout=90s")
    await kubectl("--context", context, "wait", "--for=condition=Ready", "pod/client", "--timeout=60s")


async def _fetch(kubectl: Kubectl, context: str) -> set[str]:
    """What the Service answers by its name (asked until it answers: DNS and kube-proxy's
    rules follow the endpoints within a second or two)."""
    seen: set[str] = set()

    async def answers() -> set[str]:
        code, out, _ = await kubectl("--context", context, "exec", "client", "--", "timeout", "3", "wget", "-qO-",
                                     "http://web.default.svc.cluster.local", ok=False)
        if code == 0:
            seen.add(out.strip())
        return seen
    await until(answers, f"the Service web of {context}", timeout=60, interval=0.2, check=bool)
    return seen


def _push(archive: Path, reference: str) -> None:
    """As `docker push` to a loopback registry: plain HTTP, no credentials (skopeo, Docker's
    image library)."""
    subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"docker-archive:{archive}",
                    f"docker://{reference}"], check=True, capture_output=True, timeout=60)




async def _local_registry(kubectl: Kubectl, context: str, plan: ClusterPlan, tmp_path: Path) -> None:
    """An image built here, pushed to the cluster's registry at localhost:PORT, pulled by a
    Deployment on both hosts (which reach the registry on the underlay); the registry's
    other name; `:latest` pulled again for each new pod (imagePullPolicy Always, the default
    for it) where `:1.0` is not."""
    port = plan.registry_port
    archive = tmp_path / "app.tar"
    docker_archive(archive, "app:1.0", {"msg": "from-the-registry\n"})
    await asyncio.to_thread(_push, archive, f"localhost:{port}/app:1.0")
    await kubectl("--context", context, "apply", "-f", "-",
                  stdin=one_per_node("app", f"localhost:{port}/app:1.0"))
    await kubectl("--context", context, "rollout", "status", "deployment/app", "--timeout=90s")
    _, out, _ = await kubectl("--context", context, "get", "pods", "-l", "app=app", "-o",
                              "jsonpath={.items[*].spec.nodeName}")
    assert sorted(out.split()) == sorted(plan.nodes)
    _, out, _ = await kubectl("--context", context, "logs", "deployment/app")
    assert out.strip() == "from-the-registry"

    async def run(pod: str, image: str) -> str:
        await kubectl("--context", context, "run", pod, f"--image={image}", "--restart=Never",
                      f'--overrides={{"spec": {{"nodeName": "{plan.nodes[0]}"}}}}', "--command", "--",
                      "/bin/busybox", "cat", "/msg")
        await kubectl("--context", context, "wait", "--for=jsonpath={.status.phase}=Succeeded", f"pod/{pod}",
                      "--timeout=60s")
        _, out, _ = await kubectl("--context", context, "logs", pod)
        return out.strip()

    for version in ("v1", "v2"):
        docker_archive(archive, "app:latest", {"msg": f"{version}\n"})
        await asyncio.to_thread(_push, archive, f"localhost:{port}/app:latest")
        assert await run(f"latest-{version}", f"{plan.registry_name}/app:latest") == version


def _http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as response:
        return str(response.read().decode().strip())


def _contexts() -> list[str]:
    kubectl = Kubectl(Path(os.environ["KUBECONFIG"]))
    done = subprocess.run([kubectl.binary, "config", "get-contexts", "-o", "name"], env=kubectl.env,
                          capture_output=True, text=True)
    return sorted(done.stdout.split())


async def test_two_named_clusters_side_by_side(tmp_path: Path) -> None:
    kubectl = Kubectl(Path(os.environ["KUBECONFIG"]))
    netns_before = set(netns.list_names())
    first, second = tmp_path / "first", tmp_path / "second"
    prefix = f"nc{os.getpid() % 1000}-"
    started = _kubeling("up", "--nodes", "1", "--detach", "--state-dir", str(first), "--node-prefix", prefix,
                        "--cluster-cidr", CIDR)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        started = _kubeling("up", "--name", NAME, "--nodes", "2", "--detach", "--state-dir", str(second))
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"kubeling down --state-dir {second}" in started.stdout
        plan = ClusterPlan.load(second)
        assert plan is not None and plan.hosts and plan.cluster_cidr != CIDR  # a free /16 of its own
        assert set(netns.list_names()) >= {netns_name(n, NAME) for n in plan.nodes}

        # Bad input: the name already running, a pod CIDR another cluster's pods use.
        taken = _kubeling("up", "--name", NAME, "--state-dir", str(tmp_path / "third"))
        assert taken.returncode == 2 and f"a cluster named {NAME} is already running from {second}" in taken.stderr
        overlapping = _kubeling("up", "--name", "other", "--state-dir", str(tmp_path / "third"),
                                "--cluster-cidr", CIDR)
        assert overlapping.returncode == 2, overlapping.stderr
        assert f"--cluster-cidr {CIDR} overlaps the pods of the running cluster kubeling" in overlapping.stderr
        assert not (tmp_path / "third").exists()  # nothing half-made

        listed = _kubeling("get", "clusters")
        rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
        assert rows["kubeling"][1] == "Running" and rows[NAME][1:3] == ["Running", "2"], listed.stdout
        assert _contexts() == sorted(["kubeling-kubeling", f"kubeling-{NAME}"])

        await asyncio.gather(_serve(kubectl, "kubeling-kubeling", "from-first"),
                             _serve(kubectl, f"kubeling-{NAME}", "from-second"))
        assert await _fetch(kubectl, "kubeling-kubeling") == {"from-first"}
        assert await _fetch(kubectl, f"kubeling-{NAME}") == {"from-second"}

        stopped = _kubeling("down", "--state-dir", str(first))
        assert stopped.returncode == 0, stopped.stderr
        assert _contexts() == [f"kubeling-{NAME}"]
        # the second's rules, pods and Services untouched
        rules = subprocess.run(["ip", "netns", "exec", netns_name(plan.nodes[0], NAME), "iptables", "-t", "nat",
                                "-S", "KUBE-SERVICES"], capture_output=True, text=True)
        assert "default/web" in rules.stdout, rules
        assert await _fetch(kubectl, f"kubeling-{NAME}") == {"from-second"}
        listed = _kubeling("get", "clusters")
        rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
        assert rows["kubeling"][1] == "Stopped" and rows[NAME][1] == "Running", listed.stdout

        await _local_registry(kubectl, f"kubeling-{NAME}", plan, tmp_path)

        stopped = _kubeling("down", "--name", NAME)
        assert stopped.returncode == 0, stopped.stderr
        assert _contexts() == []
        assert set(netns.list_names()) == netns_before
        bridges = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True)
        assert f"kbl-{prefix}" not in bridges.stdout
    finally:
        for state in (first, second):
            plan = ClusterPlan.load(state)
            if plan is not None and plan.supervisor_pid:
                _kubeling("down", "--state-dir", str(state))


_CONFIG = """\
apiVersion: kubeling.io/v1alpha1
kind: Cluster
name: NAME
nodes:
- role: control-plane
- labels: {disk: ssd}
  extraPortMappings: [{containerPort: NODEPORT, hostPort: HOSTPORT}]
- extraMounts: [{hostPath: DATA, containerPath: /data}]
addons: {registry: false}
"""
_WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: busybox
        command: [sh, -c, "echo from-a-mapped-port > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080, nodePort: NODEPORT}]
---
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  nodeName: NODE
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: busybox, command: [sh, -c, "cat /host/in.txt; echo written > /host/out.txt"],
     volumeMounts: [{name: data, mountPath: /host}]}
  volumes: [{name: data, hostPath: {path: /data/pod, type: Directory}}]
"""


async def test_a_cluster_from_a_config_file(tmp_path: Path) -> None:
    """Three nodes from a file: a control-plane one (labelled and tainted: no workload lands
    there), a port mapping from this machine to a NodePort, a mount a hostPath pod uses."""
    name, node_port, host_port = f"cfg-{os.getpid() % 1000}", 30000 + os.getpid() % 2000, free_port()
    data = tmp_path / "data"
    (data / "pod").mkdir(parents=True)
    (data / "pod" / "in.txt").write_text("from-the-machine\n")
    config = tmp_path / "cluster.yaml"
    config.write_text(_CONFIG.replace("NAME", name).replace("NODEPORT", str(node_port))
                      .replace("HOSTPORT", str(host_port)).replace("DATA", str(data)))
    bad = tmp_path / "bad.yaml"
    bad.write_text(_CONFIG.replace("addons:", "addon:"))
    refused = _kubeling("up", "--config", str(bad), "--state-dir", str(tmp_path / "never"))
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert f"{bad}: addon: unknown field" in refused.stderr and not (tmp_path / "never").exists()

    state = tmp_path / "state"
    started = _kubeling("up", "--config", str(config), "--detach", "--state-dir", str(state))
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        plan = ClusterPlan.load(state)
        assert plan is not None and plan.name == name and len(plan.nodes) == 3
        control, worker, mounted = plan.nodes
        # the same host port again, by another cluster: one line, nothing made
        clash = tmp_path / "clash.yaml"
        clash.write_text(_CONFIG.replace("NAME", "clash").replace("NODEPORT", str(node_port))
                         .replace("HOSTPORT", str(host_port)).replace("DATA", str(data)))
        again = _kubeling("up", "--config", str(clash), "--state-dir", str(tmp_path / "clash"))
        assert again.returncode == 2, again.stderr
        assert f"host port 127.0.0.1:{host_port} is mapped by the running cluster {name}" in again.stderr
        assert not (tmp_path / "clash").exists()

        kubectl = Kubectl(state / "kubeconfig")
        _, out, _ = await kubectl("get", "node", control, "-o", "jsonpath={.metadata.labels}{.spec.taints}")
        assert "node-role.kubernetes.io/control-plane" in out and "NoSchedule" in out
        _, out, _ = await kubectl("get", "nodes", "-l", "disk=ssd", "-o", "name")
        assert out.split() == [f"node/{worker}"]
        await kubectl("apply", "-f", "-", stdin=_WEB.replace("NODEPORT", str(node_port)).replace("NODE", mounted))
        await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        _, out, _ = await kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.nodeName}")
        assert control not in out.split() and set(out.split()) <= {worker, mounted}
        answer = await until(lambda: asyncio.to_thread(_http_get, f"http://127.0.0.1:{host_port}/index.html"),
                             "the mapped port's answer", 60, interval=0.3, retry_on=(OSError,))
        assert answer == "from-a-mapped-port"
        await kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/reader", "--timeout=60s")
        _, out, _ = await kubectl("logs", "reader")
        assert out.strip() == "from-the-machine" and (data / "pod" / "out.txt").read_text() == "written\n"
    finally:
        stopped = _kubeling("down", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stderr

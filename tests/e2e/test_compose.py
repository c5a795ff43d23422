"""docker-compose for real (deploy/): the image built (`deploy/build-image.sh`, as `make
image`), the topology up under a Docker engine, used with the real kubectl, its faults
survived, and nothing left on the host after `down -v`.

Jaeger's image cannot be pulled where no registry is reachable: the OTLP override
(deploy/docker-compose.otlp.yml, kubeling's own receiver with Jaeger's query API) stands
in, unless KUBELING_JAEGER=1 says Jaeger's image is available. Either way the trace is
read through Jaeger's query API. The tests of this module run in order on one cluster.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from bench.dockerengine import DockerEngine, docker_engine
from kubeling.netutil import free_port
from tests.e2e.kubectl import Kubectl
from tests.wait import until

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "kubeling:test"


@dataclass
class Compose:
    engine: DockerEngine
    project: str
    files: list[str]
    env: dict[str, str]
    rest: str  # 127.0.0.1:PORT
    traces: str
    kubeconfig: Path
    ready_seconds: float = 0.0

    def __call__(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["docker-compose", "-p", self.project, *(x for f in self.files for x in ("-f", f)), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: {done.stdout}{done.stderr}")
        return done

    def container(self, service: str) -> str:
        return self("ps", "-q", service).stdout.strip()

    def hostname(self, service: str) -> str:
        return self.engine.run("inspect", "-f", "{{.Config.Hostname}}", self.container(service)).stdout.strip()


def _host_state() -> dict[str, Any]:
    """What a deployment could leave on the host."""
    def out(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    cgroups = {str(p) for p in Path("/sys/fs/cgroup/memory").rglob("*") if p.is_dir()}
    return {"netns": sorted(out("ip", "netns", "list").split()),
            "links": sorted(line.split(":")[1].strip().split("@")[0] for line in out("ip", "-o", "link").splitlines()),
            "mounts": sorted(line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()),
            "iptables": out("iptables-save", "-t", "filter") + out("iptables-save", "-t", "nat"),
            "cgroups": cgroups}


def _without_counters(rules: str) -> list[str]:
    return sorted(line for line in rules.splitlines() if not line.startswith(("#", ":")))


@pytest.fixture(scope="module")
def compose() -> Iterator[Compose]:
    work = Path(tempfile.mkdtemp(prefix="kubeling-compose-"))
    engine = docker_engine(work)
    try:
        # DOCKER_CONFIG: the build's client state (BuildKit's .buildNodeID) in the work dir, not ~/.docker
        subprocess.run([str(ROOT / "deploy" / "build-image.sh")], check=True, timeout=1800,
                       env={**os.environ, "IMAGE": IMAGE, "DOCKER": engine.docker,
                            "DOCKER_CONFIG": str(work / "docker-config")})
        before = _host_state()
        rest, api, traces = free_port(), free_port(), free_port()
        env = {**os.environ, "KUBELING_IMAGE": IMAGE, "KUBELING_API_PORT": str(api),
               "KUBELING_REST_PORT": str(rest), "KUBELING_TRACES_PORT": str(traces)}
        files = [str(ROOT / "deploy" / "docker-compose.yml")]
        if os.environ.get("KUBELING_JAEGER") != "1":
            files.append(str(ROOT / "deploy" / "docker-compose.otlp.yml"))
        cluster = Compose(engine, f"kbtest{os.getpid()}", files, env, f"127.0.0.1:{rest}", f"127.0.0.1:{traces}",
                          work / "kubeconfig")
        try:
            start = time.monotonic()
            cluster("up", "-d")
            # The admin's kubeconfig, as the compose file's header says to get it.
            admin = cluster("exec", "-T", "apiserver", "cat", "/etc/kubeling/admin.conf").stdout
            fd = os.open(cluster.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(admin)
            _wait_nodes_ready(cluster)
            cluster.ready_seconds = time.monotonic() - start
            yield cluster
        finally:
            down = cluster("down", "-v", "--remove-orphans", check=False)
            after = _host_state()
            assert down.returncode == 0, down.stderr
            assert after["netns"] == before["netns"] and after["links"] == before["links"]
            assert after["mounts"] == before["mounts"]
            assert _without_counters(after["iptables"]) == _without_counters(before["iptables"])
            # The engine's own parent cgroup may appear with its first container (and goes
            # with an engine started here); nothing may stay under it.
            new = after["cgroups"] - before["cgroups"] - {"/sys/fs/cgroup/memory/docker"}
            assert not new, sorted(new)
    finally:
        engine.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


def _wait_nodes_ready(cluster: Compose, timeout: float = 120) -> None:
    kubectl = _kubectl(cluster.kubeconfig)
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run([*kubectl, "get", "nodes", "-o", "json"], capture_output=True, text=True)
        if out.returncode == 0:
            nodes = json.loads(out.stdout)["items"]
            ready = [n for n in nodes if any(c["type"] == "Ready" and c["status"] == "True"
                                             for c in n["status"].get("conditions", []))]
            if len(ready) == 2:
                return
        assert time.monotonic() < deadline, f"2 nodes not Ready after {timeout}s: {out.stdout}{out.stderr}"
        time.sleep(0.2)


def _kubectl(kubeconfig: Path) -> list[str]:
    """kubectl on the cluster, its discovery cache beside the kubeconfig (not in the real
    ~/.kube, as Kubectl keeps it: a clean-clone run found one left there)."""
    from tests.e2e.kubectl import kubectl_binary
    return [kubectl_binary(), "--kubeconfig", str(kubeconfig), "--cache-dir", str(kubeconfig.parent / "cache")]


@pytest.fixture
def kubectl(compose: Compose) -> Kubectl:
    return Kubectl(compose.kubeconfig)


async def _run_pod(kubectl: Kubectl, name: str, node: str = "", *command: str) -> dict[str, Any]:
    args = ["run", name, "--image=busybox", "--restart=Never"]
    if node:
        args.append(f'--overrides={{"spec": {{"nodeName": "{node}"}}}}')
    await kubectl(*args, "--command", "--", *(command or ("sleep", "3600")))
    await kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=90s", timeout=120)
    _, out, _ = await kubectl("get", "pod", name, "-o", "json")
    pod: dict[str, Any] = json.loads(out)
    return pod


async def test_two_nodes_ready_and_the_image(compose: Compose) -> None:
    size = int(compose.engine.run("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout)
    print(f"compose: 2 nodes Ready {compose.ready_seconds:.1f}s after `up -d`; image {size / 1e6:.0f} MB")
    # Multi-stage: no compiler, no pip, no pip or apt caches in the runtime image.
    leftovers = compose.engine.run(
        "run", "--rm", "--network", "none", "--entrypoint", "sh", IMAGE, "-c",
        "for p in gcc cc pip pip3; do command -v $p; done;"
        " find /root/.cache /var/lib/apt/lists -mindepth 1 2>/dev/null; true")
    assert leftovers.stdout == "", leftovers.stdout


async def test_the_api_is_secured(compose: Compose) -> None:
    """The published API serves TLS from the cluster CA; without credentials only what
    anonymous users may ask (upstream's public-info-viewer)."""
    config = yaml.safe_load(compose.kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    assert config["clusters"][0]["cluster"]["server"] == f"https://{compose.rest}"
    ctx = ssl.create_default_context(cadata=ca)
    host, _, port = compose.rest.rpartition(":")
    for path, wanted in (("/api/v1/namespaces/default/pods", 403), ("/readyz", 200)):
        conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
        conn.request("GET", path)
        assert conn.getresponse().status == wanted, path
        conn.close()


async def test_pods_on_two_nodes_reach_each_other_and_nothing_else(compose: Compose, kubectl: Kubectl) -> None:
    server = await _run_pod(kubectl, "web", "node-1", "sh", "-c",
                            "echo hello-from-node-1 > /tmp/index.html; exec httpd -f -p 8080 -h /tmp")
    await _run_pod(kubectl, "client", "node-2")
    ip = server["status"]["podIP"]
    _, out, _ = await kubectl("exec", "client", "--", "sh", "-c", f"timeout 10 wget -qO- http://{ip}:8080/")
    assert out.strip() == "hello-from-node-1"
    # Pods have no way out of the cluster: no route to anything but the pod network.
    code, _, err = await kubectl("exec", "client", "--", "sh", "-c", "timeout 5 wget -qO- http://192.0.2.1/",
                                 ok=False)
    assert code != 0 and "unreachable" in err.lower(), err
    await kubectl("delete", "pod", "web", "client", "--grace-period=1", "--wait=true", timeout=120)


async def test_a_service_by_name_from_the_other_node(compose: Compose, kubectl: Kubectl) -> None:
    """kube-proxy in each kubelet's namespace and the cluster DNS service: a Service's name
    resolved and its ClusterIP reached from a pod on the other node."""
    await _run_pod(kubectl, "named", "node-1", "sh", "-c",
                   "echo hello-by-name > /tmp/index.html; exec httpd -f -p 8080 -h /tmp")
    await kubectl("expose", "pod", "named", "--name=named-svc", "--port=80", "--target-port=8080")
    await _run_pod(kubectl, "asker", "node-2")
    _, out, _ = await kubectl("exec", "asker", "--", "sh", "-c",
                              "for i in $(seq 60); do timeout 3 wget -qO- http://named-svc && exit 0; sleep 1; done; "
                              "exit 1", timeout=120)
    assert out.strip() == "hello-by-name"
    await kubectl("delete", "service", "named-svc")
    await kubectl("delete", "pod", "named", "asker", "--grace-period=1", "--wait=true", timeout=120)


async def test_an_ingress_through_the_ingress_controller(compose: Compose, kubectl: Kubectl) -> None:
    """The ingress controller in kubelet-1's namespace (HAProxy on 172.28.0.11:8080) with
    the class the ingress-addon one-shot installed: an Ingress naming no class gets it, is
    served and reached from this machine by its host; its status names the address."""
    await _run_pod(kubectl, "site", "node-2", "sh", "-c",
                   "echo hello-through-ingress > /tmp/index.html; exec httpd -f -p 8080 -h /tmp")
    await kubectl("expose", "pod", "site", "--port=80", "--target-port=8080")
    await kubectl("create", "ingress", "site", "--rule=site.compose/*=site:80")

    def fetch() -> str:
        conn = http.client.HTTPConnection("172.28.0.11", 8080, timeout=3)
        try:
            conn.request("GET", "/", headers={"Host": "site.compose"})
            reply = conn.getresponse()
            return reply.read().decode().strip() if reply.status == 200 else ""
        finally:
            conn.close()

    try:
        await until(lambda: asyncio.to_thread(fetch), "the site through the ingress", 90, interval=0.5,
                    check=lambda text: text == "hello-through-ingress", retry_on=(OSError,))
    except AssertionError as err:
        logs = compose("logs", "--tail", "40", "ingress-controller", "ingress-addon", check=False)
        raise AssertionError(f"{err}\n{logs.stdout}{logs.stderr}") from None
    # the DefaultIngressClass admission plugin gave it the default class (compose's
    # `--enable-admission-plugins NodeRestriction` adds to the defaults, as upstream's)
    _, out, _ = await kubectl("get", "ingress", "site", "-o", "jsonpath={.spec.ingressClassName}|"
                                                          "{.status.loadBalancer.ingress[0].ip}")
    assert out == "kubeling|172.28.0.11", out
    await kubectl("delete", "ingress", "site")
    await kubectl("delete", "service", "site")
    await kubectl("delete", "pod", "site", "--grace-period=1", "--wait=true", timeout=120)


async def test_kubectl_runs_a_pod_gets_its_logs_deletes_it(compose: Compose, kubectl: Kubectl) -> None:
    await _run_pod(kubectl, "logger", "", "sh", "-c", "echo line-one; echo line-two; exec sleep 3600")
    _, out, _ = await kubectl("logs", "logger")
    assert out.splitlines() == ["line-one", "line-two"]
    await kubectl("delete", "pod", "logger", "--grace-period=1", "--wait=true", timeout=120)
    _, out, _ = await kubectl("get", "pods", "-o", "name")
    assert "logger" not in out


async def test_a_deployment_rolls_out_and_is_collected(compose: Compose, kubectl: Kubectl) -> None:
    """The controller manager service, on its own credentials: a Deployment's pods made,
    and removed with it by the garbage collector."""
    await kubectl("create", "deployment", "web", "--image=busybox", "--replicas=2", "--", "sh", "-c",
                  "trap 'exit 0' TERM; while true; do sleep 1; done")
    _, out, _ = await kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    assert 'deployment "web" successfully rolled out' in out
    await kubectl("delete", "deployment", "web")
    deadline = asyncio.get_running_loop().time() + 90
    while True:
        _, out, _ = await kubectl("get", "replicasets,pods", "-l", "app=web", "-o", "name")
        if not out.strip():
            break
        assert asyncio.get_running_loop().time() < deadline, out
        await asyncio.sleep(1)


async def test_a_pod_start_is_one_trace_in_the_query_api(compose: Compose, kubectl: Kubectl) -> None:
    pod = await _run_pod(kubectl, "traced")
    trace_id = pod["metadata"]["annotations"]["kubeling.io/traceparent"].split("-")[1]
    wanted = {"apiserver", "scheduler", f"kubelet-{pod['spec']['nodeName']}"}
    operations = {"scheduling cycle", "syncPod", "/runtime.v1.RuntimeService/RunPodSandbox"}
    services: set[str] = set()
    names: set[str] = set()
    async with aiohttp.ClientSession() as http:
        # the components export in batches: a kubelet's client spans may arrive before the
        # syncPod span around them ends and is sent
        async with asyncio.timeout(60):
            while not (wanted <= services and operations <= names):
                async with http.get(f"http://{compose.traces}/api/traces", params={"service": "apiserver",
                                                                                   "limit": "1000"}) as r:
                    traces = (await r.json())["data"] or []
                ours = [t for t in traces if t["traceID"] == trace_id]
                services = {p["serviceName"] for t in ours for p in t["processes"].values()}
                names = {s["operationName"] for t in ours for s in t["spans"]}
                if not (wanted <= services and operations <= names):
                    await asyncio.sleep(0.5)
    assert len(ours) == 1 and operations <= names, names
    await kubectl("delete", "pod", "traced", "--grace-period=1", "--wait=true", timeout=120)


async def test_the_other_scheduler_takes_over(compose: Compose, kubectl: Kubectl) -> None:
    def holder() -> str:
        out = subprocess.run([*_kubectl(compose.kubeconfig), "get", "lease", "-n",
                              "kube-system", "kube-scheduler", "-o", "jsonpath={.spec.holderIdentity}"],
                             capture_output=True, text=True)
        return out.stdout.split("_")[0] if out.returncode == 0 else ""

    hosts = {compose.hostname(s): s for s in ("scheduler-1", "scheduler-2")}
    deadline = time.monotonic() + 60
    while holder() not in hosts:
        assert time.monotonic() < deadline, "no scheduler holds the lease"
        await asyncio.sleep(0.5)
    leader = hosts[holder()]
    compose("kill", leader)
    other = next(s for s in hosts.values() if s != leader)
    deadline = time.monotonic() + 60  # the lease runs out first (15 s)
    while hosts.get(holder()) != other:
        assert time.monotonic() < deadline, f"{other} did not take the lease"
        await asyncio.sleep(0.5)
    await _run_pod(kubectl, "after-failover")
    compose("start", leader)
    await kubectl("delete", "pod", "after-failover", "--grace-period=1", "--wait=true", timeout=120)


async def test_apiserver_restart_loses_nothing(compose: Compose, kubectl: Kubectl) -> None:
    kept = await _run_pod(kubectl, "kept")
    compose("restart", "apiserver")
    async with asyncio.timeout(60):
        while (await kubectl("get", "--raw", "/readyz", ok=False))[0] != 0:
            await asyncio.sleep(0.5)
    _, out, _ = await kubectl("get", "pod", "kept", "-o", "json")
    again = json.loads(out)
    assert again["metadata"]["uid"] == kept["metadata"]["uid"] and again["status"]["phase"] == "Running"
    await _run_pod(kubectl, "after-restart")  # scheduling and the kubelets found the apiserver again
    await kubectl("delete", "pod", "kept", "after-restart", "--grace-period=1", "--wait=true", timeout=120)

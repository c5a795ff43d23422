"""`kubeling up --detach` / `status` / `down` as a user runs them: real processes,
a component killed and brought back, data kept across down and up, nothing left."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cluster.plan import ClusterPlan
from cluster.processes import alive
from cni import netns
from kubelet.agent import bridge_name
from kubeling import errors
from kubeling.client import Client
from kubeling.netutil import free_port
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.images import docker_archive
from tests.e2e.kubectl import kubectl_binary
from tests.wait import until

CIDR = f"10.{170 + os.getpid() % 5}.0.0/16"
_CLAIM_AND_POD = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: keeper}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "test -f /data/f || echo kept > /data/f; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
"""


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _pod(name: str, node: str, *command: str) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                        spec=core_pb2.PodSpec(nodeName=node, terminationGracePeriodSeconds=1,
                                              restartPolicy="Never" if command[0] == "sh" else "Always",
                                              containers=[core_pb2.Container(
                                                  name="main", image="busybox", imagePullPolicy="IfNotPresent",
                                                  command=list(command))]))


async def _wait(client: Client, name: str, predicate: Any, timeout: float = 90) -> Any:
    return await until(lambda: client.pods.get(name, "default"), f"pod {name}", timeout=timeout, interval=0.2,
                       check=predicate)


def _http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as response:
        return response.read().decode().strip()


def _secured(plan: ClusterPlan, kubelet_port: int) -> None:
    """What `up` runs is secured: without credentials, the API answers only what
    anonymous users may ask (403 beyond), etcd and the kubelets' endpoints nothing."""
    root = plan.pki
    ca = ssl.create_default_context(cafile=str(root / "ca.crt"))
    host, _, port = plan.rest.rpartition(":")
    for path, wanted in (("/api/v1/namespaces/default/pods", 403), ("/healthz", 200), ("/metrics", 403)):
        conn = http.client.HTTPSConnection(host, int(port), context=ca, timeout=10)
        conn.request("GET", path)
        assert conn.getresponse().status == wanted, path
        conn.close()
    with pytest.raises(ssl.SSLError):  # etcd takes only clients with a certificate of the cluster CA
        with socket.create_connection(("127.0.0.1", plan.etcd_port), timeout=5) as raw, \
                ca.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            tls.recv(100)
    conn = http.client.HTTPSConnection(plan.api_host, kubelet_port, context=ca, timeout=10)  # the machine's address
    conn.request("GET", "/containerLogs/default/server/main")  # the apiserver's certificate only
    assert conn.getresponse().status == 401
    conn.close()
    assert (plan.pki / "ca.key").stat().st_mode & 0o777 == 0o600
    assert (plan.root / "kubeconfig").stat().st_mode & 0o777 == 0o600


async def test_up_without_nodes_runs_the_control_plane_alone(tmp_path: Path) -> None:
    """`up --nodes 0`, as the README offers it: no kubelet, no kube-proxy; a Node made by
    hand takes the pods the scheduler binds."""
    state = tmp_path / "control-plane"
    started = _kubeling("up", "--nodes", "0", "--detach", "--state-dir", str(state), "--cluster-cidr", CIDR)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "kubeling is up: 0 node(s) Ready" in started.stdout and "kube-proxy   none" in started.stdout
        plan = ClusterPlan.load(state)
        assert plan is not None and plan.ready and plan.proxies == {}
        async with plan.admin_client() as client:
            await client.nodes.create(core_pb2.Node(
                metadata=meta_pb2.ObjectMeta(name="by-hand"),
                status=core_pb2.NodeStatus(allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"},
                                           conditions=[core_pb2.NodeCondition(type="Ready", status="True")])))
            await client.pods.create(_pod("scheduled", "", "sleep", "3600"))
            bound = await _wait(client, "scheduled", lambda p: p.spec.nodeName == "by-hand")
            assert bound.status.phase == "Pending"  # no kubelet runs it
            await client.secrets.create(core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="s", namespace="default"),
                                                        stringData={"code": "never-in-the-audit-log"}))
        # the apiserver audits with the default policy: writes with who did them, Secrets' content never
        log = state / "audit" / "apiserver.log"
        events = [json.loads(line) for line in log.read_text().splitlines()]
        mine = {(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("name")): e for e in events
                if e["user"]["username"] == "kubernetes-admin" and e["stage"] == "ResponseComplete"}
        assert mine[("create", "nodes", "by-hand")]["responseStatus"]["code"] == 201
        assert mine[("create", "secrets", "s")]["level"] == "Metadata"
        assert "never-in-the-audit-log" not in log.read_text() and oct(log.stat().st_mode & 0o777) == "0o600"
        # and etcd holds it encrypted: what etcd's own client reads is the provider's prefix, then ciphertext
        etcdctl = shutil.which("etcdctl")
        assert etcdctl is not None, "etcdctl is missing: `make deps` installs Debian's etcd-client"
        read = subprocess.run([etcdctl, "--endpoints", f"https://{plan.etcd_endpoints.split(',')[0]}",
                               "--cacert", str(plan.pki / "ca.crt"),
                               "--cert", str(plan.pki / "apiserver-etcd-client.crt"),
                               "--key", str(plan.pki / "apiserver-etcd-client.key"),
                               "get", "/registry/secrets/default/s", "--print-value-only"],
                              capture_output=True, timeout=30, env={"ETCDCTL_API": "3"})
        assert read.returncode == 0, read.stderr
        assert read.stdout.startswith(b"k8s:enc:aescbc:v1:key1:") and b"never-in-the-audit-log" not in read.stdout
        status = _kubeling("status", "--state-dir", str(state))
        assert status.returncode == 0 and "scheduler" in status.stdout, status.stdout + status.stderr
        stopped = _kubeling("down", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    finally:
        current = ClusterPlan.load(state)
        if current is not None and (current.supervisor_pid or current.components):
            _kubeling("down", "--state-dir", str(state))
    assert subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout == ""


async def test_up_pods_across_nodes_supervision_and_down(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    prefix = f"u{os.getpid() % 1000}-"
    nodes = [f"{prefix}1", f"{prefix}2"]
    netns_before = set(netns.list_names())
    up = ["up", "--nodes", "2", "--etcd-members", "3", "--detach", "--state-dir", str(state), "--node-prefix", prefix,
          "--cluster-cidr", CIDR]
    started = _kubeling(*up)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "kubeling is up: 2 node(s) Ready" in started.stdout
        plan = ClusterPlan.load(state)
        assert plan is not None and plan.ready and (state / "kubeconfig").exists()
        async with Client.from_kubeconfig(state / "kubeconfig") as client:
            assert client.address == plan.apiserver
            await client.pods.create(_pod("server", nodes[0], "httpd", "-f", "-p", "8080", "-h", "/etc"))
            server = await _wait(client, "server", lambda p: p.status.phase == "Running")
            await client.pods.create(_pod("client", nodes[1], "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do "
                                          f"timeout 2 wget -q -O /dev/null http://{server.status.podIP}:8080/hostname "
                                          "&& exit 0; sleep 0.5; done; exit 1"))
            done = await _wait(client, "client", lambda p: p.status.phase in ("Succeeded", "Failed"))
            assert done.status.phase == "Succeeded"

            status = _kubeling("status", "--state-dir", str(state))
            assert status.returncode == 0 and "default/server" in status.stdout and nodes[1] in status.stdout
            assert f"kubelet-{nodes[0]}" in status.stdout and "running" in status.stdout
            # etcd's maintenance on the cluster's three members, over the cluster's TLS: one
            # leader, no alarm; a rolling defragmentation of each in turn
            members = _kubeling("etcd", "status", "--state-dir", str(state))
            assert members.returncode == 0, members.stdout + members.stderr
            rows = [line.split() for line in members.stdout.splitlines()[1:]]
            assert sorted(row[0] for row in rows) == sorted(plan.etcd_endpoints.split(","))
            assert [row[-2] for row in rows].count("true") == 1 and all(row[-1] == "-" for row in rows)
            defrag = _kubeling("etcd", "defrag", "--state-dir", str(state))
            assert defrag.returncode == 0 and defrag.stdout.count("defragmented 127.0.0.1:") == 3, defrag.stdout

            first = await client.nodes.get(nodes[0])
            await asyncio.to_thread(_secured, plan, first.status.daemonEndpoints.kubeletEndpoint.Port)

            # kubectl, with the kubeconfig `up` wrote, as the README's quick start uses it.
            # its discovery cache in the state directory (by default ~/.kube/cache, left behind)
            kubectl = [kubectl_binary(), "--kubeconfig", str(state / "kubeconfig"), "--cache-dir",
                       str(state / "kube-cache")]
            listed = await asyncio.to_thread(subprocess.run, kubectl + ["get", "nodes"], capture_output=True, text=True)
            assert sorted(line.split()[:2] for line in listed.stdout.splitlines()[1:]) == [[n, "Ready"] for n in nodes]
            ran = await asyncio.to_thread(subprocess.run, kubectl + ["run", "hello", "--image=busybox", "--", "sleep",
                                                                     "3600"], capture_output=True, text=True)
            assert ran.returncode == 0 and ran.stdout.strip() == "pod/hello created", ran.stderr
            wait = kubectl + ["wait", "--for=condition=Ready", "pod/hello", "--timeout=60s"]
            waited = await asyncio.to_thread(subprocess.run, wait, capture_output=True, text=True)
            assert waited.returncode == 0, waited.stderr
            # The controller manager on its own credentials: a Deployment rolled out, then collected;
            # meanwhile exposed as a Service and reached by its name (kube-proxy, the cluster DNS).
            created = await asyncio.to_thread(subprocess.run, kubectl + [
                "create", "deployment", "web", "--image=busybox", "--replicas=2", "--", "sh", "-c",
                "trap 'exit 0' TERM; echo ok > /tmp/index.html; httpd -f -p 8080 -h /tmp & wait"],
                capture_output=True, text=True)
            assert created.returncode == 0, created.stderr
            rollout = kubectl + ["rollout", "status", "deployment/web", "--timeout=90s"]
            rolled = await asyncio.to_thread(subprocess.run, rollout, capture_output=True, text=True)
            assert rolled.returncode == 0, rolled.stderr
            for args in (["expose", "deployment", "web", "--port=80", "--target-port=8080"],
                         ["run", "by-name", "--image=busybox", "--restart=Never", "--", "sh", "-c",
                          "for i in $(seq 40); do timeout 2 wget -q -O - http://web && exit 0; sleep 0.5; done; "
                          "exit 1"]):
                done_cmd = await asyncio.to_thread(subprocess.run, kubectl + args, capture_output=True, text=True)
                assert done_cmd.returncode == 0, done_cmd.stderr
            by_name = await _wait(client, "by-name", lambda p: p.status.phase in ("Succeeded", "Failed"))
            assert by_name.status.phase == "Succeeded", by_name.status
            # ... and as a LoadBalancer: the address kubectl prints answers from this machine (a port
            # free here: the address is this machine's own, on the underlay)
            lb_port = free_port()
            exposed = await asyncio.to_thread(subprocess.run, kubectl + [
                "expose", "deployment", "web", "--type=LoadBalancer", "--name=web-lb", f"--port={lb_port}",
                "--target-port=8080"], capture_output=True, text=True)
            assert exposed.returncode == 0, exposed.stderr

            async def external_ip() -> str:
                shown = await asyncio.to_thread(subprocess.run, kubectl + ["get", "svc", "web-lb"], capture_output=True,
                                                text=True)
                return shown.stdout.splitlines()[1].split()[3] if shown.returncode == 0 else ""
            address = await until(external_ip, "web-lb's EXTERNAL-IP", 60, interval=0.3,
                                  check=lambda ip: ip not in ("", "<pending>"))
            assert address == plan.node_ip(nodes[0])
            answer = await until(lambda: asyncio.to_thread(_http_get, f"http://{address}:{lb_port}/index.html"),
                                 "the load balancer's answer", 60, interval=0.3, retry_on=(OSError,))
            assert answer == "ok"

            # A developer's own image: a `docker save` archive made here, loaded into both
            # nodes, run by kubectl on the second (never pulled: it exists nowhere else)
            archive = state / "mine.tar"
            docker_archive(archive, "example.com/mine:1")
            loaded = _kubeling("image", "load", str(archive), "--state-dir", str(state))
            assert loaded.returncode == 0, loaded.stderr
            assert [line.split()[:3] for line in loaded.stdout.splitlines()] == \
                [[f"{n}:", "loaded", "example.com/mine:1"] for n in nodes], loaded.stdout
            listed = _kubeling("image", "ls", "--node", nodes[1], "--state-dir", str(state))
            assert any(line.split()[:2] == ["example.com/mine", "1"] for line in listed.stdout.splitlines()), listed
            refused = _kubeling("image", "load", str(state / "kubeconfig"), "--state-dir", str(state))
            assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and \
                "not an image archive" in refused.stderr, refused.stderr
            ran = await asyncio.to_thread(subprocess.run, kubectl + [
                "run", "mine", "--image=example.com/mine:1", "--image-pull-policy=Never", "--restart=Never",
                f'--overrides={{"spec": {{"nodeName": "{nodes[1]}"}}}}', "--command", "--",
                "/bin/busybox", "echo", "hello-from-mine"], capture_output=True, text=True)
            assert ran.returncode == 0, ran.stderr
            await _wait(client, "mine", lambda p: p.status.phase == "Succeeded")
            logs = await asyncio.to_thread(subprocess.run, kubectl + ["logs", "mine"], capture_output=True, text=True)
            assert logs.stdout.strip() == "hello-from-mine", logs.stdout + logs.stderr
            info = await asyncio.to_thread(subprocess.run, kubectl + ["cluster-info"], capture_output=True, text=True)
            assert "CoreDNS is running at" in info.stdout, info.stdout + info.stderr
            # `kubectl top` through the aggregator: the metrics server `up` started and registered
            top = await asyncio.to_thread(subprocess.run, kubectl + ["top", "node"], capture_output=True, text=True)
            assert top.returncode == 0 and nodes[0] in top.stdout, top.stdout + top.stderr
            await asyncio.to_thread(subprocess.run, kubectl + ["delete", "deployment", "web"], capture_output=True)

            # Storage as the documentation's claim example: no class named, the default
            # (standard, the hostpath CSI driver) provisions it where its pod lands.
            manifest = state / "claim.yaml"
            manifest.write_text(_CLAIM_AND_POD)
            applied = await asyncio.to_thread(subprocess.run, kubectl + ["apply", "-f", str(manifest)],
                                              capture_output=True, text=True)
            assert applied.returncode == 0, applied.stderr
            keeper = await _wait(client, "keeper", lambda p: p.status.phase == "Running")
            claim = await client.persistentvolumeclaims.get("data", "default")
            assert claim.status.phase == "Bound" and claim.spec.storageClassName == "standard"
            volume = await client.persistentvolumes.get(claim.spec.volumeName)
            kept_file = plan.csi_state_dir(keeper.spec.nodeName) / "volumes" / volume.spec.csi.volumeHandle / "f"
            await until(lambda: kept_file.exists(), "the pod's write in its volume's directory")
            listed = await asyncio.to_thread(subprocess.run, kubectl + ["get", "pv,pvc,sc"], capture_output=True,
                                             text=True)
            assert "standard (default)" in listed.stdout and "WaitForFirstConsumer" in listed.stdout, listed.stdout
            assert f"persistentvolumeclaim/data   Bound    {volume.metadata.name}" in listed.stdout, listed.stdout
            await until(lambda: client.pods.list_all(), "the Deployment's pods collected", timeout=60,
                        check=lambda found: not [p for p in found[0] if p.metadata.name.startswith("web-")])

            # A component killed outright comes back (same ports) and the cluster keeps working.
            scheduler = subprocess.run(["pgrep", "-f", f"scheduler --kubeconfig {state}/scheduler.conf"],
                                       capture_output=True, text=True).stdout.split()
            assert len(scheduler) == 1
            os.kill(int(scheduler[0]), signal.SIGKILL)
            supervisor_log = state / "logs" / "supervisor.log"
            # the supervisor notices and restarts it after 1 s
            await until(lambda: "scheduler restarted" in supervisor_log.read_text(), "the scheduler restarted",
                        timeout=30)
            await client.pods.create(core_pb2.Pod(
                metadata=meta_pb2.ObjectMeta(name="after-kill", namespace="default"),
                spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
                    name="main", image="busybox", imagePullPolicy="IfNotPresent", command=["sleep", "3600"])])))
            ran = await _wait(client, "after-kill", lambda p: p.status.phase == "Running")
            first_id = ran.status.containerStatuses[0].containerID

            # The etcd member the apiserver uses (the first of its endpoints) killed: the
            # apiserver moves to another, the supervisor brings the member back, and it
            # rejoins the cluster.
            member = subprocess.run(["pgrep", "-f", f"etcd --name etcd-1 --data-dir {state}/etcd-1"],
                                    capture_output=True, text=True).stdout.split()
            assert len(member) == 1
            os.kill(int(member[0]), signal.SIGKILL)
            for attempt in range(50):  # a write in flight when the member died is refused (503): a client retries
                try:
                    await client.pods.create(core_pb2.Pod(
                        metadata=meta_pb2.ObjectMeta(name="after-etcd-kill", namespace="default"),
                        spec=core_pb2.PodSpec(terminationGracePeriodSeconds=1, containers=[core_pb2.Container(
                            name="main", image="busybox", imagePullPolicy="IfNotPresent",
                            command=["sleep", "3600"])])))
                    break
                except errors.AlreadyExists:
                    break
                except (errors.ServiceUnavailable, errors.Timeout):  # 504: a write etcd did not confirm
                    assert attempt < 49
                    await asyncio.sleep(0.2)
            await _wait(client, "after-etcd-kill", lambda p: p.status.phase == "Running")
            await until(lambda: "etcd-1 restarted" in supervisor_log.read_text(), "etcd-1 restarted", timeout=30)
        assert "scheduler restarted" in (state / "logs" / "supervisor.log").read_text()

        stopped = _kubeling("down", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stderr
        assert set(netns.list_names()) == netns_before
        assert "KUBE-" not in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        assert str(state) not in Path("/proc/self/mountinfo").read_text()
        for node in nodes:
            assert subprocess.run(["ip", "link", "show", bridge_name(node)], capture_output=True).returncode != 0

        # The objects survive in etcd: up again, and the kubelets recreate the pods.
        again = _kubeling(*up)
        assert again.returncode == 0, again.stdout + again.stderr
        plan = ClusterPlan.load(state)
        assert plan is not None
        async with plan.admin_client() as client:
            back = await _wait(client, "after-kill", lambda p: p.status.containerStatuses and
                               p.status.containerStatuses[0].containerID not in ("", first_id) and
                               p.status.containerStatuses[0].state.HasField("running"))
            assert back.spec.nodeName in nodes and back.status.phase == "Running"
            # the claim's pod again, on its volume's node, with what it wrote before
            await _wait(client, "keeper", lambda p: p.status.phase == "Running" and p.status.containerStatuses[0]
                        .containerID != keeper.status.containerStatuses[0].containerID)
            assert kept_file.read_text() == "kept\n"

        # The supervisor dies outright: `down` still stops its components and cleans up.
        os.kill(plan.supervisor_pid, signal.SIGKILL)
        pid = plan.supervisor_pid
        await until(lambda: not alive(pid), "the supervisor gone", timeout=5)
        recovered = _kubeling("down", "--state-dir", str(state))
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr
        assert "the supervisor is gone" in recovered.stdout
    finally:
        current = ClusterPlan.load(state)
        if current is not None and (current.supervisor_pid or current.components):
            _kubeling("down", "--state-dir", str(state))
        for node in nodes:
            subprocess.run(["ip", "link", "del", bridge_name(node)], capture_output=True)
    assert set(netns.list_names()) == netns_before
    leftovers = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout
    assert leftovers == ""
    assert "KUBE-" not in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout

"""`kubeling dashboard` in a real browser (headless Chromium): the page lists the nodes and
pods of a running cluster (a control-plane node and two workers), shows a pod created
after it loaded, and draws a pod's scheduling explanation — the winner starred, each
Score plugin's share on both workers, the control-plane node the taint filter rejected in
grey with its reason — and the pod's start from its trace (tracing on, the project's OTLP
receiver as the trace store), as a screenshot the test writes; it sees only what its
kubeconfig's user may see."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench.browser import Browser
from cluster.plan import ClusterPlan
from kubeling.netutil import free_port
from tests.e2e.kubectl import Kubectl
from tests.wait import until

# The cluster kubeling (no name): its nodes share this machine's network namespace, where
# the trace store listens on loopback.
_CONFIG = """\
apiVersion: kubeling.io/v1alpha1
kind: Cluster
nodes: [{role: control-plane}, {}, {}]
addons: {registry: false, ingress: false, networkPolicy: false}
tracing: {otlpEndpoint: "http://OTLP"}
"""
_EXPLAINED = """\
apiVersion: v1
kind: Pod
metadata:
  name: explained
  annotations: {scheduler.kubeling.io/record: "true"}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox, command: [sh, -c, "echo hello-from-the-log; exec sleep 3600"]}]
"""


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class _Dashboard:
    """`kubeling dashboard` as a user starts it: on a free loopback port it prints."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cluster", "dashboard", "--listen", "127.0.0.1:0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("dashboard on http://"):
            self.stop()
            raise AssertionError(f"kubeling dashboard: {line}{self.proc.stderr.read() if self.proc.stderr else ''}")
        self.url = line.split()[2]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def traces() -> Iterator[str]:
    """The project's OTLP receiver (Jaeger's query API) on free loopback ports: its query URL."""
    otlp, query = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "cluster.otlpreceiver", "--otlp-listen", otlp, "--http-listen",
                             query], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://{query}/api/services", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the OTLP receiver did not start"
                time.sleep(0.1)
        yield f"{otlp} http://{query}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, traces: str) -> Iterator[ClusterPlan]:
    base = tmp_path_factory.mktemp("dashboard")
    config = base / "cluster.yaml"
    config.write_text(_CONFIG.replace("OTLP", traces.split()[0]))
    started = _kubeling("up", "--config", str(config), "--detach", "--state-dir", str(base / "state"))
    assert started.returncode == 0, started.stdout + started.stderr
    plan = ClusterPlan.load(base / "state")
    assert plan is not None
    try:
        yield plan
    finally:
        stopped = _kubeling("down", "--state-dir", str(base / "state"))
        assert stopped.returncode == 0, stopped.stderr


def _trace_complete(query: str, trace: str) -> bool:
    """The pod's trace has reached the store with its kubelet's part (spans are exported in batches)."""
    try:
        with urllib.request.urlopen(f"{query}/api/traces/{trace}", timeout=2) as reply:
            body = json.loads(reply.read())
    except OSError:
        return False
    services = {p["serviceName"] for t in body["data"] for p in t["processes"].values()}
    return "scheduler" in services and any(s.startswith("kubelet-") for s in services)


async def test_the_page_lists_updates_and_explains(cluster: ClusterPlan, traces: str, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster.kubeconfig)
    control, *workers = cluster.nodes
    await kubectl("apply", "-f", "-", stdin=_EXPLAINED)
    await kubectl("wait", "--for=condition=Ready", "pod/explained", "--timeout=60s")
    query = traces.split()[1]
    dashboard = _Dashboard("--kubeconfig", str(cluster.kubeconfig), "--traces-url", query)
    try:
        async with Browser() as browser:
            await browser.open(dashboard.url)
            nodes = await browser.wait_for(
                "[...document.querySelectorAll('#nodes tr[data-id]')].map(r => r.dataset.id)", "the nodes")
            assert sorted(nodes) == sorted(cluster.nodes)
            assert await browser.wait_for("!!document.querySelector('#pods tr[data-id=\"default/explained\"]')",
                                          "the pod")
            # the stream's open is its own event, after the snapshot's tables (a CI run read it before)
            assert await browser.wait_for("document.getElementById('live').textContent === 'live'", "the live stream")
            paint = await browser.evaluate(
                "Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]))")
            # a pod created now appears without a reload (the watch's event, pushed to the page)
            created_at = time.time() * 1000
            await kubectl("run", "late", "--image=busybox", "--restart=Never", "--", "sleep", "3600")
            await browser.wait_for("!!document.querySelector('#pods tr[data-id=\"default/late\"]')", "the new pod")
            seen = await browser.evaluate(
                "window.__kubeling.updates.find(u => u.kind === 'pods' && u.id === 'default/late').at")
            print(f"dashboard: first contentful paint {paint.get('first-contentful-paint', 0):.0f} ms, "
                  f"a new pod on the page {seen - created_at:.0f} ms after kubectl run began")

            await browser.open(f"{dashboard.url}pods/default/explained")
            rows = await browser.wait_for(
                "[...document.querySelectorAll('svg.why g.node-row')].map(g => [g.dataset.node, "
                "g.getAttribute('class'), g.querySelectorAll('rect.score').length, "
                "(g.querySelector('text.reason') || {}).textContent || ''])", "the why-chart")
            by_node = {node: (classes.split(), scores, reason) for node, classes, scores, reason in rows}
            _, out, _ = await kubectl("get", "pod", "explained", "-o", "jsonpath={.spec.nodeName}")
            winner, = [w for w in workers if w == out]
            assert by_node[winner][0] == ["node-row", "feasible", "winner"] and by_node[winner][1] >= 1
            loser, = [w for w in workers if w != winner]
            assert by_node[loser][0] == ["node-row", "feasible"] and by_node[loser][1] >= 1
            assert "rejected" in by_node[control][0] and by_node[control][1] == 0
            assert by_node[control][2].startswith("TaintToleration:") and "control-plane" in by_node[control][2]
            assert await browser.evaluate("document.querySelector('.legend').textContent.includes('TaintToleration')")
            log = await browser.wait_for("(document.querySelector('pre.log') || {}).textContent", "the log")
            assert log.strip() == "hello-from-the-log"
            # the pod's start from its trace, once the components' batches have reached the store
            _, parent, _ = await kubectl("get", "pod", "explained", "-o",
                                         "jsonpath={.metadata.annotations.kubeling\\.io/traceparent}")
            await until(lambda: asyncio.to_thread(_trace_complete, query, parent.split("-")[1]), "the pod's trace",
                        timeout=60, interval=0.5)
            await browser.open(f"{dashboard.url}pods/default/explained")
            services = await browser.wait_for(
                "[...new Set([...document.querySelectorAll('svg.timeline g.span')].map(g => g.dataset.service))]",
                "the start timeline")
            assert {"apiserver", "scheduler", f"kubelet-{winner}"} <= set(services), services
            names = await browser.evaluate(
                "[...document.querySelectorAll('svg.timeline g.span')].map(g => g.dataset.name)")
            assert "syncPod" in names and "scheduling cycle" in names, names
            shot = await browser.screenshot(tmp_path / "why.png")
            data = shot.read_bytes()
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    finally:
        dashboard.stop()


async def test_a_user_sees_only_what_rbac_lets_them(cluster: ClusterPlan, tmp_path: Path) -> None:
    """A user who may read pods and nothing else: the page says the nodes are forbidden (the
    apiserver's words) and lists the pods; no privileged side door."""
    kubectl = Kubectl(cluster.kubeconfig)
    # a user of the cluster's own: a client certificate signed by its CA, as kubeadm's
    # `kubeconfig user` makes one (the project's gRPC front end takes certificates, not tokens)
    key, csr, cert = tmp_path / "viewer.key", tmp_path / "viewer.csr", tmp_path / "viewer.crt"
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=viewer", "-keyout", str(key), "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(cluster.pki / "ca.crt"), "-CAkey",
                    str(cluster.pki / "ca.key"), "-days", "1", "-out", str(cert)], check=True, capture_output=True)
    for args in (["create", "clusterrole", "pod-reader", "--verb=get,list,watch", "--resource=pods,pods/log"],
                 ["create", "clusterrolebinding", "viewer", "--clusterrole=pod-reader", "--user=viewer"]):
        await kubectl(*args)
    config = yaml.safe_load(cluster.kubeconfig.read_text())  # the same cluster, another user
    config["users"] = [{"name": config["users"][0]["name"], "user": {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(key.read_bytes()).decode()}}]
    viewer = tmp_path / "viewer.conf"
    viewer.write_text(yaml.safe_dump(config))
    dashboard = _Dashboard("--kubeconfig", str(viewer))
    try:
        async with Browser() as browser:
            await browser.open(dashboard.url)
            errors = await browser.wait_for("document.getElementById('errors').textContent", "the refusals")
            assert "nodes: Forbidden" in errors and "cannot list resource \"nodes\"" in errors, errors
            assert await browser.evaluate("document.querySelectorAll('#nodes tr[data-id]').length") == 0
            assert await browser.wait_for("!!document.querySelector('#pods tr[data-id=\"default/explained\"]')",
                                          "the pods it may read")
    finally:
        dashboard.stop()

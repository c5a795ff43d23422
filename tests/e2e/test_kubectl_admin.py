"""kubectl's everyday admin commands on a secured two-node cluster with the controller
manager (issue 22): `drain` cordons and evicts, waits while a PodDisruptionBudget
forbids an eviction and goes on once it allows it; `diff` shows a change and writes
nothing; `apply --dry-run=server` on create and update; deletecollection through
`kubectl delete --raw` with a selector; the apiserver's own `/metrics` on its REST port."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from controllers.manager import ControllerManager
from metricsserver.server import MetricsServer
from tests.e2e.conftest import Cluster
from tests.e2e.kubectl import Kubectl
from tests.wait import until

WEB: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                "whenUnsatisfiable": "ScheduleAnyway",
                                                "labelSelector": {"matchLabels": {"app": "web"}}}],
                 "containers": [{"name": "main", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]}]}}}}



async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0) -> None:
    await until(check, what, timeout)


async def test_drain_respects_a_budget(cluster: Cluster, controllers: ControllerManager, kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    await cluster.add_node(2)
    first, second = list(cluster.kubelets)
    await kubectl("apply", "-f", "-", stdin=json.dumps(WEB))
    await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
    pods, _ = await cluster.client.pods.list_all(label_selector="app=web")
    assert sorted(p.spec.nodeName for p in pods) == sorted([first, second])  # one per node
    await kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=2")

    async def counted() -> bool:
        st = (await cluster.client.poddisruptionbudgets.get("web", "default")).status
        return st.currentHealthy == 2 and st.desiredHealthy == 2 and st.observedGeneration >= 1
    await _until(counted, "the budget's status")

    lonely = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely"},
              "spec": {"nodeName": first, "terminationGracePeriodSeconds": 1, "containers": [
                  {"name": "main", "image": "busybox", "command": WEB["spec"]["template"]["spec"]["containers"][0][
                      "command"]}]}}
    await kubectl("apply", "-f", "-", stdin=json.dumps(lonely))
    await cluster.wait_pod("lonely", lambda p: p.status.phase == "Running", timeout=60)
    code, out, err = await kubectl("drain", first, "--ignore-daemonsets", "--timeout=6s", ok=False, timeout=60)
    assert code != 0 and "cannot delete Pods that declare no controller" in out + err, (out, err)  # needs --force
    code, out, err = await kubectl("drain", first, "--ignore-daemonsets", "--force", "--timeout=8s", ok=False,
                                   timeout=60)
    assert code != 0 and "Cannot evict pod as it would violate the pod's disruption budget" in out + err, (out, err)
    assert (await cluster.client.nodes.get(first)).spec.unschedulable  # cordoned all the same
    await cluster.wait_gone("lonely", timeout=30)  # no budget covers it: evicted
    on_first = [p for p in (await cluster.client.pods.list_all(label_selector="app=web"))[0]
                if p.spec.nodeName == first]
    assert on_first and not on_first[0].metadata.HasField("deletionTimestamp")

    await kubectl("patch", "pdb", "web", "--type=merge", "-p", '{"spec": {"minAvailable": 1}}')

    async def allowed() -> bool:
        return (await cluster.client.poddisruptionbudgets.get("web", "default")).status.disruptionsAllowed == 1
    await _until(allowed, "the budget to allow one disruption")
    _, out, err = await kubectl("drain", first, "--ignore-daemonsets", "--force", "--timeout=60s",
                                "--grace-period=1", timeout=90)
    assert f"node/{first} drained" in out, (out, err)
    assert f"evicting pod default/{on_first[0].metadata.name}" in out + err

    async def moved() -> bool:
        pods, _ = await cluster.client.pods.list_all(label_selector="app=web")
        live = [p for p in pods if not p.metadata.HasField("deletionTimestamp")]
        return len(live) == 2 and all(p.spec.nodeName == second for p in live)
    await _until(moved, "the replacement to land on the other node")
    await kubectl("uncordon", first)
    assert not (await cluster.client.nodes.get(first)).spec.unschedulable


async def test_diff_server_dry_run_and_delete_collection(cluster: Cluster, kubectl: Kubectl) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": {"app": "cfg"}},
              "data": {"mode": "fast"}}
    _, out, _ = await kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(config))
    assert out.strip() == "configmap/settings created (server dry run)"
    code, _, err = await kubectl("get", "configmap", "settings", ok=False)
    assert code != 0 and "NotFound" in err
    await kubectl("apply", "-f", "-", stdin=json.dumps(config))
    changed = {**config, "data": {"mode": "slow"}}
    code, out, err = await kubectl("diff", "-f", "-", stdin=json.dumps(changed), ok=False)
    assert code == 1, (out, err)  # kubectl diff: 1 means "differences found"
    assert "-  mode: fast" in out and "+  mode: slow" in out
    _, out, _ = await kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(changed))
    assert out.strip() == "configmap/settings configured (server dry run)"
    _, out, _ = await kubectl("get", "configmap", "settings", "-o", "jsonpath={.data.mode}")
    assert out == "fast"  # neither wrote anything

    for i in range(3):
        await kubectl("create", "configmap", f"batch-{i}", "--from-literal=k=v")
        await kubectl("label", "configmap", f"batch-{i}", "tier=batch")
    _, out, _ = await kubectl("delete", "--raw", "/api/v1/namespaces/default/configmaps?labelSelector=tier%3Dbatch")
    assert sorted(i["metadata"]["name"] for i in json.loads(out)["items"]) == ["batch-0", "batch-1", "batch-2"]
    _, out, _ = await kubectl("get", "configmaps", "-o", "name")
    assert "batch-" not in out and "configmap/settings" in out

    _, out, _ = await kubectl("get", "--raw", "/metrics")
    assert "apiserver_request_total" in out or "apiserver_request_duration_seconds" in out, out[:500]


async def test_top_node_and_pod(cluster: Cluster, metrics_server: MetricsServer, kubectl: Kubectl) -> None:
    """metrics.k8s.io from the kubelets' Summary API, served by the metrics server behind the
    aggregator: a pod spinning a CPU shows about one core."""
    await cluster.add_node(1)
    busy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "labels": {"app": "busy"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                {"name": "spin", "image": "busybox", "command": ["sh", "-c", "while true; do :; done"]},
                {"name": "idle", "image": "busybox",
                 "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}]}}
    await kubectl("apply", "-f", "-", stdin=json.dumps(busy))
    await cluster.wait_pod("busy", lambda p: p.status.phase == "Running", timeout=60)
    _, out, _ = await kubectl("top", "pod", "busy", "--containers")
    rows = {line.split()[1]: line.split() for line in out.strip().splitlines()[1:]}
    spin_millicores = int(rows["spin"][2].rstrip("m"))
    assert 500 <= spin_millicores <= 1200, out  # about one core (2 cores shared with the test itself)
    assert int(rows["idle"][2].rstrip("m")) < 100, out
    assert rows["spin"][3].endswith("Mi"), out
    _, out, _ = await kubectl("top", "node")
    header, line = out.strip().splitlines()[:2]
    assert header.split()[:3] == ["NAME", "CPU(cores)", "CPU(%)"] or header.split()[:2] == ["NAME", "CPU(cores)"]
    assert line.split()[0] == next(iter(cluster.kubelets)) and int(line.split()[1].rstrip("m")) >= 500, out
    code, _, err = await kubectl("top", "pod", "absent", ok=False)
    assert code != 0 and "not found" in err



async def test_debug_runs_in_the_pods_network_namespace(cluster: Cluster, kubectl: Kubectl) -> None:
    """kubectl debug: an ephemeral container added to a running pod shares its network
    namespace (it sees the pod's IP), attached (-i) or read back from its log, and with
    --target the target container's process namespace."""
    await cluster.add_node(1)
    await kubectl("run", "target", "--image=busybox", "--", "sh", "-c",
                  "trap 'exit 0' TERM; while true; do sleep 1; done")
    pod = await cluster.wait_pod("target", lambda p: p.status.phase == "Running", timeout=60)
    ip = pod.status.podIP
    _, out, err = await kubectl("debug", "target", "--image=busybox", "--container=dbg", "--",
                                "sh", "-c", "ip -4 addr show eth0")

    def finished(p: Any) -> bool:
        return any(s.name == "dbg" and s.state.HasField("terminated") for s in p.status.ephemeralContainerStatuses)
    await cluster.wait_pod("target", finished, timeout=60)
    _, logs, _ = await kubectl("logs", "target", "-c", "dbg")
    assert f"inet {ip}/" in logs, logs
    # Attached (-i): the container waits for a line of the attached stdin before it prints, so
    # its output cannot be over before kubectl attaches (a sleep was not long enough in CI).
    _, out, err = await kubectl("debug", "-i", "target", "--image=busybox", "--container=dbg2", "--",
                                "sh", "-c", "read line; echo got $line; ip -4 addr show eth0", stdin="go\n",
                                timeout=120)
    assert "got go" in out and f"inet {ip}/" in out, (out, err)
    # --target: the ephemeral container joins the target container's process namespace.
    await kubectl("debug", "target", "--image=busybox", "--container=dbg3", "--target=target", "--",
                  "sh", "-c", "ps -o pid,args")

    def ps_done(p: Any) -> bool:
        return any(s.name == "dbg3" and s.state.HasField("terminated") for s in p.status.ephemeralContainerStatuses)
    await cluster.wait_pod("target", ps_done, timeout=60)
    _, logs, _ = await kubectl("logs", "target", "-c", "dbg3")
    assert "while true; do sleep 1; done" in logs, logs  # the target's process, seen from the debugger
    current = await cluster.client.pods.get("target")
    assert [c.name for c in current.spec.ephemeralContainers] == ["dbg", "dbg2", "dbg3"]
    assert next(c for c in current.status.containerStatuses if c.name == "target").restartCount == 0

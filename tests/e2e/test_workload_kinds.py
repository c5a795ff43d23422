"""The workload kinds of issue 37 with the real kubectl on a secured cluster with real
kubelets: a DaemonSet on every node (a node added gets one, an untolerated NoExecute
taint takes it away, a rolling update never leaves more than maxUnavailable nodes without
one — checked from a watch — and survives the controller manager dying mid-rollout);
a StatefulSet of three with its headless Service and claims (ordered start, stable DNS
names, a rolling update above the partition in reverse order, claims kept after scaling
down); a CronJob's run, a Job made from it, an Indexed Job whose pods see their index, a
podFailurePolicy failing a Job on exit code 42; a HorizontalPodAutoscaler made with
`kubectl autoscale` scaling a Deployment up while its pods spin and down after its
stabilization window."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from typing import Any

from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client
from metricsserver.server import MetricsServer
from tests.e2e.conftest import Cluster, ServiceNetwork, Storage, tls_of
from tests.e2e.kubectl import Kubectl
from tests.e2e.test_storage import make_class
from tests.e2e.test_workloads import PodWatch, get_json, serving, until

# sh as PID 1 ignores SIGTERM unless it traps it: trap it, so replaced pods go at once.
SERVE = "trap 'exit 0' TERM; while true; do sleep 1; done"


def _serve(name: str, image: str = "busybox", script: str = SERVE) -> dict[str, Any]:
    return {"name": name, "image": image, "command": ["sh", "-c", script]}


async def _successor(cluster: Cluster) -> ControllerManager:
    """A new controller manager, as after the old one died (expectations and memory lost)."""
    made = ControllerManager(Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "controller-manager")),
                             ManagerConfig(leader_elect=False, horizontal_pod_autoscaler_sync_period=1.0))
    await made.start()
    return made


# ---------------------------------------------------------------- DaemonSet

FLUENTD = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "fluentd-elasticsearch", "labels": {
    "k8s-app": "fluentd-logging"}}, "spec": {
    "selector": {"matchLabels": {"app": "fluentd"}},
    "template": {"metadata": {"labels": {"app": "fluentd"}}, "spec": {
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 2,
        "containers": [{**_serve("fluentd-elasticsearch"),
                        "resources": {"limits": {"memory": "200Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}},
                        "volumeMounts": [{"name": "varlog", "mountPath": "/var/log"}]}],
        "volumes": [{"name": "varlog", "hostPath": {"path": "/var/log"}}]}}}}


async def _nodes_of(kubectl: Kubectl, label: str) -> list[str]:
    pods = (await get_json(kubectl, "pods", "-l", label))["items"]
    return sorted(p["spec"].get("nodeName", "") for p in pods if not p["metadata"].get("deletionTimestamp"))


async def test_daemonset_with_kubectl(cluster: Cluster, controllers: ControllerManager, kubectl: Kubectl) -> None:
    nodes = [(await cluster.add_node(i)).config.node_name for i in (1, 2)]
    await kubectl("apply", "-f", "-", stdin=json.dumps(FLUENTD))
    _, out, _ = await kubectl("rollout", "status", "daemonset/fluentd-elasticsearch", "--timeout=120s")
    assert 'daemon set "fluentd-elasticsearch" successfully rolled out' in out, out
    assert await _nodes_of(kubectl, "app=fluentd") == sorted(nodes)
    _, out, _ = await kubectl("get", "daemonsets")
    assert out.split("\n")[1].split()[:7] == ["fluentd-elasticsearch", "2", "2", "2", "2", "2", "<none>"], out

    third = (await cluster.add_node(3)).config.node_name
    await until(lambda: _has(kubectl, third), "a pod on the node added")
    await kubectl("taint", "nodes", third, "dedicated=db:NoExecute")
    await until(lambda: _lacks(kubectl, third), "the pod taken off the NoExecute-tainted node")

    # A rolling update (maxUnavailable 1 of 2 nodes), the controller manager dying midway
    watch = PodWatch(cluster.client, "fluentd")
    await watch.start()
    await kubectl("set", "image", "daemonset/fluentd-elasticsearch", "fluentd-elasticsearch=busybox:latest")
    await until(lambda: _some_added(watch), "the rollout to start")
    await controllers.stop(release=False)
    successor = await _successor(cluster)
    try:
        _, out, _ = await kubectl("rollout", "status", "daemonset/fluentd-elasticsearch", "--timeout=120s")
        assert "successfully rolled out" in out, out
    finally:
        await successor.stop()
        await watch.stop()
    assert len(watch.added) == 2, sorted(watch.added)  # one new pod per node, none more
    assert watch.min_serving is not None and watch.min_serving >= 1, watch.min_serving

    _, out, _ = await kubectl("rollout", "history", "daemonset/fluentd-elasticsearch")
    assert [line.split()[0] for line in out.strip().split("\n")[2:]] == ["1", "2"], out
    revisions = (await get_json(kubectl, "controllerrevisions", "-l", "app=fluentd"))["items"]
    assert sorted(r["revision"] for r in revisions) == [1, 2]
    successor = await _successor(cluster)
    try:
        await kubectl("rollout", "undo", "daemonset/fluentd-elasticsearch")
        await kubectl("rollout", "status", "daemonset/fluentd-elasticsearch", "--timeout=120s")
        ds = await get_json(kubectl, "daemonset", "fluentd-elasticsearch")
        assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
        assert ds["status"]["updatedNumberScheduled"] == 2 and ds["status"]["numberMisscheduled"] == 0
    finally:
        await successor.stop()


async def _has(kubectl: Kubectl, node: str) -> bool:
    return node in await _nodes_of(kubectl, "app=fluentd")


async def _lacks(kubectl: Kubectl, node: str) -> bool:
    return node not in await _nodes_of(kubectl, "app=fluentd")


async def _some_added(watch: PodWatch) -> bool:
    return bool(watch.added)


# ---------------------------------------------------------------- StatefulSet

HTTPD = "trap 'exit 0' TERM; hostname > /usr/share/nginx/html/index.html; " \
        "httpd -f -p 80 -h /usr/share/nginx/html & wait"


def _web(image: str = "busybox") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "nginx"}}, "serviceName": "nginx", "replicas": 3,
        "minReadySeconds": 0,
        "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{**_serve("nginx", image, HTTPD), "ports": [{"containerPort": 80, "name": "web"}],
                            "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
            "resources": {"requests": {"storage": "1Gi"}}}}]}}


async def test_statefulset_with_kubectl(storage: Storage, service_network: ServiceNetwork,
                                        controllers: ControllerManager, kubectl: Kubectl) -> None:
    cluster, client = storage.cluster, storage.cluster.client
    for i in (1, 2):
        await storage.start_driver(await cluster.add_node(i, **service_network.node_settings()))
    await make_class(client, "standard")
    await kubectl("create", "service", "clusterip", "nginx", "--clusterip=None", "--tcp=80")
    await kubectl("patch", "service", "nginx", "-p", json.dumps({"spec": {"selector": {"app": "nginx"}}}))
    events: list[tuple[float, str, str]] = []  # (when, pod, "added" | "ready" | "deleted")
    recorder = asyncio.create_task(_record(client, events))
    try:
        await kubectl("apply", "-f", "-", stdin=json.dumps(_web()))
        _, out, _ = await kubectl("rollout", "status", "statefulset/web", "--timeout=180s")
        assert "partitioned roll out complete" in out or "rolling update complete" in out, out
        first = _firsts(events)
        # OrderedReady: each pod made only once the one before it was Ready
        assert first[("web-0", "ready")] <= first[("web-1", "added")] <= first[("web-1", "ready")] \
            <= first[("web-2", "added")], first
        claims = {c.metadata.name: c.status.phase for c in (await client.persistentvolumeclaims.list_all())[0]}
        assert claims == {"www-web-0": "Bound", "www-web-1": "Bound", "www-web-2": "Bound"}

        # stable names through the headless Service, from another pod of the set
        pods = {p["metadata"]["name"]: p for p in (await get_json(kubectl, "pods", "-l", "app=nginx"))["items"]}
        assert pods["web-1"]["spec"]["hostname"] == "web-1" and pods["web-1"]["spec"]["subdomain"] == "nginx"

        async def resolves() -> bool:
            _, out, _ = await kubectl("exec", "web-0", "--", "nslookup", "web-1.nginx.default.svc.cluster.local",
                                      ok=False)
            return pods["web-1"]["status"]["podIP"] in re.findall(r"Address: (\d+\.\d+\.\d+\.\d+)", out)
        await until(resolves, "web-1.nginx.default.svc.cluster.local resolved from web-0")
        _, out, _ = await kubectl("exec", "web-0", "--", "wget", "-q", "-O", "-", "http://web-2.nginx")
        assert out.strip() == "web-2"

        # A rolling update above the partition, in reverse order; the manager dies midway
        await kubectl("patch", "statefulset", "web", "-p", json.dumps(
            {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}}}))
        mark = len(events)
        await kubectl("set", "image", "statefulset/web", "nginx=busybox:latest")
        await until(lambda: _seen(events[mark:], "web-2", "deleted"), "web-2 replaced first")
        await controllers.stop(release=False)
        successor = await _successor(cluster)
        try:
            _, out, _ = await kubectl("rollout", "status", "statefulset/web", "--timeout=180s")
            assert "partitioned roll out complete: 2 new pods have been updated" in out, out
        finally:
            await successor.stop()
        update = [(pod, kind) for _, pod, kind in events[mark:] if kind in ("added", "deleted")]
        assert update == [("web-2", "deleted"), ("web-2", "added"), ("web-1", "deleted"), ("web-1", "added")], update
        sts = await get_json(kubectl, "statefulset", "web")
        images = {p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
                  for p in (await get_json(kubectl, "pods", "-l", "app=nginx"))["items"]}
        assert images == {"web-0": "busybox", "web-1": "busybox:latest", "web-2": "busybox:latest"}
        assert sts["status"]["updatedReplicas"] == 2 and sts["status"]["currentReplicas"] == 1

        # scaled down: the highest ordinals go, their claims stay (whenScaled: Retain)
        successor = await _successor(cluster)
        try:
            await kubectl("scale", "statefulset", "web", "--replicas=1")
            await until(lambda: _names_are(kubectl, ["web-0"]), "web-1 and web-2 gone")
            kept = {c.metadata.name for c in (await client.persistentvolumeclaims.list_all())[0]}
            assert kept == {"www-web-0", "www-web-1", "www-web-2"}
            await kubectl("delete", "statefulset", "web")
            await until(lambda: _names_are(kubectl, []), "the set's pods gone with it")
            # the claims and their volumes go while controllers run (this test stopped the fixture's)
            await kubectl("delete", "pvc", "--all")
            await until(lambda: _none(client.persistentvolumes.list_all()), "the volumes deleted with the claims")
        finally:
            await successor.stop()
    finally:
        recorder.cancel()
        await asyncio.gather(recorder, return_exceptions=True)


async def _record(client: Client, events: list[tuple[float, str, str]]) -> None:
    items, rv = await client.pods.list_all(label_selector="app=nginx")
    ready: set[str] = set()
    async for ev in client.pods.watch(label_selector="app=nginx", resource_version=rv):
        name = ev.object.metadata.name
        now = time.monotonic()
        if ev.type == "ADDED":
            events.append((now, name, "added"))
        elif ev.type == "DELETED":
            events.append((now, name, "deleted"))
            ready.discard(name)
            continue
        if serving(ev.object) and name not in ready:
            ready.add(name)
            events.append((now, name, "ready"))


def _firsts(events: list[tuple[float, str, str]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for when, pod, kind in events:
        out.setdefault((pod, kind), when)
    return out


async def _seen(events: list[tuple[float, str, str]], pod: str, kind: str) -> bool:
    return any(p == pod and k == kind for _, p, k in events)


async def _none(listing: Any) -> bool:
    return not (await listing)[0]


async def _names_are(kubectl: Kubectl, expected: list[str]) -> bool:
    pods = (await get_json(kubectl, "pods", "-l", "app=nginx"))["items"]
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")) == expected


# ---------------------------------------------------------------- CronJob and Jobs

async def _job_done(kubectl: Kubectl, name: str, kind: str = "Complete") -> dict[str, Any] | None:
    job = await get_json(kubectl, "job", name)
    done = any(c["type"] == kind and c["status"] == "True" for c in job.get("status", {}).get("conditions", []))
    return job if done else None


async def test_cronjob_and_job_features_with_kubectl(cluster: Cluster, controllers: ControllerManager,
                                                     kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    # The controller's clock a minute ahead: the first run is due at once, not in up to a minute
    controllers.cronjob.now = lambda: dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=61)
    await kubectl("create", "cronjob", "hello", "--image=busybox", "--schedule=*/1 * * * *", "--",
                  "sh", "-c", "date; echo Hello from the Kubernetes cluster")
    cj = await get_json(kubectl, "cronjob", "hello")
    assert cj["spec"]["concurrencyPolicy"] == "Allow" and cj["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "restartPolicy"] == "OnFailure"

    async def first_run() -> str | None:
        jobs = (await get_json(kubectl, "jobs"))["items"]
        runs = [j["metadata"]["name"] for j in jobs if j["metadata"]["name"].startswith("hello-")]
        return runs[0] if runs else None
    run = await until(first_run, "the CronJob's first Job")
    await until(lambda: _job_done(kubectl, run), "the run complete")
    cj = await until(lambda: _last_success(kubectl), "lastSuccessfulTime")
    assert cj["status"]["lastScheduleTime"]
    _, out, _ = await kubectl("logs", f"job/{run}")
    assert "Hello from the Kubernetes cluster" in out

    await kubectl("create", "job", "manual", "--from=cronjob/hello")
    job = await until(lambda: _job_done(kubectl, "manual"), "the Job made from the CronJob complete")
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    await kubectl("delete", "cronjob", "hello")

    indexed = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"}, "spec": {
        "completions": 3, "parallelism": 3, "completionMode": "Indexed", "template": {"spec": {
            "restartPolicy": "Never", "containers": [
                _serve("worker", script="echo index=$JOB_COMPLETION_INDEX host=$(hostname)")]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(indexed))
    job = await until(lambda: _job_done(kubectl, "indexed"), "the Indexed Job complete")
    assert job["status"]["completedIndexes"] == "0-2" and job["status"]["succeeded"] == 3
    seen = set()
    for p in (await get_json(kubectl, "pods", "-l", "job-name=indexed"))["items"]:
        _, out, _ = await kubectl("logs", p["metadata"]["name"])
        index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert out.strip() == f"index={index} host=indexed-{index}", out
        seen.add(index)
    assert seen == {"0", "1", "2"}

    failing = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "answer"}, "spec": {
        "backoffLimit": 6, "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]},
        "template": {"spec": {"restartPolicy": "Never", "containers": [_serve("main", script="exit 42")]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(failing))
    job = await until(lambda: _job_done(kubectl, "answer", "Failed"), "the Job failed at once")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy" and "failed with exit code 42 matching FailJob rule at index 0" \
        in failed["message"], failed
    assert job["status"]["failed"] == 1  # not retried: backoffLimit 6 never came into it


async def _last_success(kubectl: Kubectl) -> dict[str, Any] | None:
    cj = await get_json(kubectl, "cronjob", "hello")
    return cj if cj.get("status", {}).get("lastSuccessfulTime") else None


# ---------------------------------------------------------------- HorizontalPodAutoscaler

# Spins one core (as much as its cpu limit lets it) until the template says IDLE.
SPIN = "trap 'exit 0' TERM; if [ -z \"$IDLE\" ]; then while :; do :; done & fi; while true; do sleep 1; done"


async def test_hpa_scales_a_deployment_with_kubectl(cluster: Cluster, metrics_server: MetricsServer,
                                                    controllers: ControllerManager, kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{**_serve("spin", script=SPIN),
                            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(deployment))
    _, out, _ = await kubectl("autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=3")
    assert "horizontalpodautoscaler.autoscaling/web autoscaled" in out, out
    await kubectl("patch", "hpa", "web", "--type=merge", "-p", json.dumps(
        {"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}}))
    hpa = await until(lambda: _hpa_at(kubectl, 3), "scaled up to maxReplicas while the pods spin", timeout=150)
    assert hpa["status"]["desiredReplicas"] == 3
    _, out, _ = await kubectl("get", "hpa", "web")
    row = out.split("\n")[1].split()
    assert row[0] == "web" and row[1] == "Deployment/web" and re.fullmatch(r"\d+%/50%", row[3]), out
    assert row[4:7] == ["1", "3", "3"], out

    await kubectl("set", "env", "deployment/web", "IDLE=1")  # the new pods rest
    await until(lambda: _hpa_at(kubectl, 1), "scaled down once idle, after the stabilization window", timeout=180)
    events = (await cluster.client.events.list_all("default"))[0]
    rescales = [e.message for e in events if e.reason == "SuccessfulRescale"]
    assert any("above target" in m for m in rescales) and any("All metrics below target" in m for m in rescales), \
        rescales
    v1 = await get_json(kubectl, "horizontalpodautoscalers.v1.autoscaling", "web")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50 and v1["apiVersion"] == "autoscaling/v1"


async def _hpa_at(kubectl: Kubectl, replicas: int) -> dict[str, Any] | None:
    hpa = await get_json(kubectl, "hpa", "web")
    d = await get_json(kubectl, "deployment", "web")
    return hpa if d["spec"]["replicas"] == replicas and hpa.get("status", {}).get("currentReplicas") == replicas \
        else None

"""Deployments, ReplicaSets and Jobs with the real kubectl on a secured cluster with a
real kubelet and the controller manager (issue 20): create, scale, roll out a new
template with maxUnavailable respected at every moment (checked from a watch), history,
undo, a deleted pod replaced, cascading and orphaning deletes, a controller manager that
dies mid-rollout, Jobs to completion and to their backoff limit."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client
from tests.e2e.conftest import Cluster, tls_of
from tests.e2e.kubectl import Kubectl
from tests.wait import until as wait_until

# sh as PID 1 ignores SIGTERM unless it traps it: trap it, so replaced pods go at once.
SERVE = ["--", "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 90.0) -> Any:
    """The shared wait, with this module's patience (rollouts take a while)."""
    return await wait_until(check, what, timeout, interval=0.2)



async def get_json(kubectl: Kubectl, *args: str) -> Any:
    _, out, _ = await kubectl("get", *args, "-o", "json")
    return json.loads(out)


def serving(pod: Any) -> bool:
    """Counted as available by the Deployment: Ready and not being deleted."""
    return not pod.metadata.HasField("deletionTimestamp") and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


class PodWatch:
    """Every pod event of app=<label>, and the fewest serving pods seen at any moment."""

    def __init__(self, client: Client, app: str) -> None:
        self.client, self.app = client, app
        self.pods: dict[str, Any] = {}
        self.added: set[str] = set()
        self.min_serving: int | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        items, rv = await self.client.pods.list_all(label_selector=f"app={self.app}")
        self.pods = {p.metadata.name: p for p in items}
        self.task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        async for ev in self.client.pods.watch(label_selector=f"app={self.app}", resource_version=rv):
            name = ev.object.metadata.name
            if ev.type == "DELETED":
                self.pods.pop(name, None)
            else:
                if ev.type == "ADDED":
                    self.added.add(name)
                self.pods[name] = ev.object
            count = sum(1 for p in self.pods.values() if serving(p))
            self.min_serving = count if self.min_serving is None else min(self.min_serving, count)

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def test_deployment_lifecycle_with_kubectl(cluster: Cluster, controllers: ControllerManager,
                                                 kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    await kubectl("create", "deployment", "web", "--image=busybox", "--replicas=4", *SERVE)
    _, out, _ = await kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    assert 'deployment "web" successfully rolled out' in out
    d = await get_json(kubectl, "deployment", "web")
    assert d["status"]["availableReplicas"] == 4 and d["metadata"]["annotations"][
        "deployment.kubernetes.io/revision"] == "1"
    _, out, _ = await kubectl("get", "deployments")
    assert out.split("\n")[1].split()[:4] == ["web", "4/4", "4", "4"], out

    # A new template, rolled out: never fewer than 4 - 25% = 3 serving pods, 4 new pods exactly.
    watch = PodWatch(cluster.client, "web")
    await watch.start()
    await kubectl("set", "image", "deployment/web", "busybox=busybox:latest")
    _, out, _ = await kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    assert 'deployment "web" successfully rolled out' in out
    await until(lambda: _count(cluster, "web", 4), "the old pods to be gone")
    await watch.stop()
    assert watch.min_serving is not None and watch.min_serving >= 3, watch.min_serving
    assert len(watch.added) == 4, sorted(watch.added)  # no extra creations
    sets = (await get_json(kubectl, "replicasets", "-l", "app=web"))["items"]
    by_revision = {rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs for rs in sets}
    assert sorted(by_revision) == ["1", "2"]
    assert by_revision["1"]["spec"]["replicas"] == 0 and by_revision["2"]["spec"]["replicas"] == 4
    assert all(rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment" for rs in sets)

    _, out, _ = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in out.strip().split("\n")[2:]] == ["1", "2"], out
    await kubectl("rollout", "undo", "deployment/web")
    _, out, _ = await kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    d = await get_json(kubectl, "deployment", "web")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    first = await get_json(kubectl, "replicaset", by_revision["1"]["metadata"]["name"])
    assert first["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"  # reused, renumbered
    assert first["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert first["spec"]["replicas"] == 4

    # revisionHistoryLimit 0: the emptied ReplicaSet of revision 2 is deleted.
    await kubectl("patch", "deployment", "web", "-p", '{"spec": {"revisionHistoryLimit": 0}}')

    async def history_pruned() -> bool:
        sets, _ = await cluster.client.replicasets.list_all(label_selector="app=web")
        return [rs.metadata.name for rs in sets] == [by_revision["1"]["metadata"]["name"]]
    await until(history_pruned, "the old ReplicaSet to be deleted")

    await kubectl("scale", "deployment/web", "--replicas=2")
    await until(lambda: _count(cluster, "web", 2), "two pods after scaling down")
    _, out, _ = await kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}")
    assert out == "2"

    # A pod deleted: its ReplicaSet replaces it.
    pods, _ = await cluster.client.pods.list_all(label_selector="app=web")
    victim = next(p for p in pods if not p.metadata.HasField("deletionTimestamp"))
    await kubectl("delete", "pod", victim.metadata.name, "--wait=false")
    await until(lambda: _replaced(cluster, victim.metadata.name), "the deleted pod to be replaced")

    # Cascading delete: the ReplicaSets and pods go with the Deployment.
    await kubectl("delete", "deployment", "web")
    await until(lambda: _none_left(cluster, "web"), "the ReplicaSets and pods to be collected")

    # --cascade=orphan: the ReplicaSet and its pods stay, without an owner.
    await kubectl("create", "deployment", "keep", "--image=busybox", "--replicas=1", *SERVE)
    await kubectl("rollout", "status", "deployment/keep", "--timeout=120s")
    await kubectl("delete", "deployment", "keep", "--cascade=orphan")
    await until(lambda: _gone_deployment(cluster, "keep"), "the orphaning delete to finish")
    sets, _ = await cluster.client.replicasets.list_all(label_selector="app=keep")
    assert len(sets) == 1 and not sets[0].metadata.ownerReferences
    assert await _count(cluster, "keep", 1)


async def _count(cluster: Cluster, app: str, n: int) -> bool:
    pods, _ = await cluster.client.pods.list_all(label_selector=f"app={app}")
    return len(pods) == n and all(serving(p) for p in pods)


async def _replaced(cluster: Cluster, name: str) -> bool:
    pods, _ = await cluster.client.pods.list_all(label_selector="app=web")
    live = [p for p in pods if not p.metadata.HasField("deletionTimestamp")]
    return len(live) == 2 and name not in {p.metadata.name for p in live} and all(serving(p) for p in live)


async def _none_left(cluster: Cluster, app: str) -> bool:
    sets, _ = await cluster.client.replicasets.list_all(label_selector=f"app={app}")
    pods, _ = await cluster.client.pods.list_all(label_selector=f"app={app}")
    return not sets and not pods


async def _gone_deployment(cluster: Cluster, name: str) -> bool:
    items, _ = await cluster.client.deployments.list_all()
    return name not in {d.metadata.name for d in items}


async def test_controller_manager_killed_mid_rollout(cluster: Cluster, controllers: ControllerManager,
                                                     kubectl: Kubectl) -> None:
    """The manager dies (no lease released, its expectations lost) while a rollout runs; a
    new one finishes it without creating a pod more than the rollout needs."""
    await cluster.add_node(1)
    await kubectl("create", "deployment", "web", "--image=busybox", "--replicas=4", *SERVE)
    await kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    watch = PodWatch(cluster.client, "web")
    await watch.start()
    await kubectl("set", "image", "deployment/web", "busybox=busybox:latest")
    await until(lambda: _some_new(watch), "the rollout to start")
    await controllers.stop(release=False)
    successor = ControllerManager(Client(cluster.apiserver.address, tls=tls_of(cluster.pki, "controller-manager")),
                                  ManagerConfig(leader_elect=False))
    await successor.start()
    try:
        _, out, _ = await kubectl("rollout", "status", "deployment/web", "--timeout=120s")
        assert 'deployment "web" successfully rolled out' in out
        await until(lambda: _count(cluster, "web", 4), "the old pods to be gone")
    finally:
        await successor.stop()
        await watch.stop()
    assert len(watch.added) == 4, sorted(watch.added)
    assert watch.min_serving is not None and watch.min_serving >= 3


async def _some_new(watch: PodWatch) -> bool:
    return bool(watch.added)


async def test_jobs_to_completion_and_to_the_backoff_limit(cluster: Cluster, controllers: ControllerManager,
                                                           kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    await kubectl("create", "job", "ok", "--image=busybox", "--", "sh", "-c", "echo done")
    await kubectl("wait", "--for=condition=complete", "job/ok", "--timeout=90s")
    job = await get_json(kubectl, "job", "ok")
    assert job["status"]["succeeded"] == 1 and "completionTime" in job["status"]
    _, out, _ = await kubectl("get", "jobs")
    assert out.split("\n")[1].split()[:3] == ["ok", "Complete", "1/1"], out
    _, out, _ = await kubectl("logs", "job/ok")
    assert out.strip() == "done"

    failing = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
               "spec": {"backoffLimit": 1, "ttlSecondsAfterFinished": 3, "template": {"spec": {
                   "restartPolicy": "Never",
                   "containers": [{"name": "fail", "image": "busybox", "command": ["sh", "-c", "exit 3"]}]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(failing))
    await kubectl("wait", "--for=condition=failed", "job/bad", "--timeout=90s")
    job = await get_json(kubectl, "job", "bad")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and job["status"]["failed"] == 2
    pods, _ = await cluster.client.pods.list_all(label_selector="job-name=bad")
    assert len(pods) == 2 and all(p.status.phase == "Failed" for p in pods)
    # ttlSecondsAfterFinished: the Job goes, and its pods with it (the garbage collector).
    await until(lambda: _job_and_pods_gone(cluster, "bad"), "the finished Job and its pods to be deleted")

    # completions 3, parallelism 2: never more than 2 at once, done at the third success.
    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
             "spec": {"completions": 3, "parallelism": 2, "template": {"spec": {
                 "restartPolicy": "Never",
                 "containers": [{"name": "work", "image": "busybox", "command": ["sh", "-c", "sleep 1"]}]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(batch))
    most = 0
    deadline = asyncio.get_running_loop().time() + 90
    while True:
        job = (await get_json(kubectl, "job", "batch"))["status"]
        most = max(most, job.get("active", 0))
        if any(c["type"] == "Complete" for c in job.get("conditions", [])):
            break
        assert asyncio.get_running_loop().time() < deadline, job
        await asyncio.sleep(0.2)
    assert job["succeeded"] == 3 and most <= 2
    pods, _ = await cluster.client.pods.list_all(label_selector="job-name=batch")
    assert len(pods) == 3

    # activeDeadlineSeconds: a Job running past it fails, its pods deleted.
    forever = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "forever"},
               "spec": {"activeDeadlineSeconds": 2, "template": {"spec": {
                   "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                   "containers": [{"name": "wait", "image": "busybox", "command": SERVE[1:]}]}}}}
    await kubectl("create", "-f", "-", stdin=json.dumps(forever))
    await kubectl("wait", "--for=condition=failed", "job/forever", "--timeout=60s")
    job = await get_json(kubectl, "job", "forever")
    assert next(c for c in job["status"]["conditions"] if c["type"] == "Failed")["reason"] == "DeadlineExceeded"

    code, out, err = await kubectl("create", "job", "never", "--image=busybox", "--dry-run=client", "-o", "json")
    manifest = json.loads(out)
    manifest["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(manifest), ok=False)
    assert code != 0 and 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in err, err


async def _job_and_pods_gone(cluster: Cluster, name: str) -> bool:
    jobs, _ = await cluster.client.jobs.list_all()
    pods, _ = await cluster.client.pods.list_all(label_selector=f"job-name={name}")
    return name not in {j.metadata.name for j in jobs} and not pods


def _manifest(name: str, app: str, cpu: str, priority_class: str = "") -> str:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 1, "containers": [{
        "name": "main", "image": "busybox", "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
        "resources": {"requests": {"cpu": cpu}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
        return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
                           "spec": spec})
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
                                "template": {"metadata": {"labels": {"app": app}}, "spec": spec}}})


async def test_preemption_by_priority_class_respects_a_pdb(cluster: Cluster, controllers: ControllerManager,
                                                            kubectl: Kubectl) -> None:
    """Two equal victims on a full node; the older one would be kept without budgets, but
    the younger one's PodDisruptionBudget forbids its eviction: the older one goes."""
    await cluster.add_node(1)
    node = next(iter(cluster.kubelets))
    cores = int((await cluster.client.nodes.get(node)).status.allocatable["cpu"])
    half = f"{cores * 1000 // 2}m"
    await kubectl("apply", "-f", "-", stdin=_manifest("cache", "cache", half))
    await kubectl("rollout", "status", "deployment/cache", "--timeout=90s")
    first = (await cluster.client.pods.list_all(label_selector="app=cache"))[0][0]
    started = first.status.startTime.seconds

    async def next_second() -> bool:  # the two victims must differ in start time
        return int(time.time()) > started
    await until(next_second, "the clock to pass the first pod's start second")
    await kubectl("apply", "-f", "-", stdin=_manifest("db", "db", half))
    await kubectl("rollout", "status", "deployment/db", "--timeout=90s")
    await kubectl("create", "pdb", "db", "--selector=app=db", "--min-available=1")

    async def budget_counted() -> bool:
        pdb = await get_json(kubectl, "pdb", "db")
        status = pdb.get("status", {})
        return status.get("currentHealthy") == 1 and status.get("desiredHealthy") == 1 \
            and status.get("disruptionsAllowed", 0) == 0 and status.get("expectedPods") == 1
    await until(budget_counted, "the disruption controller to count the budget")
    _, out, _ = await kubectl("get", "pdb")
    assert out.split("\n")[1].split()[:4] == ["db", "1", "N/A", "0"], out

    await kubectl("create", "priorityclass", "urgent", "--value=1000", "--description=test")
    await kubectl("apply", "-f", "-", stdin=_manifest("urgent", "urgent", half, priority_class="urgent"))
    urgent = await cluster.wait_pod("urgent", lambda p: p.status.phase == "Running", timeout=90)
    assert urgent.spec.priority == 1000
    db = (await cluster.client.pods.list_all(label_selector="app=db"))[0]
    assert [p.metadata.name for p in db if p.status.phase == "Running"] and \
        not any(p.metadata.HasField("deletionTimestamp") for p in db)
    events = (await cluster.client.events.list_all(field_selector="reason=Preempted"))[0]
    assert [e.involvedObject.name for e in events] == [first.metadata.name]


class HashWatch(PodWatch):
    """Also records whether pods of two templates (pod-template-hash) ever ran at once."""

    def __init__(self, client: Client, app: str) -> None:
        super().__init__(client, app)
        self.overlap = False

    async def _run(self, rv: str) -> None:
        async for ev in self.client.pods.watch(label_selector=f"app={self.app}", resource_version=rv):
            name = ev.object.metadata.name
            if ev.type == "DELETED":
                self.pods.pop(name, None)
            else:
                if ev.type == "ADDED":
                    self.added.add(name)
                self.pods[name] = ev.object
            hashes = {p.metadata.labels["pod-template-hash"] for p in self.pods.values()
                      if p.status.phase not in ("Succeeded", "Failed")}  # as upstream: finished pods do not run
            self.overlap = self.overlap or len(hashes) > 1


async def test_recreate_pause_resume_and_the_progress_deadline(cluster: Cluster, controllers: ControllerManager,
                                                               kubectl: Kubectl) -> None:
    await cluster.add_node(1)
    manifest = json.loads(_manifest("recreate", "recreate", "10m"))
    manifest["spec"].update(replicas=2, strategy={"type": "Recreate"})
    await kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    await kubectl("rollout", "status", "deployment/recreate", "--timeout=90s")
    watch = HashWatch(cluster.client, "recreate")
    await watch.start()
    await kubectl("set", "image", "deployment/recreate", "main=busybox:latest")
    await kubectl("rollout", "status", "deployment/recreate", "--timeout=90s")
    await until(lambda: _count(cluster, "recreate", 2), "two new pods")
    await watch.stop()
    assert not watch.overlap  # Recreate: every old pod gone before a new one was made
    assert len(watch.added) == 2

    # Paused: a new template makes no ReplicaSet until resumed.
    await kubectl("rollout", "pause", "deployment/recreate")
    await kubectl("set", "image", "deployment/recreate", "main=busybox")

    async def paused() -> bool:
        d = await get_json(kubectl, "deployment", "recreate")
        cond: dict[str, Any] = next((c for c in d["status"].get("conditions", []) if c["type"] == "Progressing"), {})
        return d["status"].get("observedGeneration") == d["metadata"]["generation"] and \
            cond.get("reason") == "DeploymentPaused"
    await until(paused, "the pause to be observed")
    assert len((await cluster.client.replicasets.list_all(label_selector="app=recreate"))[0]) == 2
    await kubectl("rollout", "resume", "deployment/recreate")
    await kubectl("rollout", "status", "deployment/recreate", "--timeout=90s")
    assert len((await cluster.client.replicasets.list_all(label_selector="app=recreate"))[0]) == 2  # revision 1 reused

    # An image that cannot be pulled never becomes available: past progressDeadlineSeconds
    # the Deployment says so, and `kubectl rollout status` fails.
    stuck = json.loads(_manifest("stuck", "stuck", "10m"))
    stuck["spec"]["progressDeadlineSeconds"] = 3
    stuck["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.kubeling.invalid/none:1"
    await kubectl("apply", "-f", "-", stdin=json.dumps(stuck))
    code, _, err = await kubectl("rollout", "status", "deployment/stuck", "--timeout=60s", ok=False)
    assert code != 0 and 'deployment "stuck" exceeded its progress deadline' in err, err
    d = await get_json(kubectl, "deployment", "stuck")
    cond = next(c for c in d["status"]["conditions"] if c["type"] == "Progressing")
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")

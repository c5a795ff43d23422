"""The sig-apps conformance tests of issue 37's kinds, mirrored (upstream's test/e2e/apps:
controller_revision.go, cronjob.go, daemon_set.go, job.go, rc.go, statefulset.go), each
named after its testname, against a real apiserver and controller manager over REST.

No kubelet runs here: `run()` reports pods Running and Ready, `end()` reports them ended,
as a kubelet would (the one thing faked, so that a test decides when); the behaviours that
need real containers are tests/e2e/test_workload_kinds.py's. The CronJob controller's clock
is moved by the tests instead of waiting for whole minutes."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from controllers.manager import ControllerManager, ManagerConfig
from kubeling.client import Client
from protos.kubeling.v1 import core_pb2
from tests.objects import node, update_status
from tests.wait import holds, until

NS = "default"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class Api:
    """The REST API as the e2e framework's clientset uses it."""

    def __init__(self, server: APIServer, session: aiohttp.ClientSession, client: Client) -> None:
        self.base = f"http://{server.rest_address}"
        self.session = session
        self.client = client

    async def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                   ok: bool = True) -> Any:
        data = None if body is None else json.dumps(body)
        async with self.session.request(method, self.base + path, data=data,
                                        headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            assert not ok or resp.status < 300, f"{method} {path}: {resp.status} {text}"
            return json.loads(text) if text else None

    async def get(self, path: str) -> Any:
        return await self.call("GET", path)

    async def replace(self, path: str, change: Any) -> Any:
        """GET, change, PUT, again on a conflict (the controllers write the same objects),
        as upstream's tests do with RetryOnConflict."""
        for _ in range(10):
            body = await self.get(path)
            change(body)
            result = await self.call("PUT", path, body, ok=False)
            if result.get("code") != 409:
                assert result.get("kind") != "Status" or result.get("status") == "Success", result
                return result
        raise AssertionError(f"PUT {path}: conflicts every time")


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Api]:
    client = Client(rest.address)
    manager = ControllerManager(Client(rest.address), ManagerConfig(leader_elect=False, job_backoff_base=0.2))
    await manager.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(rest, session, client)
    finally:
        await manager.stop()
        await client.close()


def _status_condition(body: dict[str, Any]) -> None:
    body["status"]["conditions"] = [{"type": "StatusUpdate", "status": "True", "reason": "E2E",
                                     "message": "Set from e2e test"}]


APPS = f"/apis/apps/v1/namespaces/{NS}"
BATCH = f"/apis/batch/v1/namespaces/{NS}"
CORE = f"/api/v1/namespaces/{NS}"


def _template(labels: dict[str, str], image: str = "busybox", restart: str = "Always") -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"restartPolicy": restart, "containers": [
        {"name": "app", "image": image, "command": ["sleep", "3600"]}]}}


async def pods(api: Api, selector: str) -> list[core_pb2.Pod]:
    return [p for p in (await api.client.pods.list(NS, label_selector=selector)).items
            if not p.metadata.HasField("deletionTimestamp")]


async def run(api: Api, found: Sequence[core_pb2.Pod]) -> None:
    """As a kubelet reports them: Running and Ready."""
    def running(current: core_pb2.Pod) -> None:
        current.status.phase = "Running"
        current.status.startTime.GetCurrentTime()
        del current.status.conditions[:]
        current.status.conditions.add(type="Ready", status="True").lastTransitionTime.GetCurrentTime()
    for p in found:
        await update_status(api.client.pods, p.metadata.name, NS, running)


async def end(api: Api, found: Sequence[core_pb2.Pod], exit_code: int = 0) -> None:
    def ended(current: core_pb2.Pod) -> None:
        current.status.phase = "Succeeded" if exit_code == 0 else "Failed"
        status = current.status.containerStatuses.add(name="app", image="busybox")
        status.state.terminated.exitCode = exit_code
        status.state.terminated.finishedAt.GetCurrentTime()
    for p in found:
        await update_status(api.client.pods, p.metadata.name, NS, ended)


async def count(api: Api, selector: str, n: int) -> list[core_pb2.Pod]:
    return await until(lambda: pods(api, selector), f"{n} pods of {selector}", check=lambda ps: len(ps) == n)


# ---------------------------------------------------------------- ControllerRevision

def _daemonset(name: str, image: str = "busybox", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "labels": {"ds": name}},
            "spec": {"selector": {"matchLabels": {"ds": name}}, "template": _template({"ds": name}, image), **spec}}


async def test_controllerrevision_resource_lifecycle(api: Api) -> None:
    """[sig-apps] ControllerRevision [Serial] should manage the lifecycle of a ControllerRevision"""
    await api.client.nodes.create(node("n1"))
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("e2e-crd"))

    async def revisions() -> list[dict[str, Any]]:
        return list((await api.get(f"{APPS}/controllerrevisions?labelSelector=ds%3De2e-crd"))["items"])
    (first,) = await until(revisions, "one revision", check=lambda rs: len(rs) == 1)
    name = first["metadata"]["name"]
    await api.call("PATCH", f"{APPS}/controllerrevisions/{name}", {"metadata": {"labels": {name: "patched"}}},
                   content_type=MERGE)
    assert (await api.get(f"{APPS}/controllerrevisions/{name}"))["metadata"]["labels"][name] == "patched"
    extra = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {
        "name": "e2e-crd-extra", "labels": {"ds": "e2e-crd"}, "ownerReferences": first["metadata"]["ownerReferences"]},
        "data": first["data"], "revision": first["revision"] + 1}
    await api.call("POST", f"{APPS}/controllerrevisions", extra)
    assert len(await revisions()) == 2
    await api.call("DELETE", f"{APPS}/controllerrevisions/e2e-crd-extra")
    assert len(await revisions()) == 1
    await api.replace(f"{APPS}/controllerrevisions/{name}", lambda b: b["metadata"]["labels"].update(updated="yes"))
    assert (await api.get(f"{APPS}/controllerrevisions/{name}"))["metadata"]["labels"]["updated"] == "yes"
    await api.call("PATCH", f"{APPS}/daemonsets/e2e-crd",
                   {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 1}}}}, content_type=STRATEGIC)
    await until(revisions, "a second revision for the patched template", check=lambda rs: len(rs) == 2)
    await api.call("DELETE", f"{APPS}/controllerrevisions?labelSelector=controller-revision-hash%3D"
                             f"{first['metadata']['labels']['controller-revision-hash']}")
    (left,) = await until(revisions, "one revision left", check=lambda rs: len(rs) == 1)
    assert left["revision"] == 3 or left["revision"] == 2  # upstream counts the recreated one as 3
    assert left["metadata"]["name"] != name


# ---------------------------------------------------------------- CronJob

def _cronjob(name: str, policy: str = "Allow", command: str = "sleep 300") -> dict[str, Any]:
    template = _template({"cron": name}, restart="OnFailure")
    template["spec"]["containers"][0]["command"] = ["sh", "-c", command]
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": {
        "schedule": "*/1 * * * *", "concurrencyPolicy": policy,
        "jobTemplate": {"metadata": {"labels": {"cron": name}}, "spec": {"template": template}}}}


class Clock:
    def __init__(self, manager: ControllerManager) -> None:
        self.offset = dt.timedelta()
        self.manager = manager
        manager.cronjob.now = lambda: dt.datetime.now(dt.timezone.utc) + self.offset

    def next_minute(self, name: str) -> None:
        self.offset += dt.timedelta(minutes=1)
        self.manager.cronjob.queue.add(f"{NS}/{name}")


async def _jobs(api: Api, name: str) -> list[dict[str, Any]]:
    items = (await api.get(f"{BATCH}/jobs?labelSelector=cron%3D{name}"))["items"]
    return [j for j in items if not j["metadata"].get("deletionTimestamp")]


async def _active(api: Api, name: str) -> list[Any]:
    return list((await api.get(f"{BATCH}/cronjobs/{name}")).get("status", {}).get("active") or [])


@pytest.fixture
async def cron(rest: APIServer) -> AsyncIterator[tuple[Api, Clock]]:
    client = Client(rest.address)
    manager = ControllerManager(Client(rest.address), ManagerConfig(leader_elect=False))
    await manager.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(rest, session, client), Clock(manager)
    finally:
        await manager.stop()
        await client.close()


async def test_cronjob_suspend(cron: tuple[Api, Clock]) -> None:
    """[sig-apps] CronJob should not schedule jobs when suspended"""
    api, clock = cron
    body = _cronjob("suspended")
    body["spec"]["suspend"] = True
    await api.call("POST", f"{BATCH}/cronjobs", body)
    clock.next_minute("suspended")
    await holds(lambda: _jobs(api, "suspended"), "no job while suspended", 1.0, check=lambda js: not js)
    assert not await _active(api, "suspended")


async def test_cronjob_forbidconcurrent(cron: tuple[Api, Clock]) -> None:
    """[sig-apps] CronJob should not schedule new jobs when ForbidConcurrent"""
    api, clock = cron
    await api.call("POST", f"{BATCH}/cronjobs", _cronjob("forbid", "Forbid"))
    clock.next_minute("forbid")
    await until(lambda: _active(api, "forbid"), "one active job", check=lambda a: len(a) == 1)
    clock.next_minute("forbid")
    await holds(lambda: _jobs(api, "forbid"), "no second job while the first runs", 1.0,
                check=lambda js: len(js) == 1)


async def test_cronjob_replaceconcurrent(cron: tuple[Api, Clock]) -> None:
    """[sig-apps] CronJob should replace jobs when ReplaceConcurrent"""
    api, clock = cron
    await api.call("POST", f"{BATCH}/cronjobs", _cronjob("replace", "Replace"))
    clock.next_minute("replace")
    (first,) = await until(lambda: _active(api, "replace"), "one active job", check=lambda a: len(a) == 1)
    clock.next_minute("replace")
    await until(lambda: _active(api, "replace"), "the job replaced",
                check=lambda a: len(a) == 1 and a[0]["name"] != first["name"])
    await until(lambda: _jobs(api, "replace"), "the old job deleted",
                check=lambda js: [j["metadata"]["name"] for j in js] != [first["name"]] and len(js) == 1)


async def test_cronjob_allowconcurrent(cron: tuple[Api, Clock]) -> None:
    """[sig-apps] CronJob should schedule multiple jobs concurrently"""
    api, clock = cron
    await api.call("POST", f"{BATCH}/cronjobs", _cronjob("allow"))
    clock.next_minute("allow")
    await until(lambda: _active(api, "allow"), "one active job", check=lambda a: len(a) == 1)
    clock.next_minute("allow")
    await until(lambda: _active(api, "allow"), "two jobs at once", check=lambda a: len(a) == 2)


async def test_cronjob_api_operations(cron: tuple[Api, Clock]) -> None:
    """[sig-apps] CronJob should support CronJob API operations"""
    api, _ = cron
    for i in range(3):
        body = _cronjob(f"ops{i}")
        body["metadata"]["labels"] = {"special-label": "ops"}
        await api.call("POST", f"{BATCH}/cronjobs", body)
    listed = await api.get(f"{BATCH}/cronjobs?labelSelector=special-label%3Dops")
    assert len(listed["items"]) == 3
    everywhere = await api.get("/apis/batch/v1/cronjobs?labelSelector=special-label%3Dops")
    assert len(everywhere["items"]) == 3
    patched = await api.call("PATCH", f"{BATCH}/cronjobs/ops0", {"metadata": {"annotations": {"patched": "true"}}},
                             content_type=MERGE)
    assert patched["metadata"]["annotations"]["patched"] == "true"
    replaced = await api.replace(f"{BATCH}/cronjobs/ops0",
                                 lambda b: b["metadata"]["annotations"].update(updated="true"))
    assert replaced["metadata"]["annotations"]["updated"] == "true"
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = await api.call("PATCH", f"{BATCH}/cronjobs/ops0/status", {"status": {"lastScheduleTime": now}},
                            content_type=MERGE)
    assert status["status"]["lastScheduleTime"] == now
    assert (await api.get(f"{BATCH}/cronjobs/ops0/status"))["status"]["lastScheduleTime"] == now
    await api.call("DELETE", f"{BATCH}/cronjobs/ops0")
    await api.call("DELETE", f"{BATCH}/cronjobs?labelSelector=special-label%3Dops")
    assert not (await api.get(f"{BATCH}/cronjobs?labelSelector=special-label%3Dops"))["items"]


# ---------------------------------------------------------------- DaemonSet

async def _nodes(api: Api, *names: str, labels: dict[str, str] | None = None) -> None:
    for n in names:
        await api.client.nodes.create(node(n, labels))


async def test_daemonset_list_and_delete_a_collection_of_daemonsets(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should list and delete a collection of DaemonSets"""
    await _nodes(api, "n1")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("collect"))
    await count(api, "ds=collect", 1)
    assert len((await api.get(f"{APPS}/daemonsets?labelSelector=ds%3Dcollect"))["items"]) == 1
    await api.call("DELETE", f"{APPS}/daemonsets?labelSelector=ds%3Dcollect")
    assert not (await api.get(f"{APPS}/daemonsets?labelSelector=ds%3Dcollect"))["items"]


async def test_daemonset_failedpodcreation(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should retry creating failed daemon pods"""
    await _nodes(api, "n1", "n2")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("retry"))
    found = await count(api, "ds=retry", 2)
    await run(api, found)
    await end(api, [found[0]], exit_code=1)
    await until(lambda: pods(api, "ds=retry"), "the failed pod replaced",
                check=lambda ps: len(ps) == 2 and found[0].metadata.uid not in {p.metadata.uid for p in ps}
                and all(p.status.phase != "Failed" for p in ps))


async def test_daemonset_rollback(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should rollback without unnecessary restarts"""
    await _nodes(api, "n1", "n2")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("rb"))
    first = await count(api, "ds=rb", 2)
    await run(api, first)
    await api.call("PATCH", f"{APPS}/daemonsets/rb", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "foo:non-existent"}]}}}}, content_type=STRATEGIC)
    # one pod replaced by the bad image (it never gets ready), then roll back
    await until(lambda: pods(api, "ds=rb"), "a pod of the new template",
                check=lambda ps: any(p.spec.containers[0].image == "foo:non-existent" for p in ps))
    await api.call("PATCH", f"{APPS}/daemonsets/rb", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "busybox"}]}}}}, content_type=STRATEGIC)
    back = await until(lambda: pods(api, "ds=rb"), "the old template everywhere",
                       check=lambda ps: len(ps) == 2 and all(p.spec.containers[0].image == "busybox" for p in ps))
    # the pod never touched kept running: no unnecessary restart
    assert len({p.metadata.uid for p in back} & {p.metadata.uid for p in first}) >= 1


async def test_daemonset_nodeselection(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should run and stop complex daemon"""
    await _nodes(api, "n1", "n2")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("complex"))
    await api.call("PATCH", f"{APPS}/daemonsets/complex", {"spec": {"template": {"spec": {
        "nodeSelector": {"color": "blue"}}}}}, content_type=STRATEGIC)
    await until(lambda: pods(api, "ds=complex"), "no daemon pod without the label", check=lambda ps: not ps)
    await api.call("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"color": "blue"}}}, content_type=MERGE)
    (on_blue,) = await count(api, "ds=complex", 1)
    assert on_blue.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[
        0].matchFields[0].values == ["n1"]
    await api.call("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"color": "green"}}}, content_type=MERGE)
    await count(api, "ds=complex", 0)
    await api.call("PATCH", f"{APPS}/daemonsets/complex", {"spec": {"template": {"spec": {
        "nodeSelector": {"color": "green"}}}}}, content_type=STRATEGIC)
    await count(api, "ds=complex", 1)


async def test_daemonset_creation(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should run and stop simple daemon"""
    await _nodes(api, "n1", "n2")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("simple"))
    found = await count(api, "ds=simple", 2)
    await api.client.pods.delete(found[0].metadata.name, NS)
    await until(lambda: pods(api, "ds=simple"), "a replacement",
                check=lambda ps: len(ps) == 2 and found[0].metadata.uid not in {p.metadata.uid for p in ps})


async def test_daemonset_rollingupdate(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should update pod when spec was updated and update strategy is RollingUpdate"""
    await _nodes(api, "n1", "n2")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("roll"))
    await run(api, await count(api, "ds=roll", 2))
    await api.call("PATCH", f"{APPS}/daemonsets/roll", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "busybox:1.36"}]}}}}, content_type=STRATEGIC)
    for _ in range(2):
        updated = await until(lambda: pods(api, "ds=roll"), "the next pod updated",
                              check=lambda ps: any(p.spec.containers[0].image == "busybox:1.36"
                                                   and not p.status.conditions for p in ps))
        await run(api, [p for p in updated if not p.status.conditions])
    final = await until(lambda: pods(api, "ds=roll"), "both updated", check=lambda ps: len(ps) == 2 and all(
        p.spec.containers[0].image == "busybox:1.36" for p in ps))
    assert len(final) == 2


async def test_daemonset_status_sub_resource(api: Api) -> None:
    """[sig-apps] Daemon set [Serial] should verify changes to a daemon set status"""
    await _nodes(api, "n1")
    await api.call("POST", f"{APPS}/daemonsets", _daemonset("st"))
    await count(api, "ds=st", 1)
    await api.replace(f"{APPS}/daemonsets/st/status", _status_condition)
    await api.call("PATCH", f"{APPS}/daemonsets/st/status", {"status": {"conditions": [
        {"type": "StatusPatched", "status": "True"}]}}, content_type=MERGE)
    read = await api.get(f"{APPS}/daemonsets/st/status")
    assert [c["type"] for c in read["status"]["conditions"]] == ["StatusPatched"]


# ---------------------------------------------------------------- Job

def _job(name: str, **spec: Any) -> dict[str, Any]:
    template = _template({"job": name}, restart=spec.pop("restart", "Never"))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"job": name}},
            "spec": {"template": template, **spec}}


async def _job_status(api: Api, name: str) -> dict[str, Any]:
    return dict((await api.get(f"{BATCH}/jobs/{name}")).get("status") or {})


def _has(status: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in status.get("conditions") or [])


async def test_jobs_orphan_pods_re_adoption(api: Api) -> None:
    """[sig-apps] Job should adopt matching orphans and release non-matching pods"""
    await api.call("POST", f"{BATCH}/jobs", _job("adopt", parallelism=2, completions=4))
    found = await count(api, "job=adopt", 2)
    orphan = found[0].metadata.name
    await api.call("PATCH", f"{CORE}/pods/{orphan}", {"metadata": {"ownerReferences": None}}, content_type=MERGE)
    await until(lambda: api.client.pods.get(orphan, NS), "the orphan adopted again",
                check=lambda p: any(r.kind == "Job" and r.controller for r in p.metadata.ownerReferences))
    pod = await api.client.pods.get(orphan, NS)
    label = next(k for k in pod.metadata.labels if k == "batch.kubernetes.io/controller-uid")
    await api.call("PATCH", f"{CORE}/pods/{orphan}", {"metadata": {"labels": {label: None,
                                                                             "controller-uid": None}}},
                   content_type=MERGE)
    await until(lambda: api.client.pods.get(orphan, NS), "the pod released",
                check=lambda p: not p.metadata.ownerReferences)


async def test_ensure_pod_failure_policy_allows_to_ignore_failure_matching_on_the_disruptiontarget_condition(
        api: Api) -> None:
    """[sig-apps] Job should allow to use a pod failure policy to ignore failure matching on DisruptionTarget
    condition"""
    await api.call("POST", f"{BATCH}/jobs", _job("ignore", completions=2, parallelism=2, completionMode="Indexed",
                                                 backoffLimit=0, podFailurePolicy={"rules": [
                                                     {"action": "Ignore", "onPodConditions": [
                                                         {"type": "DisruptionTarget"}]}]}))
    found = await count(api, "job=ignore", 2)
    for p in found:  # evicted: a DisruptionTarget condition, then Failed
        current = await api.client.pods.get(p.metadata.name, NS)
        current.status.conditions.add(type="DisruptionTarget", status="True", reason="EvictionByEvictionAPI")
        current.status.phase = "Failed"
        await api.client.pods.update_status(current)
    async def running() -> list[core_pb2.Pod]:
        return [p for p in await pods(api, "job=ignore") if p.status.phase != "Failed"]
    again = await until(running, "both indexes started again",
                        check=lambda ps: len(ps) == 2 and not {p.metadata.uid for p in ps} & {
                            p.metadata.uid for p in found})
    await end(api, again)
    status = await until(lambda: _job_status(api, "ignore"), "complete", check=lambda s: _has(s, "Complete"))
    assert status.get("failed", 0) == 0


async def test_verify_pod_failure_policy_allows_to_fail_job_early_on_exit_code(api: Api) -> None:
    """[sig-apps] Job should allow to use the pod failure policy on exit code to fail the job early"""
    await api.call("POST", f"{BATCH}/jobs", _job("early", completions=2, parallelism=2, backoffLimit=6,
                                                 podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {
                                                     "operator": "In", "values": [42]}}]}))
    found = await count(api, "job=early", 2)
    await end(api, [found[0]], exit_code=42)
    status = await until(lambda: _job_status(api, "early"), "failed", check=lambda s: _has(s, "Failed"))
    assert next(c for c in status["conditions"] if c["type"] == "Failed")["reason"] == "PodFailurePolicy"


async def test_jobs_apply_changes_to_status(api: Api) -> None:
    """[sig-apps] Job should apply changes to a job status"""
    await api.call("POST", f"{BATCH}/jobs", _job("st", parallelism=1, completions=1))
    await count(api, "job=st", 1)
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    patched = await api.call("PATCH", f"{BATCH}/jobs/st/status", {
        "metadata": {"annotations": {"patchedstatus": "true"}}, "status": {"startTime": now}}, content_type=MERGE)
    assert patched["metadata"]["annotations"]["patchedstatus"] == "true"
    updated = await api.replace(f"{BATCH}/jobs/st/status", lambda b: b["status"].update(startTime=now))
    assert updated["status"]["startTime"] == now
    assert (await api.get(f"{BATCH}/jobs/st/status"))["metadata"]["name"] == "st"


async def test_ensure_pods_of_an_indexed_job_get_a_unique_index(api: Api) -> None:
    """[sig-apps] Job should create pods for an Indexed job with completion indexes and specified hostname"""
    await api.call("POST", f"{BATCH}/jobs", _job("idx", completions=4, parallelism=2, completionMode="Indexed"))
    seen: set[str] = set()
    while len(seen) < 4:
        found = await until(lambda: pods(api, "job=idx"), "running pods", check=lambda ps: bool(ps))
        for p in found:
            index = p.metadata.annotations["batch.kubernetes.io/job-completion-index"]
            assert p.spec.hostname == f"idx-{index}"
            assert any(e.name == "JOB_COMPLETION_INDEX" for e in p.spec.containers[0].env)
            seen.add(index)
        await end(api, found)
        if len(seen) < 4:
            await until(lambda: pods(api, "job=idx"), "the next pods",
                        check=lambda ps: any(p.metadata.annotations[
                            "batch.kubernetes.io/job-completion-index"] not in seen for p in ps))
    status = await until(lambda: _job_status(api, "idx"), "complete", check=lambda s: _has(s, "Complete"))
    assert status["completedIndexes"] == "0-3" and seen == {"0", "1", "2", "3"}


async def test_jobs_active_pods_graceful_termination(api: Api) -> None:
    """[sig-apps] Job should delete a job"""
    await api.call("POST", f"{BATCH}/jobs", _job("del", parallelism=2, completions=2))
    await count(api, "job=del", 2)
    await api.call("DELETE", f"{BATCH}/jobs/del")
    await until(lambda: api.call("GET", f"{BATCH}/jobs/del", ok=False), "the job gone",
                check=lambda body: body.get("reason") == "NotFound")
    await count(api, "job=del", 0)


async def test_jobs_manage_lifecycle(api: Api) -> None:
    """[sig-apps] Job should manage the lifecycle of a job"""
    await api.call("POST", f"{BATCH}/jobs", _job("life", suspend=True))
    await api.call("PATCH", f"{BATCH}/jobs/life", {"metadata": {"labels": {"life": "patched"}}}, content_type=MERGE)
    assert (await api.get(f"{BATCH}/jobs/life"))["metadata"]["labels"]["life"] == "patched"
    replaced = await api.replace(f"{BATCH}/jobs/life", lambda b: b["metadata"].update(annotations={"updated": "true"}))
    assert replaced["metadata"]["annotations"]["updated"] == "true"
    listed = await api.get("/apis/batch/v1/jobs?labelSelector=life%3Dpatched")
    assert len(listed["items"]) == 1
    await api.call("DELETE", f"{BATCH}/jobs?labelSelector=life%3Dpatched")
    assert not (await api.get(f"{BATCH}/jobs?labelSelector=life%3Dpatched"))["items"]


async def test_jobs_completion_after_task_failure(api: Api) -> None:
    """[sig-apps] Job should run a job to completion when tasks sometimes fail and are locally restarted"""
    await api.call("POST", f"{BATCH}/jobs", _job("flaky", parallelism=2, completions=4, restart="OnFailure"))

    async def drive() -> dict[str, Any] | None:
        for p in await pods(api, "job=flaky"):
            if p.status.phase == "Succeeded":
                continue
            # restarted in place once (the kubelet's restart), then succeeds
            current = await api.client.pods.get(p.metadata.name, NS)
            status = current.status.containerStatuses.add(name="app", image="busybox", restartCount=1)
            status.state.running.startedAt.GetCurrentTime()
            await api.client.pods.update_status(current)
            await end(api, [current])
        found = await _job_status(api, "flaky")
        return found if _has(found, "Complete") else None
    status = await until(drive, "complete")
    assert status["succeeded"] == 4


# ---------------------------------------------------------------- ReplicationController

def _rc(name: str, replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"name": name}, "template": _template({"name": name})}}


async def test_replication_controller_adopt_matching_pods(api: Api) -> None:
    """[sig-apps] ReplicationController should adopt matching pods on creation"""
    await api.call("POST", f"{CORE}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pod-adoption", "labels": {"name": "pod-adoption"}}, "spec": _template({})["spec"]})
    await api.call("POST", f"{CORE}/replicationcontrollers", _rc("pod-adoption"))

    def settled(found: list[core_pb2.Pod]) -> bool:
        # upstream: the RC MUST either adopt the pod or delete and replace it
        return len(found) == 1 and any(r.kind == "ReplicationController" and r.controller
                                       for r in found[0].metadata.ownerReferences)
    await until(lambda: pods(api, "name=pod-adoption"), "the pod adopted (or replaced)", check=settled)


async def test_replication_controller_get_and_update_replicationcontroller_scale(api: Api) -> None:
    """[sig-apps] ReplicationController should get and update a ReplicationController scale"""
    await api.call("POST", f"{CORE}/replicationcontrollers", _rc("scaled"))
    scale = await api.get(f"{CORE}/replicationcontrollers/scaled/scale")
    assert scale["spec"]["replicas"] == 1
    await api.replace(f"{CORE}/replicationcontrollers/scaled/scale", lambda b: b["spec"].update(replicas=2))
    assert (await api.get(f"{CORE}/replicationcontrollers/scaled"))["spec"]["replicas"] == 2
    await count(api, "name=scaled", 2)


async def test_replication_controller_release_pods(api: Api) -> None:
    """[sig-apps] ReplicationController should release no longer matching pods"""
    await api.call("POST", f"{CORE}/replicationcontrollers", _rc("release"))
    (p,) = await count(api, "name=release", 1)
    await api.call("PATCH", f"{CORE}/pods/{p.metadata.name}", {"metadata": {"labels": {"name": "not-matching"}}},
                   content_type=MERGE)
    await until(lambda: api.client.pods.get(p.metadata.name, NS), "the pod released",
                check=lambda q: not q.metadata.ownerReferences)


async def test_replication_controller_lifecycle(api: Api) -> None:
    """[sig-apps] ReplicationController should test the lifecycle of a ReplicationController"""
    await api.call("POST", f"{CORE}/replicationcontrollers", _rc("life"))
    await run(api, await count(api, "name=life", 1))
    await until(lambda: api.get(f"{CORE}/replicationcontrollers/life"), "ready",
                check=lambda rc: rc.get("status", {}).get("readyReplicas") == 1)
    await api.call("PATCH", f"{CORE}/replicationcontrollers/life", {"metadata": {"labels": {"rc": "patched"}},
                                                                    "spec": {"replicas": 2}}, content_type=MERGE)
    await run(api, await count(api, "name=life", 2))
    await api.call("PATCH", f"{CORE}/replicationcontrollers/life/status", {"status": {
        "readyReplicas": 0, "availableReplicas": 0}}, content_type=MERGE)
    await until(lambda: api.get(f"{CORE}/replicationcontrollers/life"), "status set by the controller again",
                check=lambda rc: rc.get("status", {}).get("readyReplicas") == 2)
    await api.call("DELETE", f"{CORE}/replicationcontrollers?labelSelector=rc%3Dpatched")
    assert not (await api.get(f"{CORE}/replicationcontrollers?labelSelector=rc%3Dpatched"))["items"]


# ---------------------------------------------------------------- StatefulSet

def _sts(name: str, replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": {"sts": name}},
            "spec": {"replicas": replicas, "serviceName": "test", "selector": {"matchLabels": {"sts": name}},
                     "template": _template({"sts": name}), **spec}}


async def test_statefulset_burst_scaling(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] Burst scaling should run to
    completion even with unhealthy pods"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("burst", podManagementPolicy="Parallel"))
    await count(api, "sts=burst", 3)  # none ready, all made
    await api.call("PATCH", f"{APPS}/statefulsets/burst", {"spec": {"replicas": 0}}, content_type=MERGE)
    await count(api, "sts=burst", 0)


async def test_statefulset_scaling(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] Scaling should happen in
    predictable order and halt if any stateful pod is unhealthy"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("order"))
    for i in range(3):
        found = await count(api, "sts=order", i + 1)
        assert sorted(p.metadata.name for p in found) == [f"order-{k}" for k in range(i + 1)]
        def halted(ps: list[core_pb2.Pod], n: int = i + 1) -> bool:
            return len(ps) == n
        await holds(lambda: pods(api, "sts=order"), "halted while the newest is unhealthy", 0.3, check=halted)
        await run(api, [p for p in found if p.metadata.name == f"order-{i}"])
    unhealthy = await api.client.pods.get("order-0", NS)
    del unhealthy.status.conditions[:]
    unhealthy.status.conditions.add(type="Ready", status="False")
    await api.client.pods.update_status(unhealthy)
    await api.call("PATCH", f"{APPS}/statefulsets/order", {"spec": {"replicas": 0}}, content_type=MERGE)
    await holds(lambda: pods(api, "sts=order"), "no scale-down while order-0 is unhealthy", 0.5,
                check=lambda ps: len(ps) == 3)
    await run(api, [unhealthy])
    await count(api, "sts=order", 0)


async def test_statefulset_recreate_failed_pod(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] Should recreate evicted
    statefulset"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("evicted", replicas=1))
    (first,) = await count(api, "sts=evicted", 1)
    await end(api, [first], exit_code=1)
    await until(lambda: pods(api, "sts=evicted"), "made again at its ordinal",
                check=lambda ps: len(ps) == 1 and ps[0].metadata.name == "evicted-0"
                and ps[0].metadata.uid != first.metadata.uid)


async def test_statefulset_resource_replica_scaling(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should have a working scale
    subresource"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("sc", replicas=1))
    scale = await api.get(f"{APPS}/statefulsets/sc/scale")
    assert scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "sts=sc"
    await api.replace(f"{APPS}/statefulsets/sc/scale", lambda b: b["spec"].update(replicas=2))
    assert (await api.get(f"{APPS}/statefulsets/sc"))["spec"]["replicas"] == 2
    await api.call("PATCH", f"{APPS}/statefulsets/sc/scale", {"spec": {"replicas": 4}}, content_type=MERGE)
    assert (await api.get(f"{APPS}/statefulsets/sc/scale"))["spec"]["replicas"] == 4


async def test_statefulset_list_patch_and_delete_a_collection_of_statefulsets(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should list, patch and delete a
    collection of StatefulSets"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("coll", replicas=1))
    assert len((await api.get("/apis/apps/v1/statefulsets?labelSelector=sts%3Dcoll"))["items"]) == 1
    patched = await api.call("PATCH", f"{APPS}/statefulsets/coll", {"metadata": {"labels": {"coll": "patched"}}},
                             content_type=MERGE)
    assert patched["metadata"]["labels"]["coll"] == "patched"
    await api.call("DELETE", f"{APPS}/statefulsets?labelSelector=coll%3Dpatched")
    assert not (await api.get(f"{APPS}/statefulsets?labelSelector=sts%3Dcoll"))["items"]


async def _images(api: Api, selector: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.containers[0].image for p in await pods(api, selector)}


async def test_statefulset_rolling_update_with_partition(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should perform canary updates and
    phased rolling updates of template modifications"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("canary", podManagementPolicy="Parallel", updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"partition": 3}}))
    await run(api, await count(api, "sts=canary", 3))
    await api.call("PATCH", f"{APPS}/statefulsets/canary", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "busybox:1.36"}]}}}}, content_type=STRATEGIC)
    await holds(lambda: _images(api, "sts=canary"), "a partition above every ordinal: nothing updated", 0.5,
                check=lambda im: set(im.values()) == {"busybox"})
    await api.call("PATCH", f"{APPS}/statefulsets/canary", {"spec": {"updateStrategy": {"rollingUpdate": {
        "partition": 2}}}}, content_type=MERGE)
    await until(lambda: _images(api, "sts=canary"), "the canary (canary-2) updated",
                check=lambda im: im.get("canary-2") == "busybox:1.36")
    await run(api, [await api.client.pods.get("canary-2", NS)])
    # a pod below the partition deleted comes back at the current revision
    await api.client.pods.delete("canary-0", NS)
    await until(lambda: _images(api, "sts=canary"), "canary-0 back, not updated",
                check=lambda im: im.get("canary-0") == "busybox" and len(im) == 3)
    await run(api, [await api.client.pods.get("canary-0", NS)])
    await api.call("PATCH", f"{APPS}/statefulsets/canary", {"spec": {"updateStrategy": {"rollingUpdate": {
        "partition": 0}}}}, content_type=MERGE)
    for name in ("canary-1", "canary-0"):  # phased: down from the highest
        def updated(im: dict[str, str], n: str = name) -> bool:
            return im.get(n) == "busybox:1.36"
        await until(lambda: _images(api, "sts=canary"), f"{name} updated", check=updated)
        await run(api, [await api.client.pods.get(name, NS)])


async def test_statefulset_rolling_update(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should perform rolling updates
    and roll backs of template modifications"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("rb", podManagementPolicy="Parallel"))
    await run(api, await count(api, "sts=rb", 3))
    first = (await api.get(f"{APPS}/statefulsets/rb"))
    await until(lambda: api.get(f"{APPS}/statefulsets/rb"), "revisions set",
                check=lambda s: s.get("status", {}).get("currentRevision"))
    for image in ("busybox:1.36", "busybox"):  # the update, then its rollback
        await api.call("PATCH", f"{APPS}/statefulsets/rb", {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": image}]}}}}, content_type=STRATEGIC)
        for name in ("rb-2", "rb-1", "rb-0"):
            def at(im: dict[str, str], n: str = name, want: str = image) -> bool:
                return im.get(n) == want
            await until(lambda: _images(api, "sts=rb"), f"{name} at {image}", check=at)
            await run(api, [await api.client.pods.get(name, NS)])
        sts = await until(lambda: api.get(f"{APPS}/statefulsets/rb"), "the update complete",
                          check=lambda s: s["status"].get("currentRevision") == s["status"].get("updateRevision")
                          and s["status"].get("updatedReplicas") == 3)
    # the rollback went back to the first revision: no third one
    assert sts["status"]["updateRevision"] == first["status"].get("updateRevision") or \
        len((await api.get(f"{APPS}/controllerrevisions?labelSelector=sts%3Drb"))["items"]) == 2


async def test_statefulset_status_sub_resource(api: Api) -> None:
    """[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should validate Statefulset
    Status endpoints"""
    await api.call("POST", f"{APPS}/statefulsets", _sts("sst", replicas=1))
    await api.replace(f"{APPS}/statefulsets/sst/status", _status_condition)
    await api.call("PATCH", f"{APPS}/statefulsets/sst/status", {"status": {"conditions": [
        {"type": "StatusPatched", "status": "True"}]}}, content_type=MERGE)
    assert [c["type"] for c in (await api.get(f"{APPS}/statefulsets/sst/status"))["status"]["conditions"]] == [
        "StatusPatched"]

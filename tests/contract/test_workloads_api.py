"""The workload resources against their API contract (issue 20): defaults and validation
of Deployments, ReplicaSets, Jobs, PriorityClasses and PodDisruptionBudgets as upstream's,
the Priority admission plugin with upstream's messages, the scale subresource over REST,
and the finalizers a delete's propagationPolicy leaves for the garbage collector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, batch_pb2, core_pb2, meta_pb2, policy_pb2, scheduling_pb2


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Client]:
    async with Client(rest.address) as c:
        yield c


def template(labels: dict[str, str], restart: str = "") -> core_pb2.PodTemplateSpec:
    return core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels), spec=core_pb2.PodSpec(
        restartPolicy=restart, containers=[core_pb2.Container(name="main", image="busybox")]))


def deployment(name: str, labels: dict[str, str] | None = None, selector: dict[str, str] | None = None,
               **spec: Any) -> apps_pb2.Deployment:
    labels = labels if labels is not None else {"app": name}
    return apps_pb2.Deployment(metadata=meta_pb2.ObjectMeta(name=name), spec=apps_pb2.DeploymentSpec(
        selector=meta_pb2.LabelSelector(matchLabels=selector if selector is not None else labels),
        template=template(labels), **spec))


def pod(name: str, **spec: Any) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name=name), spec=core_pb2.PodSpec(
        containers=[core_pb2.Container(name="main", image="busybox")], **spec))


async def test_deployment_defaults_and_validation(api: Client) -> None:
    d = await api.deployments.create(deployment("web"))
    assert d.spec.replicas == 1 and d.spec.revisionHistoryLimit == 10 and d.spec.progressDeadlineSeconds == 600
    ru = d.spec.strategy.rollingUpdate
    assert d.spec.strategy.type == "RollingUpdate" and (ru.maxSurge.strVal, ru.maxUnavailable.strVal) == ("25%", "25%")
    spec = d.spec.template.spec
    assert spec.restartPolicy == "Always" and spec.terminationGracePeriodSeconds == 30 \
        and spec.containers[0].imagePullPolicy == "Always"

    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.create(deployment("mismatch", labels={"app": "a"}, selector={"app": "b"}))
    assert 'spec.template.metadata.labels: Invalid value: map[string]string{"app":"a"}: `selector` does not match ' \
           "template `labels`" in bad.value.message
    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.create(deployment("empty", labels={}, selector={}))
    assert "spec.selector" in bad.value.message and "empty selector is invalid for deployment" in bad.value.message
    blocked = deployment("blocked", strategy=apps_pb2.DeploymentStrategy(
        type="RollingUpdate", rollingUpdate=apps_pb2.RollingUpdateDeployment(
            maxSurge=core_pb2.IntOrString(intVal=0), maxUnavailable=core_pb2.IntOrString(intVal=0))))
    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.create(blocked)
    assert "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0" \
        in bad.value.message
    never = deployment("never")
    never.spec.template.spec.restartPolicy = "Never"
    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.create(never)
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"' \
        in bad.value.message
    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.create(deployment("negative", replicas=-1))
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in bad.value.message

    d.spec.selector.matchLabels["tier"] = "x"
    d.spec.template.metadata.labels["tier"] = "x"
    with pytest.raises(errors.Invalid) as bad:
        await api.deployments.update(d)
    assert "spec.selector: Invalid value: field is immutable" in bad.value.message


async def test_replicaset_status_and_job_selector(api: Client) -> None:
    rs = await api.replicasets.create(apps_pb2.ReplicaSet(
        metadata=meta_pb2.ObjectMeta(name="rs"), spec=apps_pb2.ReplicaSetSpec(
            replicas=2, selector=meta_pb2.LabelSelector(matchLabels={"app": "rs"}), template=template({"app": "rs"}))))
    assert dict(rs.metadata.labels) == {"app": "rs"}  # an unlabeled ReplicaSet takes its template's labels
    rs.status.replicas, rs.status.readyReplicas = 1, 2
    with pytest.raises(errors.Invalid) as bad:
        await api.replicasets.update_status(rs)
    assert "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas" in bad.value.message

    job = await api.jobs.create(batch_pb2.Job(metadata=meta_pb2.ObjectMeta(name="job"), spec=batch_pb2.JobSpec(
        template=template({}, restart="Never"))))
    uid = job.metadata.uid
    assert dict(job.spec.selector.matchLabels) == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "job"
    assert (job.spec.completions, job.spec.parallelism, job.spec.backoffLimit) == (1, 1, 6)
    job.spec.completions = 3
    with pytest.raises(errors.Invalid) as bad:
        await api.jobs.update(job)
    assert "spec.completions: Invalid value: field is immutable" in bad.value.message
    with pytest.raises(errors.Invalid) as bad:
        await api.jobs.create(batch_pb2.Job(metadata=meta_pb2.ObjectMeta(name="always"), spec=batch_pb2.JobSpec(
            template=template({}))))
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"' \
        in bad.value.message


async def test_priority_admission(api: Client) -> None:
    system = await api.priorityclasses.get("system-node-critical")
    assert system.value == 2000001000  # made at start, as upstream's apiserver does
    with pytest.raises(errors.Invalid) as bad:
        await api.priorityclasses.create(scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="huge"),
                                                                      value=2_000_000_000))
    assert "maximum allowed value of a user defined priority is 1000000000" in bad.value.message
    with pytest.raises(errors.Invalid) as bad:
        await api.priorityclasses.create(scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="system-x")))
    assert "priority class names with 'system-' prefix are reserved" in bad.value.message

    await api.priorityclasses.create(scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="high"),
                                                                  value=1000, preemptionPolicy="Never"))
    plain = await api.pods.create(pod("plain"))
    assert (plain.spec.priority, plain.spec.priorityClassName, plain.spec.preemptionPolicy) == \
        (0, "", "PreemptLowerPriority")
    high = await api.pods.create(pod("high", priorityClassName="high"))
    assert (high.spec.priority, high.spec.preemptionPolicy) == (1000, "Never")
    critical = await api.pods.create(pod("critical", priorityClassName="system-node-critical"))
    assert critical.spec.priority == 2000001000

    with pytest.raises(errors.Forbidden) as refused:
        await api.pods.create(pod("own", priorityClassName="high", priority=5))
    assert refused.value.message == 'pods "own" is forbidden: the integer value of priority (5) must not be ' \
                                    "provided in pod spec; priority admission controller computed 1000 from the " \
                                    "given PriorityClass name"
    with pytest.raises(errors.Forbidden) as refused:
        await api.pods.create(pod("nowhere", priorityClassName="missing"))
    assert refused.value.message == 'pods "nowhere" is forbidden: no PriorityClass with name missing was found'

    await api.priorityclasses.create(scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="default"),
                                                                  value=7, globalDefault=True))
    with pytest.raises(errors.Forbidden) as refused:
        await api.priorityclasses.create(scheduling_pb2.PriorityClass(
            metadata=meta_pb2.ObjectMeta(name="default2"), value=8, globalDefault=True))
    assert "PriorityClass default is already marked as default. Only one default can exist" in refused.value.message
    defaulted = await api.pods.create(pod("defaulted"))
    assert (defaulted.spec.priority, defaulted.spec.priorityClassName) == (7, "default")
    pc = await api.priorityclasses.get("high")
    pc.value = 1
    with pytest.raises(errors.Invalid):
        await api.priorityclasses.update(pc)


async def test_pdb_validation(api: Client) -> None:
    both = policy_pb2.PodDisruptionBudget(
        metadata=meta_pb2.ObjectMeta(name="both"), spec=policy_pb2.PodDisruptionBudgetSpec(
            minAvailable=core_pb2.IntOrString(intVal=1), maxUnavailable=core_pb2.IntOrString(intVal=1)))
    with pytest.raises(errors.Invalid) as bad:
        await api.poddisruptionbudgets.create(both)
    assert "minAvailable and maxUnavailable cannot be both set" in bad.value.message
    over = policy_pb2.PodDisruptionBudget(
        metadata=meta_pb2.ObjectMeta(name="over"), spec=policy_pb2.PodDisruptionBudgetSpec(
            minAvailable=core_pb2.IntOrString(type=1, strVal="150%")))
    with pytest.raises(errors.Invalid) as bad:
        await api.poddisruptionbudgets.create(over)
    assert 'spec.minAvailable: Invalid value: "150%": must not be greater than 100%' in bad.value.message


async def test_scale_subresource_and_propagation_finalizers(rest: APIServer, api: Client) -> None:
    await api.deployments.create(deployment("web", replicas=2))
    base = f"http://{rest.rest_address}/apis/apps/v1/namespaces/default/deployments/web"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/scale") as r:
            scale = await r.json()
        assert r.status == 200 and scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
        assert scale["spec"]["replicas"] == 2 and scale["status"]["selector"] == "app=web"
        async with http.patch(f"{base}/scale", json={"spec": {"replicas": 5}},
                              headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200 and (await r.json())["spec"]["replicas"] == 5
        assert (await api.deployments.get("web")).spec.replicas == 5
        async with http.put(f"{base}/scale", json={"kind": "Scale", "apiVersion": "autoscaling/v1",
                                                   "metadata": {"name": "web", "resourceVersion": "1"},
                                                   "spec": {"replicas": 1}}) as r:
            assert r.status == 409  # a stale resourceVersion precondition
        async with http.put(f"{base}/scale", json={"spec": {"replicas": -1}}) as r:
            body = await r.json()
            assert r.status == 422 and "must be greater than or equal to 0" in body["message"]
        async with http.delete(base, json={"propagationPolicy": "Sideways"}) as r:
            assert r.status == 400 and 'Unsupported value: "Sideways"' in (await r.json())["message"]
        async with http.delete(base, json={"kind": "DeleteOptions", "apiVersion": "v1",
                                           "propagationPolicy": "Orphan"}) as r:
            assert r.status == 200
    # The garbage collector (not running here) has the last word: the object waits for it.
    orphaned = await api.deployments.get("web")
    assert orphaned.metadata.HasField("deletionTimestamp") and list(orphaned.metadata.finalizers) == ["orphan"]
    await api.deployments.delete("web", propagation_policy="Foreground")  # the instructions can change
    assert list((await api.deployments.get("web")).metadata.finalizers) == ["foregroundDeletion"]
    rs = await api.replicasets.create(apps_pb2.ReplicaSet(
        metadata=meta_pb2.ObjectMeta(name="plain"), spec=apps_pb2.ReplicaSetSpec(
            selector=meta_pb2.LabelSelector(matchLabels={"app": "p"}), template=template({"app": "p"}))))
    await api.replicasets.delete(rs.metadata.name, propagation_policy="Background")
    with pytest.raises(errors.NotFound):
        await api.replicasets.get("plain")  # background: gone at once, dependents collected later

"""The workload APIs of issue 37 against their contract: DaemonSets, StatefulSets,
ControllerRevisions, CronJobs and ReplicationControllers with upstream's defaults,
validation messages and immutable fields; the scale subresource of StatefulSets and
ReplicationControllers; a ControllerRevision's data shown as the object it holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from apiserver.server import APIServer
from kubeling import errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, autoscaling_pb2, batch_pb2, core_pb2, meta_pb2
from tests.objects import pod


@pytest.fixture
async def api(rest: APIServer) -> AsyncIterator[Client]:
    async with Client(rest.address) as c:
        yield c


def _meta(name: str) -> meta_pb2.ObjectMeta:
    return meta_pb2.ObjectMeta(name=name, namespace="default")


def template(labels: dict[str, str] | None = None, restart: str = "") -> core_pb2.PodTemplateSpec:
    spec = core_pb2.PodSpec(containers=pod("t").spec.containers, restartPolicy=restart)
    return core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels=labels or {"app": "x"}), spec=spec)


_SELECTOR = meta_pb2.LabelSelector(matchLabels={"app": "x"})


async def invalid(call: Any) -> str:
    with pytest.raises(errors.Invalid) as err:
        await call
    return err.value.message


async def test_daemonset_defaults_and_validation(api: Client) -> None:
    made = await api.daemonsets.create(apps_pb2.DaemonSet(metadata=_meta("ds"), spec=apps_pb2.DaemonSetSpec(
        selector=_SELECTOR, template=template())))
    strategy = made.spec.updateStrategy
    assert strategy.type == "RollingUpdate"
    assert strategy.rollingUpdate.maxUnavailable.intVal == 1 and strategy.rollingUpdate.maxSurge.intVal == 0
    assert made.spec.revisionHistoryLimit == 10 and made.metadata.generation == 1

    message = await invalid(api.daemonsets.create(apps_pb2.DaemonSet(metadata=_meta("bad"), spec=(
        apps_pb2.DaemonSetSpec(selector=meta_pb2.LabelSelector(matchLabels={"app": "y"}), template=template())))))
    assert 'spec.template.metadata.labels: Invalid value: map[string]string{"app":"x"}: `selector` does not ' \
           'match template `labels`' in message
    zero = apps_pb2.DaemonSetUpdateStrategy(type="RollingUpdate", rollingUpdate=apps_pb2.RollingUpdateDaemonSet(
        maxUnavailable=core_pb2.IntOrString(intVal=0), maxSurge=core_pb2.IntOrString(intVal=0)))
    message = await invalid(api.daemonsets.create(apps_pb2.DaemonSet(metadata=_meta("bad"), spec=(
        apps_pb2.DaemonSetSpec(selector=_SELECTOR, template=template(), updateStrategy=zero)))))
    assert "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` " \
           "is 0" in message
    message = await invalid(api.daemonsets.create(apps_pb2.DaemonSet(metadata=_meta("bad"), spec=(
        apps_pb2.DaemonSetSpec(selector=_SELECTOR, template=template(restart="Never"))))))
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never"' in message

    changed = apps_pb2.DaemonSet()
    changed.CopyFrom(made)
    changed.spec.selector.matchLabels["tier"] = "a"
    changed.spec.template.metadata.labels["tier"] = "a"
    assert "spec.selector: Invalid value: field is immutable" in await invalid(api.daemonsets.update(changed))


def statefulset(name: str = "web", **spec: Any) -> apps_pb2.StatefulSet:
    spec.setdefault("selector", _SELECTOR)
    spec.setdefault("template", template())
    spec.setdefault("serviceName", name)
    return apps_pb2.StatefulSet(metadata=_meta(name), spec=apps_pb2.StatefulSetSpec(**spec))


async def test_statefulset_defaults_and_its_immutable_fields(api: Client) -> None:
    claim = core_pb2.PersistentVolumeClaim(metadata=meta_pb2.ObjectMeta(name="www"), spec=(
        core_pb2.PersistentVolumeClaimSpec(accessModes=["ReadWriteOnce"], resources=(
            core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"})))))
    made = await api.statefulsets.create(statefulset(volumeClaimTemplates=[claim]))
    spec = made.spec
    assert spec.replicas == 1 and spec.podManagementPolicy == "OrderedReady" and spec.revisionHistoryLimit == 10
    assert spec.updateStrategy.type == "RollingUpdate" and spec.updateStrategy.rollingUpdate.partition == 0
    policy = spec.persistentVolumeClaimRetentionPolicy
    assert (policy.whenDeleted, policy.whenScaled) == ("Retain", "Retain")
    assert spec.volumeClaimTemplates[0].spec.volumeMode == "Filesystem"

    changed = apps_pb2.StatefulSet()
    changed.CopyFrom(made)
    changed.spec.replicas = 3
    changed.spec.updateStrategy.rollingUpdate.partition = 2
    assert (await api.statefulsets.update(changed)).spec.replicas == 3
    changed = await api.statefulsets.get("web", "default")
    changed.spec.volumeClaimTemplates[0].spec.resources.requests["storage"] = "2Gi"
    assert "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', " \
           "'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and " \
           "'minReadySeconds' are forbidden" in await invalid(api.statefulsets.update(changed))

    message = await invalid(api.statefulsets.create(statefulset(
        "bad", podManagementPolicy="Random", volumeClaimTemplates=[core_pb2.PersistentVolumeClaim(
            metadata=meta_pb2.ObjectMeta(name="data"))])))
    assert 'spec.podManagementPolicy: Unsupported value: "Random"' in message
    assert "spec.volumeClaimTemplates[0].spec.accessModes: Required value" in message


def cronjob(name: str = "hello", schedule: str = "*/1 * * * *", **spec: Any) -> batch_pb2.CronJob:
    job = batch_pb2.JobSpec(template=template(restart="OnFailure"))
    return batch_pb2.CronJob(metadata=_meta(name), spec=batch_pb2.CronJobSpec(
        schedule=schedule, jobTemplate=batch_pb2.JobTemplateSpec(spec=job), **spec))


async def test_cronjob_defaults_and_schedule_validation(api: Client) -> None:
    made = await api.cronjobs.create(cronjob())
    spec = made.spec
    assert spec.concurrencyPolicy == "Allow" and spec.suspend is False
    assert (spec.successfulJobsHistoryLimit, spec.failedJobsHistoryLimit) == (3, 1)
    assert spec.jobTemplate.spec.backoffLimit == 6 and spec.jobTemplate.spec.completions == 1

    message = await invalid(api.cronjobs.create(cronjob("bad", "* * * *")))
    assert 'spec.schedule: Invalid value: "* * * *": expected exactly 5 fields, found 4: * * * *' in message
    message = await invalid(api.cronjobs.create(cronjob("bad", "@every 5m", timeZone="Mars/Olympus_Mons")))
    assert 'spec.timeZone: Invalid value: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons' in message
    message = await invalid(api.cronjobs.create(cronjob("bad", "CRON_TZ=UTC 0 * * * *")))
    assert "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" in message
    message = await invalid(api.cronjobs.create(cronjob("bad", concurrencyPolicy="Sometimes")))
    assert 'spec.concurrencyPolicy: Unsupported value: "Sometimes"' in message
    bad = cronjob("bad")
    bad.spec.jobTemplate.spec.template.spec.restartPolicy = "Always"
    assert 'spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always"' in await invalid(
        api.cronjobs.create(bad))
    assert "must be no more than 52 characters" in await invalid(api.cronjobs.create(cronjob("x" * 53)))
    zoned = await api.cronjobs.create(cronjob("zoned", "0 9 * * MON-FRI", timeZone="Europe/Berlin"))
    assert zoned.spec.timeZone == "Europe/Berlin"


async def test_controller_revision_data_is_immutable_and_shown_as_json(api: Client, rest: APIServer) -> None:
    made = await api.controllerrevisions.create(apps_pb2.ControllerRevision(
        metadata=_meta("ds-abc"), revision=1, data=apps_pb2.RawExtension(raw=b'{"spec":{"template":{}}}')))
    changed = apps_pb2.ControllerRevision()
    changed.CopyFrom(made)
    changed.data.raw = b'{"spec":{}}'
    assert "data: Invalid value: field is immutable" in await invalid(api.controllerrevisions.update(changed))
    assert "data: Required value" in await invalid(api.controllerrevisions.create(apps_pb2.ControllerRevision(
        metadata=_meta("empty"), revision=1)))
    async with aiohttp.ClientSession() as http:
        url = f"http://{rest.rest_address}/apis/apps/v1/namespaces/default/controllerrevisions/ds-abc"
        async with http.get(url) as response:
            body = await response.json()
        assert body["data"] == {"spec": {"template": {}}} and body["revision"] == 1
        async with http.post(url.rsplit("/", 1)[0], json={
                "apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "from-json"},
                "revision": 2, "data": {"spec": {"x": 1}}}) as response:
            assert response.status == 201, await response.text()
    stored = await api.controllerrevisions.get("from-json", "default")
    assert stored.data.raw == b'{"spec":{"x":1}}'


async def test_replication_controller_defaults_and_scale(api: Client, rest: APIServer) -> None:
    made = await api.replicationcontrollers.create(core_pb2.ReplicationController(
        metadata=_meta("rc"), spec=core_pb2.ReplicationControllerSpec(template=template({"app": "rc"}))))
    assert dict(made.spec.selector) == {"app": "rc"} and dict(made.metadata.labels) == {"app": "rc"}
    assert made.spec.replicas == 1
    message = await invalid(api.replicationcontrollers.create(core_pb2.ReplicationController(
        metadata=_meta("bad"), spec=core_pb2.ReplicationControllerSpec(selector={"app": "other"},
                                                                       template=template({"app": "rc"})))))
    assert "spec.template.metadata.labels: Invalid value: " in message
    await api.statefulsets.create(statefulset())
    async with aiohttp.ClientSession() as http:
        for path, name in (("api/v1/namespaces/default/replicationcontrollers", "rc"),
                           ("apis/apps/v1/namespaces/default/statefulsets", "web")):
            url = f"http://{rest.rest_address}/{path}/{name}/scale"
            async with http.get(url) as response:
                scale = await response.json()
            assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1, scale
            assert scale["status"]["selector"] == ("app=rc" if name == "rc" else "app=x")
            async with http.patch(url, json={"spec": {"replicas": 4}},
                                  headers={"Content-Type": "application/merge-patch+json"}) as response:
                assert response.status == 200, await response.text()
    assert (await api.replicationcontrollers.get("rc", "default")).spec.replicas == 4
    assert (await api.statefulsets.get("web", "default")).spec.replicas == 4


async def test_scale_subresource_over_grpc(api: Client) -> None:
    await api.statefulsets.create(statefulset("grpc"))
    scale = await api.statefulsets.get_scale("grpc", "default")
    assert (scale.metadata.name, scale.spec.replicas, scale.status.selector) == ("grpc", 1, "app=x")
    scale.spec.replicas = 3
    updated = await api.statefulsets.update_scale(scale)
    assert updated.spec.replicas == 3 and (await api.statefulsets.get("grpc", "default")).spec.replicas == 3
    with pytest.raises(errors.Conflict):
        await api.statefulsets.update_scale(scale)  # its resourceVersion is stale now
    scale.metadata.resourceVersion = ""
    scale.spec.replicas = -1
    with pytest.raises(errors.Invalid, match="spec.replicas: Invalid value: -1"):
        await api.statefulsets.update_scale(scale)
    dry = await api.statefulsets.update_scale(autoscaling_pb2.Scale(
        metadata=meta_pb2.ObjectMeta(name="grpc", namespace="default"), spec=autoscaling_pb2.ScaleSpec(replicas=5)),
        dry_run=True)
    assert dry.spec.replicas == 5 and (await api.statefulsets.get("grpc", "default")).spec.replicas == 3
    with pytest.raises(errors.NotFound):
        await api.daemonsets.get_scale("any", "default")  # DaemonSets have no scale
    with pytest.raises(errors.NotFound):
        await api.replicationcontrollers.get_scale("missing", "default")


def _hpa_v2(name: str, **spec: Any) -> autoscaling_pb2.HorizontalPodAutoscaler:
    ref = autoscaling_pb2.CrossVersionObjectReference(apiVersion="apps/v1", kind="Deployment", name="web")
    spec = autoscaling_pb2.HorizontalPodAutoscalerSpec(scaleTargetRef=ref, **spec)
    return autoscaling_pb2.HorizontalPodAutoscaler(metadata=_meta(name), spec=spec)


async def test_hpa_v2_stored_and_v1_served_from_it(api: Client, rest: APIServer) -> None:
    base = f"http://{rest.rest_address}/apis/autoscaling"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/v1/namespaces/default/horizontalpodautoscalers", json={
                "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}}) as response:
            made = await response.json()
            assert response.status == 201, made
        assert made["spec"]["minReplicas"] == 1 and made["apiVersion"] == "autoscaling/v1"
        v2 = await api.horizontalpodautoscalers.get("web", "default")
        (metric,) = v2.spec.metrics
        assert (metric.type, metric.resource.name, metric.resource.target.type,
                metric.resource.target.averageUtilization) == ("Resource", "cpu", "Utilization", 50)

        # v2 says more than v1 can: v1 shows what it can, and a v1 write keeps the rest
        memory = autoscaling_pb2.MetricSpec(type="Resource", resource=autoscaling_pb2.ResourceMetricSource(
            name="memory", target=autoscaling_pb2.MetricTarget(type="AverageValue", averageValue="64Mi")))
        made2 = await api.horizontalpodautoscalers.create(_hpa_v2(
            "mem", maxReplicas=4, metrics=[memory], behavior=autoscaling_pb2.HorizontalPodAutoscalerBehavior(
                scaleDown=autoscaling_pb2.HPAScalingRules(stabilizationWindowSeconds=30))))
        assert made2.spec.behavior.scaleDown.policies[0].type == "Percent"  # defaulted
        assert made2.spec.behavior.scaleUp.selectPolicy == "Max"
        url = f"{base}/v1/namespaces/default/horizontalpodautoscalers/mem"
        async with http.get(url) as response:
            v1 = await response.json()
        assert "targetCPUUtilizationPercentage" not in v1["spec"] and v1["spec"]["maxReplicas"] == 4
        v1["spec"]["maxReplicas"] = 6
        v1["spec"]["targetCPUUtilizationPercentage"] = 70
        async with http.put(url, json=v1) as response:
            assert response.status == 200, await response.text()
        kept = await api.horizontalpodautoscalers.get("mem", "default")
        assert kept.spec.maxReplicas == 6 and kept.spec.behavior.scaleDown.stabilizationWindowSeconds == 30
        assert sorted(m.resource.name for m in kept.spec.metrics) == ["cpu", "memory"]

        async with http.get(f"{base}/v1/namespaces/default/horizontalpodautoscalers") as response:
            listed = await response.json()
        assert listed["kind"] == "HorizontalPodAutoscalerList" and len(listed["items"]) == 2
        async with http.get(f"{base}/v2/namespaces/default/horizontalpodautoscalers", headers={
                "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}) as response:
            table = await response.json()
        rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
        assert rows["web"][1:6] == ["Deployment/web", "cpu: <unknown>/50%", 1, 5, 0]
        assert rows["mem"][2] == "cpu: <unknown>/70%, memory: <unknown>/64Mi"
        async with http.delete(url) as response:
            assert response.status == 200
    with pytest.raises(errors.NotFound):
        await api.horizontalpodautoscalers.get("mem", "default")


async def test_hpa_validation(api: Client) -> None:
    message = await invalid(api.horizontalpodautoscalers.create(_hpa_v2("bad", minReplicas=3, maxReplicas=2)))
    assert "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`" in message
    bad = _hpa_v2("bad", maxReplicas=2, metrics=[autoscaling_pb2.MetricSpec(
        type="Resource", resource=autoscaling_pb2.ResourceMetricSource(
            name="cpu", target=autoscaling_pb2.MetricTarget(type="Utilization", averageUtilization=0)))])
    bad.spec.scaleTargetRef.name = ""
    message = await invalid(api.horizontalpodautoscalers.create(bad))
    assert "spec.scaleTargetRef.name: Required value" in message
    assert "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0" in message
    policy = autoscaling_pb2.HorizontalPodAutoscalerBehavior(scaleUp=autoscaling_pb2.HPAScalingRules(
        policies=[autoscaling_pb2.HPAScalingPolicy(type="Pods", value=1, periodSeconds=3600)]))
    assert "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to " \
           "1800" in await invalid(api.horizontalpodautoscalers.create(_hpa_v2("bad", maxReplicas=2,
                                                                               behavior=policy)))

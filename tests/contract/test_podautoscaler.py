"""The HorizontalPodAutoscaler controller (controllers/podautoscaler.py) against a real
apiserver, where no kubelet reports metrics: its conditions and events in upstream's
words for a target without a scale subresource, a target scaled to zero, pods without
metrics; a Deployment and a custom resource brought into min/maxReplicas through their
scale subresources. Scaling on real cpu
usage is tests/e2e/test_workloads_more.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controllers.manager import ControllerManager, ManagerConfig
from kubeling import dynamic, errors
from kubeling.client import Client
from protos.kubeling.v1 import apps_pb2, autoscaling_pb2, core_pb2, meta_pb2
from tests.objects import pod
from tests.wait import until


@pytest.fixture
async def fast(client: Client) -> AsyncIterator[ControllerManager]:
    made = ControllerManager(Client(client.address), ManagerConfig(leader_elect=False,
                                                                    horizontal_pod_autoscaler_sync_period=0.3))
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


def hpa(name: str, kind: str, target: str, api_version: str = "apps/v1") -> autoscaling_pb2.HorizontalPodAutoscaler:
    ref = autoscaling_pb2.CrossVersionObjectReference(apiVersion=api_version, kind=kind, name=target)
    return autoscaling_pb2.HorizontalPodAutoscaler(
        metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
        spec=autoscaling_pb2.HorizontalPodAutoscalerSpec(scaleTargetRef=ref, maxReplicas=5))


def condition(h: autoscaling_pb2.HorizontalPodAutoscaler, kind: str) -> tuple[str, str, str]:
    c = next((c for c in h.status.conditions if c.type == kind), None)
    return (c.status, c.reason, c.message) if c is not None else ("", "", "")


async def get(client: Client, name: str) -> autoscaling_pb2.HorizontalPodAutoscaler:
    return await client.horizontalpodautoscalers.get(name, "default")


def deployment(name: str, replicas: int) -> apps_pb2.Deployment:
    template = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": name}),
                                        spec=core_pb2.PodSpec(containers=pod("t", cpu="100m").spec.containers))
    return apps_pb2.Deployment(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"), spec=(
        apps_pb2.DeploymentSpec(replicas=replicas, selector=meta_pb2.LabelSelector(matchLabels={"app": name}),
                                template=template)))


async def test_a_target_without_scale(client: Client, fast: ControllerManager) -> None:
    await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name="cm", namespace="default")))
    await client.horizontalpodautoscalers.create(hpa("cm", "ConfigMap", "cm", api_version="v1"))
    h = await until(lambda: get(client, "cm"), "AbleToScale False", check=lambda h: condition(h, "AbleToScale")[0])
    assert condition(h, "AbleToScale") == (
        "False", "FailedGetScale", "the HPA controller was unable to get the target's current scale: the server "
                                   "could not find the requested resource")
    await client.horizontalpodautoscalers.create(hpa("nope", "Widget", "w", api_version="example.com/v1"))
    h = await until(lambda: get(client, "nope"), "no such kind", check=lambda h: condition(h, "AbleToScale")[0])
    assert condition(h, "AbleToScale")[2].endswith('no matches for kind "Widget" in group "example.com"')
    events = (await client.events.list_all("default"))[0]
    assert any(e.reason == "FailedGetScale" and e.involvedObject.name == "cm" for e in events)


async def test_zero_replicas_disable_scaling_and_no_metrics_stop_it(client: Client, fast: ControllerManager) -> None:
    await client.deployments.create(deployment("idle", 0))
    await client.horizontalpodautoscalers.create(hpa("idle", "Deployment", "idle"))
    h = await until(lambda: get(client, "idle"), "ScalingActive", check=lambda h: condition(h, "ScalingActive")[0])
    assert condition(h, "ScalingActive") == (
        "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
    assert h.status.desiredReplicas == 0 and h.status.observedGeneration == 1

    await client.deployments.create(deployment("busy", 2))
    await client.horizontalpodautoscalers.create(hpa("busy", "Deployment", "busy"))
    h = await until(lambda: get(client, "busy"), "ScalingActive False",
                    check=lambda h: condition(h, "ScalingActive")[0] == "False")
    status, reason, message = condition(h, "ScalingActive")
    assert reason == "FailedGetResourceMetric"
    assert message.startswith("the HPA was unable to compute the replica count: failed to get cpu utilization: ")
    assert condition(h, "AbleToScale")[:2] == ("True", "SucceededGetScale") and h.status.currentReplicas == 2


async def test_replicas_brought_into_range_for_a_deployment_and_a_custom_resource(
        client: Client, fast: ControllerManager) -> None:
    await client.deployments.create(deployment("wide", 7))
    await client.horizontalpodautoscalers.create(hpa("wide", "Deployment", "wide"))  # maxReplicas 5
    await until(lambda: client.deployments.get("wide", "default"), "scaled down to maxReplicas",
                check=lambda d: d.spec.replicas == 5)
    events = (await client.events.list_all("default"))[0]
    assert any(e.reason == "SuccessfulRescale" and e.message == "New size: 5; reason: Current number of replicas "
               "above Spec.MaxReplicas" for e in events if e.involvedObject.name == "wide")

    # a custom resource with a scale subresource, as its definition's paths say
    await client.customresourcedefinitions.create(dynamic.new({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                     "statusReplicasPath": ".status.size",
                                                     "labelSelectorPath": ".status.selector"}},
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": True}}}]}}))
    pools = client.dynamic("example.com/v1", "pools", "Pool")
    await until(lambda: pools.list("default"), "the Pool resource served", retry_on=(errors.NotFound,
                                                                                      errors.ServiceUnavailable))
    await pools.create(dynamic.new({"apiVersion": "example.com/v1", "kind": "Pool",
                                    "metadata": {"name": "p", "namespace": "default"}, "spec": {"size": 1}}))
    made = hpa("pool", "Pool", "p", api_version="example.com/v1")
    made.spec.minReplicas = 3
    await client.horizontalpodautoscalers.create(made)
    scaled = await until(lambda: pools.get("p", "default"), "the Pool scaled to minReplicas",
                         check=lambda p: dynamic.content_of(p)["spec"]["size"] == 3)
    assert dynamic.content_of(scaled)["spec"]["size"] == 3

"""Quota arithmetic and evaluators (kubeling.quota), and pods' requests and QoS
(kubeling.podresources), against upstream's unit tests' cases."""

from __future__ import annotations

from kubeling.podresources import pod_limits, pod_requests, qos_class
from kubeling.quota import evaluator_for, group_resource_of, quota_matches
from kubeling.quota import resources as rl
from protos.kubeling.v1 import core_pb2, meta_pb2


def _container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
               restart: str = "") -> core_pb2.Container:
    c = core_pb2.Container(name=name, resources=core_pb2.ResourceRequirements(requests=requests or {},
                                                                             limits=limits or {}))
    if restart:
        c.restartPolicy = restart
    return c


def _pod(*containers: core_pb2.Container, init: tuple[core_pb2.Container, ...] = (), **spec: object) -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="ns"),
                        spec=core_pb2.PodSpec(containers=containers, initContainers=init, **spec))  # type: ignore


def _strings(values: rl.ResourceList) -> dict[str, str]:
    return rl.to_strings(values)


def test_pod_requests_take_the_larger_of_app_containers_and_init_containers_with_sidecars() -> None:
    pod = _pod(_container("a", {"cpu": "100m"}), _container("b", {"cpu": "200m", "memory": "1Gi"}),
               init=(_container("sidecar", {"cpu": "50m"}, restart="Always"), _container("init", {"cpu": "1"})),
               overhead={"cpu": "10m"})
    # apps + sidecar = 350m; the init container runs beside the sidecar started before it: 1050m
    assert _strings(pod_requests(pod.spec)) == {"cpu": "1060m", "memory": "1Gi"}
    assert pod_limits(pod.spec) == {"cpu": rl.parse({"cpu": "10m"})["cpu"]}  # only the overhead


def test_qos_classes() -> None:
    assert qos_class(_pod(_container("a")).spec) == "BestEffort"
    assert qos_class(_pod(_container("a", {"cpu": "1"})).spec) == "Burstable"
    both = {"cpu": "1", "memory": "1Gi"}
    assert qos_class(_pod(_container("a", both, both)).spec) == "Guaranteed"
    assert qos_class(_pod(_container("a", both, both), _container("b", {"cpu": "1"}, {"cpu": "1"})).spec) == \
        "Burstable"
    assert qos_class(_pod(_container("a", {"cpu": "0"})).spec) == "BestEffort"  # zero asks for nothing


def test_pod_usage_by_quota_names_and_end_of_life() -> None:
    pods = evaluator_for("pods")
    pod = _pod(_container("a", {"cpu": "500m", "memory": "252Mi", "example.com/dongle": "2",
                                "hugepages-2Mi": "4Mi"}, {"cpu": "1"}))
    assert _strings(pods.usage(pod)) == {
        "count/pods": "1", "pods": "1", "cpu": "500m", "requests.cpu": "500m", "limits.cpu": "1",
        "memory": "252Mi", "requests.memory": "252Mi", "requests.example.com/dongle": "2",
        "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"}
    pod.status.phase = "Succeeded"
    assert _strings(pods.usage(pod)) == {"count/pods": "1"}  # stored, but no longer using anything
    pod.status.phase = "Running"
    pod.metadata.deletionTimestamp.FromSeconds(1000)
    pod.metadata.deletionGracePeriodSeconds = 30
    assert _strings(pods.usage(pod, now=1031)) == {"count/pods": "1"}
    assert "pods" in pods.usage(pod, now=1029)


def test_matching_resources_and_scopes() -> None:
    pods = evaluator_for("pods")
    assert pods.matching_resources(["pods", "requests.example.com/dongle", "services", "count/pods",
                                    "requests.nvidia.com/gpu", "limits.cpu"]) == [
        "pods", "requests.example.com/dongle", "count/pods", "requests.nvidia.com/gpu", "limits.cpu"]
    quota = core_pb2.ResourceQuota(spec=core_pb2.ResourceQuotaSpec(scopes=["Terminating"]))
    pod = _pod(_container("a"))
    assert not quota_matches(quota, ["pods"], pods, pod)
    pod.spec.activeDeadlineSeconds = 60
    assert quota_matches(quota, ["pods"], pods, pod)
    assert not quota_matches(quota, ["services"], pods, pod)  # nothing it limits is a pod's
    selector = core_pb2.ResourceQuota(spec=core_pb2.ResourceQuotaSpec(scopeSelector=core_pb2.ScopeSelector(
        matchExpressions=[core_pb2.ScopedResourceSelectorRequirement(scopeName="PriorityClass", operator="NotIn",
                                                                     values=["high"])])))
    assert quota_matches(selector, ["pods"], pods, pod)  # no class is not "high"
    pod.spec.priorityClassName = "high"
    assert not quota_matches(selector, ["pods"], pods, pod)
    # a scoped quota counts pods only
    assert not quota_matches(quota, ["configmaps"], evaluator_for("configmaps"), core_pb2.ConfigMap())


def test_services_claims_and_object_counts() -> None:
    services = evaluator_for("services")
    lb = core_pb2.Service(spec=core_pb2.ServiceSpec(type="LoadBalancer", ports=[core_pb2.ServicePort(port=80),
                                                                                core_pb2.ServicePort(port=443)]))
    assert _strings(services.usage(lb)) == {"services": "1", "count/services": "1", "services.loadbalancers": "1",
                                            "services.nodeports": "2"}
    lb.spec.allocateLoadBalancerNodePorts = False
    assert _strings(services.usage(lb))["services.nodeports"] == "0"
    claims = evaluator_for("persistentvolumeclaims")
    claim = core_pb2.PersistentVolumeClaim(spec=core_pb2.PersistentVolumeClaimSpec(
        storageClassName="gold", resources=core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"})))
    claim.status.allocatedResources["storage"] = "2Gi"  # a resize under way is charged at its larger size
    assert _strings(claims.usage(claim)) == {
        "persistentvolumeclaims": "1", "count/persistentvolumeclaims": "1", "requests.storage": "2Gi",
        "gold.storageclass.storage.k8s.io/requests.storage": "2Gi",
        "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1"}
    assert _strings(evaluator_for("deployments.apps").usage(object())) == {"count/deployments.apps": "1"}
    assert _strings(evaluator_for("secrets").usage(object())) == {"count/secrets": "1", "secrets": "1"}
    assert evaluator_for("configmaps").handles("CREATE", "") and not evaluator_for("configmaps").handles("UPDATE", "")
    assert evaluator_for("pods").handles("UPDATE", "resize") and not evaluator_for("pods").handles("UPDATE", "")
    assert [group_resource_of(n) for n in ("requests.cpu", "services.nodeports", "count/foos.example.com",
                                           "gold.storageclass.storage.k8s.io/requests.storage", "configmaps",
                                           "nonsense")] == [
        "pods", "services", "foos.example.com", "persistentvolumeclaims", "configmaps", ""]


def test_resource_list_arithmetic_and_messages() -> None:
    used = rl.parse({"cpu": "500m", "memory": "1Gi"})
    hard = rl.parse({"cpu": "1", "memory": "2Gi"})
    requested = rl.parse({"cpu": "600m", "pods": "1"})
    total = rl.add(used, rl.mask(requested, hard))
    assert _strings(total) == {"cpu": "1100m", "memory": "1Gi"}
    assert rl.less_or_equal(total, hard) == (False, ["cpu"])
    assert rl.pretty(rl.parse({"memory": "1Gi", "cpu": "1"})) == "cpu=1,memory=1Gi"
    assert rl.negative(rl.subtract(used, hard)) == ["cpu", "memory"]
    assert rl.is_zero(rl.subtract(used, used))

"""Typed clients read every resource kubeling serves: lightkube (msgspec models) and the
official Python client (its models) refuse objects that lack what Go's encoder always
writes (a Node's status.nodeInfo.kubeProxyVersion, a Service's status.loadBalancer);
client-go's protobuf, asked for every kind, holds what the JSON holds."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes.client as k8s
import lightkube
from google.protobuf.timestamp_pb2 import Timestamp
from kubernetes import config as k8s_config
from lightkube.resources import (
    admissionregistration_v1,
    apiextensions_v1,
    apiregistration_v1,
    apps_v1,
    autoscaling_v1,
    autoscaling_v2,
    batch_v1,
    certificates_v1,
    coordination_v1,
    core_v1,
    discovery_v1,
    events_v1,
    flowcontrol_apiserver_v1,
    networking_v1,
    node_v1,
    policy_v1,
    rbac_authorization_v1,
    scheduling_v1,
    storage_v1,
    storagemigration_v1,
)

from apiserver.endpoints.rest.protobuf import PROTOBUF, decode_envelope
from apiserver.server import APIServer
from kubeling import csr, dynamic, scheme
from kubeling.client import Client
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import (
    apps_pb2,
    autoscaling_pb2,
    batch_pb2,
    coordination_pb2,
    core_pb2,
    discovery_pb2,
    events_pb2,
    meta_pb2,
    node_pb2,
    policy_pb2,
    rbac_pb2,
    scheduling_pb2,
    storage_pb2,
)
from tests.objects import node, pod
from tests.wait import until

_SELECTOR = meta_pb2.LabelSelector(matchLabels={"app": "x"})
_NODE = node("n")
_NODE.status.nodeInfo.kubeletVersion = "v1.32.0-kubeling"  # as a kubelet writes it: no kube-proxy version
_TEMPLATE = core_pb2.PodTemplateSpec(metadata=meta_pb2.ObjectMeta(labels={"app": "x"}), spec=pod("t").spec)


def _meta(name: str) -> meta_pb2.ObjectMeta:
    return meta_pb2.ObjectMeta(name=name, namespace="default")


# One object of every built-in resource, and its lightkube model.
_OBJECTS: list[tuple[scheme.ResourceType[Any], Any, Any]] = [
    (scheme.PODS, pod("p"), core_v1.Pod),
    (scheme.NODES, _NODE, core_v1.Node),
    (scheme.NAMESPACES, core_pb2.Namespace(metadata=meta_pb2.ObjectMeta(name="ns")), core_v1.Namespace),
    # a new-style event (eventTime set): events.k8s.io's strict models read it too
    (scheme.EVENTS, core_pb2.Event(metadata=_meta("e"), involvedObject=meta_pb2.ObjectReference(kind="Pod", name="p"),
                                   reason="Seen", message="m", type="Normal", eventTime=Timestamp(seconds=1505828956),
                                   reportingComponent="example.com/c", reportingInstance="i", action="Saw"),
     core_v1.Event),
    (scheme.SERVICEACCOUNTS, core_pb2.ServiceAccount(metadata=_meta("sa")), core_v1.ServiceAccount),
    (scheme.CONFIGMAPS, core_pb2.ConfigMap(metadata=_meta("cm"), data={"k": "v"}), core_v1.ConfigMap),
    (scheme.SECRETS, core_pb2.Secret(metadata=_meta("s"), stringData={"k": "v"}), core_v1.Secret),
    (scheme.SERVICES, core_pb2.Service(metadata=_meta("svc"), spec=core_pb2.ServiceSpec(
        selector={"app": "x"}, ports=[core_pb2.ServicePort(port=80)])), core_v1.Service),
    (scheme.ENDPOINTS, core_pb2.Endpoints(metadata=_meta("ep"), subsets=[core_pb2.EndpointSubset(
        addresses=[core_pb2.EndpointAddress(ip="10.88.0.5")], ports=[core_pb2.EndpointPort(port=80)])]),
     core_v1.Endpoints),
    (scheme.PODTEMPLATES, core_pb2.PodTemplate(metadata=_meta("pt"), template=_TEMPLATE), core_v1.PodTemplate),
    (scheme.PERSISTENTVOLUMES, core_pb2.PersistentVolume(metadata=meta_pb2.ObjectMeta(name="pv"), spec=(
        core_pb2.PersistentVolumeSpec(capacity={"storage": "1Gi"}, accessModes=["ReadWriteOnce"],
                                      hostPath=core_pb2.HostPathVolumeSource(path="/tmp/pv")))),
     core_v1.PersistentVolume),
    (scheme.PERSISTENTVOLUMECLAIMS, core_pb2.PersistentVolumeClaim(metadata=_meta("pvc"), spec=(
        core_pb2.PersistentVolumeClaimSpec(accessModes=["ReadWriteOnce"], resources=(
            core_pb2.VolumeResourceRequirements(requests={"storage": "1Gi"}))))), core_v1.PersistentVolumeClaim),
    (scheme.REPLICATIONCONTROLLERS, core_pb2.ReplicationController(metadata=_meta("rc"), spec=(
        core_pb2.ReplicationControllerSpec(selector={"app": "x"}, template=_TEMPLATE))),
     core_v1.ReplicationController),
    (scheme.RESOURCEQUOTAS, core_pb2.ResourceQuota(metadata=_meta("rq"), spec=core_pb2.ResourceQuotaSpec(
        hard={"pods": "10"})), core_v1.ResourceQuota),
    (scheme.LIMITRANGES, core_pb2.LimitRange(metadata=_meta("lr"), spec=core_pb2.LimitRangeSpec(limits=[
        core_pb2.LimitRangeItem(type="Container", max={"cpu": "1"})])), core_v1.LimitRange),
    (scheme.ENDPOINTSLICES, discovery_pb2.EndpointSlice(metadata=_meta("es"), addressType="IPv4", endpoints=[
        discovery_pb2.Endpoint(addresses=["10.88.0.5"])]), discovery_v1.EndpointSlice),
    (scheme.LEASES, coordination_pb2.Lease(metadata=_meta("l"), spec=coordination_pb2.LeaseSpec(holderIdentity="me")),
     coordination_v1.Lease),
    (scheme.ROLES, rbac_pb2.Role(metadata=_meta("r"), rules=[rbac_pb2.PolicyRule(
        verbs=["get"], apiGroups=[""], resources=["pods"])]), rbac_authorization_v1.Role),
    (scheme.CLUSTERROLES, rbac_pb2.ClusterRole(metadata=meta_pb2.ObjectMeta(name="cr")),
     rbac_authorization_v1.ClusterRole),
    (scheme.ROLEBINDINGS, rbac_pb2.RoleBinding(metadata=_meta("rb"), roleRef=rbac_pb2.RoleRef(
        apiGroup="rbac.authorization.k8s.io", kind="Role", name="r"), subjects=[rbac_pb2.Subject(
            kind="User", name="u", apiGroup="rbac.authorization.k8s.io")]), rbac_authorization_v1.RoleBinding),
    (scheme.CLUSTERROLEBINDINGS, rbac_pb2.ClusterRoleBinding(metadata=meta_pb2.ObjectMeta(name="crb"), roleRef=(
        rbac_pb2.RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="cr"))),
     rbac_authorization_v1.ClusterRoleBinding),
    (scheme.DEPLOYMENTS, apps_pb2.Deployment(metadata=_meta("d"), spec=apps_pb2.DeploymentSpec(
        selector=_SELECTOR, template=_TEMPLATE)), apps_v1.Deployment),
    (scheme.REPLICASETS, apps_pb2.ReplicaSet(metadata=_meta("rs"), spec=apps_pb2.ReplicaSetSpec(
        selector=_SELECTOR, template=_TEMPLATE)), apps_v1.ReplicaSet),
    (scheme.DAEMONSETS, apps_pb2.DaemonSet(metadata=_meta("ds"), spec=apps_pb2.DaemonSetSpec(
        selector=_SELECTOR, template=_TEMPLATE)), apps_v1.DaemonSet),
    (scheme.STATEFULSETS, apps_pb2.StatefulSet(metadata=_meta("sts"), spec=apps_pb2.StatefulSetSpec(
        selector=_SELECTOR, template=_TEMPLATE, serviceName="sts")), apps_v1.StatefulSet),
    (scheme.CONTROLLERREVISIONS, apps_pb2.ControllerRevision(metadata=_meta("cr"), revision=1, data=(
        apps_pb2.RawExtension(raw=b'{"spec":{}}'))), apps_v1.ControllerRevision),
    (scheme.HORIZONTALPODAUTOSCALERS, autoscaling_pb2.HorizontalPodAutoscaler(
        metadata=_meta("hpa"), spec=autoscaling_pb2.HorizontalPodAutoscalerSpec(
            scaleTargetRef=autoscaling_pb2.CrossVersionObjectReference(apiVersion="apps/v1", kind="Deployment",
                                                                       name="d"), maxReplicas=3)),
     autoscaling_v2.HorizontalPodAutoscaler),
    (scheme.HORIZONTALPODAUTOSCALERS_V1, autoscaling_pb2.HorizontalPodAutoscalerV1(
        metadata=_meta("hpa1"), spec=autoscaling_pb2.HorizontalPodAutoscalerSpecV1(
            scaleTargetRef=autoscaling_pb2.CrossVersionObjectReference(apiVersion="apps/v1", kind="Deployment",
                                                                       name="d"), maxReplicas=3,
            targetCPUUtilizationPercentage=50)), autoscaling_v1.HorizontalPodAutoscaler),
    (scheme.EVENTS_V1, events_pb2.EventV1(metadata=_meta("ev1"), eventTime=Timestamp(seconds=1505828956),
                                          regarding=meta_pb2.ObjectReference(kind="Pod", name="p"),
                                          reportingController="example.com/bench", reportingInstance="i",
                                          action="Do", reason="Test", type="Normal", note="n"), events_v1.Event),
    (scheme.JOBS, batch_pb2.Job(metadata=_meta("j"), spec=batch_pb2.JobSpec(template=core_pb2.PodTemplateSpec(
        spec=core_pb2.PodSpec(containers=pod("t").spec.containers, restartPolicy="Never")))), batch_v1.Job),
    (scheme.CRONJOBS, batch_pb2.CronJob(metadata=_meta("cj"), spec=batch_pb2.CronJobSpec(
        schedule="*/5 * * * *", jobTemplate=batch_pb2.JobTemplateSpec(spec=batch_pb2.JobSpec(
            template=core_pb2.PodTemplateSpec(spec=core_pb2.PodSpec(containers=pod("t").spec.containers,
                                                                    restartPolicy="OnFailure")))))),
     batch_v1.CronJob),
    (scheme.PRIORITYCLASSES, scheduling_pb2.PriorityClass(metadata=meta_pb2.ObjectMeta(name="pc"), value=10),
     scheduling_v1.PriorityClass),
    (scheme.POD_DISRUPTION_BUDGETS, policy_pb2.PodDisruptionBudget(metadata=_meta("pdb"), spec=(
        policy_pb2.PodDisruptionBudgetSpec(selector=_SELECTOR))), policy_v1.PodDisruptionBudget),
    (scheme.INGRESSCLASSES, dynamic.new({"metadata": {"name": "ic"}, "spec": {"controller": "example.com/ic"}}),
     networking_v1.IngressClass),
    (scheme.INGRESSES, dynamic.new({"metadata": {"name": "ing", "namespace": "default"}, "spec": {
        "rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
            "service": {"name": "svc", "port": {"number": 80}}}}]}}]}}), networking_v1.Ingress),
    (scheme.NETWORKPOLICIES, dynamic.new({"metadata": {"name": "np", "namespace": "default"}, "spec": {
        "podSelector": {"matchLabels": {"app": "x"}}, "ingress": [{"ports": [{"port": 80}]}]}}),
     networking_v1.NetworkPolicy),
    (scheme.CERTIFICATESIGNINGREQUESTS, dynamic.new({"metadata": {"name": "csr"}, "spec": {
        "request": base64.b64encode(csr.make_request("c.example.com")[0]).decode(), "signerName": "example.com/s",
        "usages": ["client auth"]}}), certificates_v1.CertificateSigningRequest),
    (scheme.STORAGEVERSIONMIGRATIONS, dynamic.new({"metadata": {"name": "svm"}, "spec": {
        "resource": {"group": "nope.example.com", "resource": "things"}}}),
     storagemigration_v1.StorageVersionMigration),
    (scheme.STORAGECLASSES, storage_pb2.StorageClass(metadata=meta_pb2.ObjectMeta(name="sc"),
                                                     provisioner="hostpath.csi.kubeling.io"), storage_v1.StorageClass),
    (scheme.CSIDRIVERS, storage_pb2.CSIDriver(metadata=meta_pb2.ObjectMeta(name="hostpath.csi.kubeling.io")),
     storage_v1.CSIDriver),
    (scheme.CSINODES, storage_pb2.CSINode(metadata=meta_pb2.ObjectMeta(name="n"), spec=storage_pb2.CSINodeSpec(
        drivers=[storage_pb2.CSINodeDriver(name="hostpath.csi.kubeling.io", nodeID="n")])), storage_v1.CSINode),
    (scheme.VOLUMEATTACHMENTS, storage_pb2.VolumeAttachment(
        metadata=meta_pb2.ObjectMeta(name="va"), spec=storage_pb2.VolumeAttachmentSpec(
            attacher="hostpath.csi.kubeling.io", nodeName="n",
            source=storage_pb2.VolumeAttachmentSource(persistentVolumeName="pv"))), storage_v1.VolumeAttachment),
    (scheme.CSISTORAGECAPACITIES, storage_pb2.CSIStorageCapacity(metadata=_meta("cap"), storageClassName="sc",
                                                                 capacity="1Gi"), storage_v1.CSIStorageCapacity),
    (scheme.RUNTIMECLASSES, node_pb2.RuntimeClass(metadata=meta_pb2.ObjectMeta(name="rc"), handler="runc"),
     node_v1.RuntimeClass),
    (scheme.VALIDATINGWEBHOOKCONFIGURATIONS, dynamic.new({"metadata": {"name": "vwc"}, "webhooks": [
        {"name": "deny.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
         "clientConfig": {"url": "https://127.0.0.1:1/deny"}}]}),
     admissionregistration_v1.ValidatingWebhookConfiguration),
    (scheme.MUTATINGWEBHOOKCONFIGURATIONS, dynamic.new({"metadata": {"name": "mwc"}, "webhooks": [
        {"name": "label.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
         "clientConfig": {"url": "https://127.0.0.1:1/label"}}]}),
     admissionregistration_v1.MutatingWebhookConfiguration),
    (scheme.VALIDATINGADMISSIONPOLICIES, dynamic.new({"metadata": {"name": "vap"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas < 100"}]}}),
     admissionregistration_v1.ValidatingAdmissionPolicy),
    (scheme.VALIDATINGADMISSIONPOLICYBINDINGS, dynamic.new({"metadata": {"name": "vapb"}, "spec": {
        "policyName": "vap", "validationActions": ["Warn"]}}),
     admissionregistration_v1.ValidatingAdmissionPolicyBinding),
    (scheme.FLOWSCHEMAS, dynamic.new({"metadata": {"name": "fs"}, "spec": {
        "priorityLevelConfiguration": {"name": "pl"}, "rules": [{"subjects": [{"kind": "User", "user": {"name": "u"}}],
                                                                "nonResourceRules": [{"verbs": ["get"],
                                                                                      "nonResourceURLs": ["/x"]}]}]}}),
     flowcontrol_apiserver_v1.FlowSchema),
    (scheme.PRIORITYLEVELCONFIGURATIONS, dynamic.new({"metadata": {"name": "pl"}, "spec": {
        "type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}}),
     flowcontrol_apiserver_v1.PriorityLevelConfiguration),
    (scheme.CUSTOMRESOURCEDEFINITIONS, dynamic.new({"metadata": {"name": "things.x.example.com"}, "spec": {
        "group": "x.example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
     apiextensions_v1.CustomResourceDefinition),
    (scheme.APISERVICES, dynamic.new({"metadata": {"name": "v1alpha1.wardle.example.com"}, "spec": {
        "group": "wardle.example.com", "version": "v1alpha1", "groupPriorityMinimum": 2000, "versionPriority": 200,
        "service": {"namespace": "wardle", "name": "api"}}}), apiregistration_v1.APIService),
]


def test_every_built_in_resource_is_covered() -> None:
    assert [rt for rt, _, _ in _OBJECTS] == list(scheme.BUILTIN)


async def test_lightkube_reads_every_resource(rest: APIServer, tmp_path: Path) -> None:
    async with Client(rest.address) as c:
        for rt, obj, _ in _OBJECTS:
            await c.resource(rt).create(obj)
    config = lightkube.KubeConfig.from_file(write_kubeconfig(tmp_path / "kubeconfig", rest.rest_address))
    client = lightkube.AsyncClient(config)
    try:
        for rt, obj, model in _OBJECTS:
            namespace = "default" if rt.namespaced else None
            found = await client.get(model, obj.metadata.name, namespace=namespace)
            assert found.metadata.name == obj.metadata.name, rt.plural
            listed = [o.metadata.name async for o in client.list(model, namespace=namespace)]
            assert obj.metadata.name in listed, rt.plural
        node_read = await client.get(core_v1.Node, "n")
        assert node_read.status.nodeInfo.kubeProxyVersion == ""
        service = await client.get(core_v1.Service, "svc", namespace="default")
        assert service.status.loadBalancer is not None
    finally:
        await client.close()


async def test_the_official_client_reads_nodes_and_services(rest: APIServer, tmp_path: Path) -> None:
    async with Client(rest.address) as c:
        for rt, obj, _ in _OBJECTS:
            if rt in (scheme.NODES, scheme.SERVICES, scheme.PODS):
                await c.resource(rt).create(obj)
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(write_kubeconfig(tmp_path / "kubeconfig",
                                                                                rest.rest_address))))
    nodes = await asyncio.to_thread(api.list_node)
    assert nodes.items[0].status.node_info.kube_proxy_version == ""
    service = await asyncio.to_thread(api.read_namespaced_service, "svc", "default")
    assert service.status.load_balancer is not None
    pods = await asyncio.to_thread(api.list_namespaced_pod, "default")
    assert pods.items[0].spec.containers[0].resources is not None


def _without_empties(value: Any, wire: Any) -> Any:
    """JSON as the protobuf wire keeps it: null and empty lists are no field on the wire,
    and a zero that the wire's reading leaves out (Go's omitempty) is left out."""
    if isinstance(value, dict):
        return {k: _without_empties(v, wire.get(k) if isinstance(wire, dict) else None) for k, v in value.items()
                if v is not None and v != [] and not (v in (0, "", False) and isinstance(wire, dict) and k not in wire)}
    if isinstance(value, list):
        return [_without_empties(v, wire[i] if isinstance(wire, list) and i < len(wire) else None)
                for i, v in enumerate(value)]
    return value


async def test_every_resource_in_kubernetes_protobuf(rest: APIServer) -> None:
    """Every built-in kind is answered in Kubernetes protobuf (client-go's content type) when
    asked first, as one object and as a list, and holds what its JSON holds."""
    async with Client(rest.address) as c:
        for rt, obj, _ in _OBJECTS:
            await c.resource(rt).create(obj)
        # the apiserver's node IPAM writes the node's pod CIDR a moment later: compared after
        # it, not between the two reads (a CI run saw it there)
        await until(lambda: c.nodes.get("n"), "node n's pod CIDR", check=lambda n: n.spec.podCIDR)
    protobuf = "application/vnd.kubernetes.protobuf, application/json"
    async with aiohttp.ClientSession(f"http://{rest.rest_address}") as http:
        for rt, obj, _ in _OBJECTS:
            path = rt.path_prefix + ("/namespaces/default" if rt.namespaced else "") + f"/{rt.plural}"
            async with http.get(f"{path}/{obj.metadata.name}") as r:
                as_json = await r.json()
            async with http.get(f"{path}/{obj.metadata.name}", headers={"Accept": protobuf}) as r:
                assert r.status == 200 and r.content_type == PROTOBUF, rt.plural
                read = decode_envelope(await r.read())
                assert read == _without_empties(as_json, read), rt.plural
            async with http.get(path, headers={"Accept": protobuf}) as r:
                assert r.status == 200 and r.content_type == PROTOBUF, rt.plural
                listed = decode_envelope(await r.read())
            assert listed["kind"] == f"{rt.kind}List" and listed["metadata"]["resourceVersion"], rt.plural
            assert obj.metadata.name in [i["metadata"]["name"] for i in listed["items"]], rt.plural

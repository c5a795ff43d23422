"""The pods a pod is spread with (upstream helper/spread.go and util/node's zone key).

`default_selector` is upstream's DefaultSelector: the labels of every Service that selects
the pod, merged, and the selector of the pod's controller. kubeling serves ReplicaSets;
ReplicationControllers and StatefulSets come with the workloads they belong to, so a pod
they own is spread by its Services alone until then.
"""

from __future__ import annotations

from typing import Any

from kubeling.selectors import LabelSelector, Requirement, SelectorError, from_label_selector_proto
from protos.kubeling.v1.core_pb2 import Node, Pod, Service
from protos.kubeling.v1.meta_pb2 import OwnerReference
from scheduler.framework.interface import Handle

__all__ = ["default_selector", "pod_services", "controller_of", "zone_key", "ZONE_LABELS", "REGION_LABELS"]

# The beta label first, then the stable one (upstream GetZoneKey in 1.19-1.22 read them so).
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")


def _set_selector(labels: dict[str, str]) -> LabelSelector:
    return LabelSelector(tuple(Requirement(k, "=", (v,)) for k, v in sorted(labels.items())))


def pod_services(pod: Pod, handle: Handle | None) -> list[Service]:
    """The Services of the pod's namespace whose selector matches its labels (a Service
    without a selector selects nothing, not everything)."""
    if handle is None:
        return []
    labels = pod.metadata.labels
    return [svc for svc in handle.services(pod.metadata.namespace)
            if svc.spec.selector and all(labels.get(k) == v for k, v in svc.spec.selector.items())]


def controller_of(pod: Pod) -> OwnerReference | None:
    """The owner reference marked controller (metav1.GetControllerOf)."""
    for ref in pod.metadata.ownerReferences:
        if ref.HasField("controller") and ref.controller:
            return ref
    return None


def default_selector(pod: Pod, handle: Handle | None) -> LabelSelector:
    """The selector of the pods `pod` is spread with: its Services' selectors merged (a later
    Service's value wins a key, as labels.Merge), and its ReplicaSet's selector added. Empty
    (it selects nothing to spread with) when nothing selects the pod."""
    merged: dict[str, str] = {}
    for svc in pod_services(pod, handle):
        merged.update(svc.spec.selector)
    selector = _set_selector(merged)
    owner = controller_of(pod)
    if owner is None or handle is None or owner.apiVersion != "apps/v1" or owner.kind != "ReplicaSet":
        return selector
    rs = handle.replica_set(pod.metadata.namespace, owner.name)
    if rs is None or not rs.spec.HasField("selector"):
        return selector
    try:
        other = from_label_selector_proto(rs.spec.selector)
    except SelectorError:
        return selector  # a selector that does not parse adds nothing, as upstream's
    if other is None:
        return selector
    return LabelSelector(selector.requirements + other.requirements)


def zone_key(node: Node | Any) -> str:
    """region + zone of a node ("" when it has neither): nodes with the same key share a zone."""
    labels = node.metadata.labels
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    if not zone and not region:
        return ""
    return f"{region}:\x00:{zone}"

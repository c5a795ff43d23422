"""What the EndpointSlice and Endpoints controllers share (upstream's
pkg/controller/util/endpoint and pkg/api/v1/pod helpers): which pods back a Service,
which Services select a pod, and a Service port's target resolved on one pod."""

from __future__ import annotations

from collections.abc import Callable

from kubeling.informer import INDEX_NAMESPACE, Informer, object_key
from protos.kubeling.v1 import core_pb2

__all__ = ["selects", "services_for_pod", "queue_services_of_pods", "should_be_endpoint", "find_port", "pod_ready"]


def selects(svc: core_pb2.Service, labels: dict[str, str]) -> bool:
    """A Service's selector matches these labels (an empty selector matches nothing here:
    a Service without one has endpoints someone else writes)."""
    selector = svc.spec.selector
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def services_for_pod(services: Informer[core_pb2.Service], pod: core_pb2.Pod) -> list[str]:
    return [object_key(svc) for svc in services.store.by_index(INDEX_NAMESPACE, pod.metadata.namespace)
            if selects(svc, dict(pod.metadata.labels))]


def queue_services_of_pods(pods: Informer[core_pb2.Pod], services: Informer[core_pb2.Service],
                           add: Callable[[str], None]) -> None:
    """On every pod change, queue the Services that select it; a relabelled pod also the
    ones that selected it before (they must drop it)."""
    def changed(pod: core_pb2.Pod) -> None:
        for key in services_for_pod(services, pod):
            add(key)

    def updated(old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        changed(new)
        if old.metadata.labels != new.metadata.labels:
            changed(old)

    pods.add_handler(on_add=changed, on_update=updated, on_delete=changed)


def should_be_endpoint(pod: core_pb2.Pod, include_terminating: bool) -> bool:
    """upstream's ShouldPodBeInEndpoints: a pod with an IP, not finished, not being
    deleted (unless terminating endpoints are wanted)."""
    if not pod.status.podIP:
        return False
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    return include_terminating or not pod.metadata.HasField("deletionTimestamp")


def pod_ready(pod: core_pb2.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def find_port(pod: core_pb2.Pod, port: core_pb2.ServicePort) -> int | None:
    """The container port a Service port's targetPort names on this pod (upstream's
    podutil.FindPort): a number as it is, a name looked up among the containers' ports
    of the same protocol; None when the pod has no such port."""
    target = port.targetPort
    if target.type == 0:
        return target.intVal or port.port
    for container in pod.spec.containers:
        for cport in container.ports:
            if cport.name == target.strVal and (cport.protocol or "TCP") == port.protocol:
                return cport.containerPort
    return None

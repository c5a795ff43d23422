"""Informer events into the cache and the scheduling queue (upstream eventhandlers.go).

A bound pod goes to the cache (and frees the queue of its nomination); an unbound pod
of one of our profiles goes to the queue; node changes and pod deletions move the
unschedulable pods whose rejecting plugins registered for that kind of event.
"""

from __future__ import annotations

from collections.abc import Callable

from protos.kubeling.v1.core_pb2 import Node, Pod, Service
from scheduler.cache import Cache
from scheduler.framework.interface import Action, ClusterEvent, Resource
from scheduler.framework.runtime import Framework
from scheduler.queue import SchedulingQueue

__all__ = ["EventHandlers", "node_scheduling_properties_change"]


class EventHandlers:
    """The Scheduler's `on_*` methods (a mixin: the Scheduler owns the state below)."""

    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.schedulerName in self.frameworks

    def on_pod_add(self, pod: Pod) -> None:
        if pod.spec.nodeName:
            self.cache.add_pod(pod)
            self.queue.delete_nominated(pod)
        elif self.responsible_for(pod) and not pod.metadata.HasField("deletionTimestamp"):
            self.queue.add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if new.spec.nodeName:
            if not old.spec.nodeName:
                self.queue.delete(old)  # it was bound (by us or another scheduler)
                self.cache.add_pod(new)
            else:
                self.cache.update_pod(old, new)
            return
        if not self.responsible_for(new):
            return
        if new.metadata.HasField("deletionTimestamp"):
            self.queue.delete(new)
            return
        if old.spec.schedulingGates and not new.spec.schedulingGates:
            self.queue.update(old, new)
            self.queue.move_all_on_event(ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES))
            return
        self.queue.update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        if pod.spec.nodeName:
            self.cache.remove_pod(pod)
            self.queue.move_all_on_event(ClusterEvent(Resource.POD, Action.DELETE))
        else:
            self.queue.delete(pod)

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_on_event(ClusterEvent(Resource.NODE, Action.ADD))

    def on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(new)
        for event in node_scheduling_properties_change(old, new):
            self.queue.move_all_on_event(event)

    def on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node)

    # Services select the pods the spreading plugins count together: a change may help a
    # pod ServiceAffinity rejected.
    def on_service_add(self, service: Service) -> None:
        self.queue.move_all_on_event(ClusterEvent(Resource.SERVICE, Action.ADD))

    def on_service_update(self, old: Service, new: Service) -> None:
        self.queue.move_all_on_event(ClusterEvent(Resource.SERVICE, Action.UPDATE))

    def on_service_delete(self, service: Service) -> None:
        self.queue.move_all_on_event(ClusterEvent(Resource.SERVICE, Action.DELETE))

    def storage_handlers(self, resource: Resource) -> dict[str, Callable[..., object]]:
        """Informer handlers for a storage resource (claims, volumes, classes, CSINodes): a
        change may let a pod the volume plugins rejected fit (a claim bound, a volume made
        free, a driver registered)."""
        return {"on_add": lambda obj: self.queue.move_all_on_event(ClusterEvent(resource, Action.ADD)),
                "on_update": lambda old, new: self.queue.move_all_on_event(ClusterEvent(resource, Action.UPDATE)),
                "on_delete": lambda obj: self.queue.move_all_on_event(ClusterEvent(resource, Action.DELETE))}


def node_scheduling_properties_change(old: Node, new: Node) -> list[ClusterEvent]:
    """Which scheduling-relevant properties of a node changed (upstream nodeSchedulingPropertiesChange)."""
    events = []
    if dict(old.status.allocatable) != dict(new.status.allocatable):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE))
    if dict(old.metadata.labels) != dict(new.metadata.labels):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_LABEL))
    if (old.spec.unschedulable != new.spec.unschedulable
            or [t.SerializeToString() for t in old.spec.taints] != [t.SerializeToString() for t in new.spec.taints]):
        events.append(ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT))
    return events

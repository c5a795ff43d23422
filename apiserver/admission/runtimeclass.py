"""The RuntimeClass admission plugin, as upstream's plugin/pkg/admission/runtimeclass: a
new pod naming a RuntimeClass gets the class's overhead (refused if it names another) and
its scheduling constraints (node selector merged, a conflict refused; tolerations added);
a class that does not exist refuses the pod. Messages are upstream's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apiserver.admission.chain import CREATE, AdmissionAttributes, forbidden
from protos.kubeling.v1 import core_pb2, node_pb2

__all__ = ["RuntimeClassAdmission"]

Lookup = Callable[[str], node_pb2.RuntimeClass | None]  # by name, from the watch cache


@dataclass
class RuntimeClassAdmission:
    runtime_class: Lookup
    resources: frozenset[str] = frozenset({"pods"})

    def _class(self, attrs: AdmissionAttributes) -> node_pb2.RuntimeClass | None:
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        if not pod.spec.HasField("runtimeClassName"):
            return None
        found = self.runtime_class(pod.spec.runtimeClassName)
        if found is None:
            raise forbidden(attrs, "pods", f'pod rejected: RuntimeClass "{pod.spec.runtimeClassName}" not found')
        return found

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        runtime_class = self._class(attrs)
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        if runtime_class is None:
            return
        fixed = dict(runtime_class.overhead.podFixed)
        if fixed and not pod.spec.overhead:
            pod.spec.overhead.update(fixed)
        scheduling = runtime_class.scheduling
        for key, value in scheduling.nodeSelector.items():
            current = pod.spec.nodeSelector.get(key)
            if current is not None and current != value:
                raise forbidden(attrs, "pods", f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                                               f"pod.spec.nodeSelector[{key}] = {current}")
            pod.spec.nodeSelector[key] = value
        for toleration in scheduling.tolerations:
            if toleration not in pod.spec.tolerations:
                pod.spec.tolerations.append(toleration)

    async def validate(self, attrs: AdmissionAttributes) -> None:
        if attrs.operation != CREATE or attrs.subresource:
            return
        runtime_class = self._class(attrs)
        pod = attrs.obj
        assert isinstance(pod, core_pb2.Pod)
        fixed = dict(runtime_class.overhead.podFixed) if runtime_class is not None else {}
        if fixed and dict(pod.spec.overhead) != fixed:
            raise forbidden(attrs, "pods", "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined "
                                           "Overhead")
        if pod.spec.overhead and not fixed:
            raise forbidden(attrs, "pods", "pod rejected: Pod Overhead set without corresponding RuntimeClass "
                                           "defined Overhead")

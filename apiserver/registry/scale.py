"""The scale subresource's object: an autoscaling/v1 Scale whose spec.replicas is the
object's (a Deployment's, ReplicaSet's, StatefulSet's or ReplicationController's; a
custom resource's at its definition's specReplicasPath), and replicas written back to
the object. Both front ends serve it (apiserver.endpoints.rest.scale, .grpc.scale)."""

from __future__ import annotations

from typing import Any

from kubeling import errors
from kubeling.dynamic import content_of, set_content, set_value_at, value_at
from kubeling.kjson import format_time
from kubeling.selectors import from_label_selector_proto
from protos.kubeling.v1 import apps_pb2, core_pb2, meta_pb2

__all__ = ["Scales", "scale_of"]


Scalable = apps_pb2.Deployment | apps_pb2.ReplicaSet | apps_pb2.StatefulSet | core_pb2.ReplicationController


class Scales:
    """How one resource's objects are scaled: the built-ins' fields, or a custom
    resource's paths (specReplicasPath, statusReplicasPath, labelSelectorPath)."""

    def __init__(self, paths: dict[str, Any] | None = None) -> None:
        self.paths = paths

    def of(self, obj: Any) -> dict[str, Any]:
        if self.paths is None:
            return scale_of(obj)
        content = content_of(obj)
        spec = value_at(content, self.paths.get("specReplicasPath", ""))
        status = value_at(content, self.paths.get("statusReplicasPath", ""))
        selector = value_at(content, self.paths.get("labelSelectorPath", "") or "")
        out = _scale(obj.metadata, spec if isinstance(spec, int) else 0, status if isinstance(status, int) else 0,
                     selector if isinstance(selector, str) else "")
        return out

    def set_replicas(self, obj: Any, replicas: int) -> None:
        if self.paths is None:
            obj.spec.replicas = replicas
            return
        content = content_of(obj)
        try:
            set_value_at(content, self.paths["specReplicasPath"], replicas)
        except ValueError as err:
            raise errors.BadRequest(str(err)) from None
        set_content(obj, content)


def _scale(meta: Any, replicas: int, status: int, selector: str) -> dict[str, Any]:
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid,
                         "resourceVersion": meta.resourceVersion,
                         "creationTimestamp": format_time(meta.creationTimestamp)},
            "spec": {"replicas": replicas}, "status": {"replicas": status, "selector": selector}}


def scale_of(obj: Scalable) -> dict[str, Any]:
    if isinstance(obj, core_pb2.ReplicationController):  # a plain label map
        selector = from_label_selector_proto(meta_pb2.LabelSelector(matchLabels=obj.spec.selector))
    else:
        selector = from_label_selector_proto(obj.spec.selector)
    return _scale(obj.metadata, obj.spec.replicas, obj.status.replicas, str(selector) if selector else "")

"""The scale subresource over gRPC: `GetScale` and `UpdateScale` on the services of
Deployments, ReplicaSets, StatefulSets and ReplicationControllers, the same Scale the
REST API serves (apiserver.registry.scale), for clients that speak gRPC (the
HorizontalPodAutoscaler controller, `kubeling` clients)."""

from __future__ import annotations

from typing import Any

from apiserver.registry.generic.store import Registry
from apiserver.registry.scale import Scales
from kubeling import errors
from kubeling.kjson import from_json
from protos.kubeling.v1 import autoscaling_pb2, meta_pb2

__all__ = ["ScaleMethods"]


def _message(scale: dict[str, Any]) -> autoscaling_pb2.Scale:
    decoded = from_json(scale, autoscaling_pb2.Scale)
    assert isinstance(decoded.message, autoscaling_pb2.Scale)
    return decoded.message


class ScaleMethods:
    def __init__(self, registry: Registry[Any]) -> None:
        self.registry = registry
        self.scales = Scales()

    async def get(self, req: meta_pb2.GetRequest, dry_run: bool) -> autoscaling_pb2.Scale:
        obj = await self.registry.get(req.namespace or "default", req.name)
        return _message(self.scales.of(obj))

    async def update(self, scale: autoscaling_pb2.Scale, dry_run: bool) -> autoscaling_pb2.Scale:
        meta = scale.metadata
        resource = self.registry.strategy.resource
        if scale.spec.replicas < 0:
            violation = errors.FieldViolation("spec.replicas", f"Invalid value: {scale.spec.replicas}: must be "
                                                                "greater than or equal to 0")
            raise errors.Invalid(f'Scale.autoscaling "{meta.name}" is invalid: {violation}',
                                 metadata={"kind": "Scale", "name": meta.name}, violations=[violation])
        for _ in range(10):
            current = await self.registry.get(meta.namespace or "default", meta.name)
            if meta.resourceVersion and meta.resourceVersion != current.metadata.resourceVersion:
                raise errors.Conflict(f'Operation cannot be fulfilled on {resource.group_resource} "{meta.name}": '
                                      "the object has been modified; please apply your changes to the latest "
                                      "version and try again")
            self.scales.set_replicas(current, scale.spec.replicas)
            try:
                updated = await self.registry.update(current, dry_run=dry_run)
            except errors.Conflict:
                if meta.resourceVersion:
                    raise
                continue  # written in between: scale the newer object
            return _message(self.scales.of(updated))
        raise errors.Conflict(f'Operation cannot be fulfilled on {resource.plural} "{meta.name}": the object kept '
                              "changing while it was scaled")

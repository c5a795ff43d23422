"""Small builders for test objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protos.kubeling.v1 import core_pb2, meta_pb2


def pod(name: str, namespace: str = "default", *, node: str = "", labels: dict[str, str] | None = None,
        image: str = "busybox", cpu: str = "", annotations: dict[str, str] | None = None) -> core_pb2.Pod:
    container = core_pb2.Container(name="main", image=image, command=["sleep", "3600"])
    if cpu:
        container.resources.requests["cpu"] = cpu
    return core_pb2.Pod(
        metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace, labels=labels or {},
                                     annotations=annotations or {}),
        spec=core_pb2.PodSpec(containers=[container], nodeName=node))


def node(name: str, labels: dict[str, str] | None = None) -> core_pb2.Node:
    return core_pb2.Node(metadata=meta_pb2.ObjectMeta(name=name, labels=labels or {}),
                         status=core_pb2.NodeStatus(capacity={"cpu": "4", "memory": "8Gi", "pods": "110"}))


def namespace(name: str) -> core_pb2.Namespace:
    return core_pb2.Namespace(metadata=meta_pb2.ObjectMeta(name=name))


async def update_status(resource: Any, name: str, namespace: str, change: Callable[[Any], None]) -> Any:
    """Write an object's status as a kubelet's status manager does: read it, change it, write
    it, again on a conflict (the controllers write the same objects meanwhile)."""
    from kubeling import errors

    for _ in range(20):
        obj = await resource.get(name, namespace)
        change(obj)
        try:
            return await resource.update_status(obj)
        except errors.Conflict:
            continue
    raise AssertionError(f"{name}: its status kept conflicting")

"""What a HorizontalPodAutoscaler scales, through its scale subresource: a built-in
resource's (the GetScale and UpdateScale methods of its service), or a custom resource's
as its CustomResourceDefinition's served version describes it (specReplicasPath,
statusReplicasPath, labelSelectorPath), read and written through the dynamic client.
Upstream's scale client, for kubeling's two kinds of resources."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubeling import dynamic, errors
from kubeling.client import Client
from kubeling.scheme import Scheme
from protos.kubeling.v1 import autoscaling_pb2 as pb
from protos.kubeling.v1 import meta_pb2

__all__ = ["ScaleTarget", "resolve"]


@dataclass
class ScaleTarget:
    scale: pb.Scale
    write: Callable[[int], Awaitable[None]]  # set spec.replicas


async def resolve(client: Client, scheme: Scheme, ref: pb.CrossVersionObjectReference,
                  namespace: str) -> ScaleTarget:
    """The target's scale now and how to change it; NotFound worded as upstream's when it
    has none."""
    api_version = ref.apiVersion or "v1"
    group = api_version.rpartition("/")[0]
    rt = scheme.for_kind(api_version, ref.kind)
    if rt is not None and not rt.custom:
        if rt.subresource("scale") is None:
            raise errors.NotFound("the server could not find the requested resource")
        resource = client.resource(rt)
        scale = await resource.get_scale(ref.name, namespace)

        async def write_builtin(replicas: int) -> None:
            updated = pb.Scale()
            updated.CopyFrom(scale)
            updated.spec.replicas = replicas
            await resource.update_scale(updated)
        return ScaleTarget(scale, write_builtin)
    paths, plural = await _custom_scale_paths(client, group, api_version.rpartition("/")[2], ref.kind)
    custom = client.dynamic(api_version, plural, ref.kind)
    obj = await custom.get(ref.name, namespace)
    content = dynamic.content_of(obj)
    spec = dynamic.value_at(content, paths.get("specReplicasPath", ""))
    current = dynamic.value_at(content, paths.get("statusReplicasPath", ""))
    selector = dynamic.value_at(content, paths.get("labelSelectorPath", "") or "")
    scale = pb.Scale(metadata=meta_pb2.ObjectMeta(name=obj.metadata.name, namespace=obj.metadata.namespace,
                                                  resourceVersion=obj.metadata.resourceVersion),
                     spec=pb.ScaleSpec(replicas=spec if isinstance(spec, int) else 0),
                     status=pb.ScaleStatus(replicas=current if isinstance(current, int) else 0,
                                           selector=selector if isinstance(selector, str) else ""))

    async def write_custom(replicas: int) -> None:
        changed = dynamic.content_of(obj)
        dynamic.set_value_at(changed, paths["specReplicasPath"], replicas)
        dynamic.set_content(obj, changed)
        await custom.update(obj)
    return ScaleTarget(scale, write_custom)


async def _custom_scale_paths(client: Client, group: str, version: str, kind: str) -> tuple[dict[str, Any], str]:
    """The scale paths of a custom resource's served version, and its plural."""
    definitions = (await client.customresourcedefinitions.list()).items
    for crd in definitions:
        content = dynamic.content_of(crd)
        spec = content.get("spec") or {}
        if spec.get("group") != group or (spec.get("names") or {}).get("kind") != kind:
            continue
        for served in spec.get("versions") or []:
            if served.get("name") == version and served.get("served"):
                scale = (served.get("subresources") or {}).get("scale")
                if scale is None:
                    raise errors.NotFound("the server could not find the requested resource")
                return scale, str((spec.get("names") or {}).get("plural", ""))
    raise errors.NotFound(f'no matches for kind "{kind}" in group "{group}"')

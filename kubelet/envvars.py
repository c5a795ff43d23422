"""The Service environment variables a container gets, as upstream's pkg/kubelet/envvars
(FromServices) and the kubelet's getServiceEnvVarMap: for every Service with a ClusterIP
in the pod's namespace (when enableServiceLinks, the default) and the `kubernetes`
Service of `default` always, `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT[_<PORT>]` and
the Docker-links variables `<NAME>_PORT...`. The container's own env wins over them."""

from __future__ import annotations

from collections.abc import Iterable

from protos.kubeling.v1 import core_pb2

__all__ = ["service_env", "MASTER_NAMESPACE"]

MASTER_NAMESPACE = "default"


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _from_service(svc: core_pb2.Service) -> dict[str, str]:
    name, ip = _env_name(svc.metadata.name), svc.spec.clusterIP
    out: dict[str, str] = {}
    if not svc.spec.ports:
        return out
    first = svc.spec.ports[0]
    out[f"{name}_SERVICE_HOST"] = ip
    out[f"{name}_SERVICE_PORT"] = str(first.port)
    for port in svc.spec.ports:
        if port.name:
            out[f"{name}_SERVICE_PORT_{_env_name(port.name)}"] = str(port.port)
    # Docker links: the first port as <NAME>_PORT, every port in full
    protocol = (first.protocol or "TCP").lower()
    out[f"{name}_PORT"] = f"{protocol}://{ip}:{first.port}"
    for port in svc.spec.ports:
        proto = (port.protocol or "TCP")
        prefix = f"{name}_PORT_{port.port}_{proto.upper()}"
        out[prefix] = f"{proto.lower()}://{ip}:{port.port}"
        out[f"{prefix}_PROTO"] = proto.lower()
        out[f"{prefix}_PORT"] = str(port.port)
        out[f"{prefix}_ADDR"] = ip
    return out


def service_env(pod: core_pb2.Pod, services: Iterable[core_pb2.Service]) -> dict[str, str]:
    links = not pod.spec.HasField("enableServiceLinks") or pod.spec.enableServiceLinks
    chosen: dict[str, core_pb2.Service] = {}
    for svc in services:
        ip = svc.spec.clusterIP
        if not ip or ip == "None" or svc.spec.type == "ExternalName":
            continue
        namespace = svc.metadata.namespace
        if namespace == MASTER_NAMESPACE and svc.metadata.name == "kubernetes":
            chosen.setdefault(svc.metadata.name, svc)  # always, whatever the pod's namespace
        elif links and namespace == pod.metadata.namespace:
            chosen[svc.metadata.name] = svc  # the pod's own namespace wins over `default`
    out: dict[str, str] = {}
    for name in sorted(chosen):
        out.update(_from_service(chosen[name]))
    return out

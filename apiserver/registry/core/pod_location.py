"""Where a pod's kubelet serves its logs, exec, attach and port-forward: the pod's
node's daemon endpoint (its InternalIP and status.daemonEndpoints.kubeletEndpoint),
and which container a request means, as kube-apiserver's pod strategy
(LogLocation, ExecLocation, AttachLocation, PortForwardLocation) decides them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from apiserver.registry.generic.store import Registry
from kubeling import errors
from protos.kubeling.v1 import core_pb2

__all__ = ["PodLocator", "DEFAULT_CONTAINER_ANNOTATION"]

# The container a client means when it names none (kubectl reads it too).
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


def choose_container(pod: core_pb2.Pod, container: str) -> str:
    """The named container, checked against the pod's; or, when none is named, the one
    the default-container annotation names, or the pod's only container."""
    name = pod.metadata.name
    names = [c.name for c in pod.spec.containers]
    init_names = [c.name for c in pod.spec.initContainers]
    ephemeral = [c.name for c in pod.spec.ephemeralContainers]
    if container:
        if container not in names + init_names + ephemeral:
            raise errors.BadRequest(f"container {container} is not valid for pod {name}")
        return container
    annotated = pod.metadata.annotations.get(DEFAULT_CONTAINER_ANNOTATION, "")
    if annotated in names:
        return annotated
    if len(names) == 1:
        return names[0]
    message = f"a container name must be specified for pod {name}"
    if names:
        message += f", choose one of: [{' '.join(names)}]"
    if init_names:
        message += f" or one of the init containers: [{' '.join(init_names)}]"
    raise errors.BadRequest(message)


@dataclass
class PodLocator:
    pods: Registry[core_pb2.Pod]
    nodes: Registry[core_pb2.Node]
    # HTTPS to the kubelets, with the apiserver's client certificate (--kubelet-client-*)
    # and their serving certificates verified (--kubelet-certificate-authority); None: HTTP.
    ssl: ssl.SSLContext | None = None

    async def pod(self, namespace: str, name: str) -> core_pb2.Pod:
        if not name:
            raise errors.BadRequest("name: Required value")
        pod: core_pb2.Pod = await self.pods.get(namespace or "default", name)
        return pod

    async def kubelet(self, pod: core_pb2.Pod) -> str:
        """http(s)://host:port of the kubelet the pod is bound to."""
        if not pod.spec.nodeName:
            raise errors.BadRequest(f"pod {pod.metadata.name} does not have a host assigned")
        node: core_pb2.Node = await self.nodes.get("", pod.spec.nodeName)
        address = next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")
        port = node.status.daemonEndpoints.kubeletEndpoint.Port
        if not address or not port:
            raise errors.ServiceUnavailable(f"node {node.metadata.name} has no kubelet endpoint")
        host = f"[{address}]" if ":" in address else address
        return f"{'https' if self.ssl is not None else 'http'}://{host}:{port}"

    async def container_url(self, kind: str, pod: core_pb2.Pod, container: str,
                            query: list[tuple[str, str]]) -> str:
        """The kubelet's URL for one container: kind is containerLogs, exec or attach."""
        container = choose_container(pod, container)
        base = await self.kubelet(pod)
        path = "/".join(quote(part, safe="") for part in (pod.metadata.namespace, pod.metadata.name, container))
        return f"{base}/{kind}/{path}" + (f"?{urlencode(query)}" if query else "")

    async def port_forward_url(self, pod: core_pb2.Pod, ports: list[int]) -> str:
        base = await self.kubelet(pod)
        path = "/".join(quote(part, safe="") for part in (pod.metadata.namespace, pod.metadata.name))
        query = urlencode([("port", str(p)) for p in ports])
        return f"{base}/portForward/{path}" + (f"?{query}" if query else "")

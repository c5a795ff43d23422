"""NodeRestriction admission, as upstream's plugin/pkg/admission/noderestriction: what
the Node authorizer lets any kubelet do, narrowed to its own objects. A node may create
and update only its own Node (without `node-restriction.kubernetes.io/` labels or
kubernetes.io labels a kubelet does not own, and without changing its taints), update
the status of and delete only pods bound to it, create only mirror pods, and write only
its own Lease. The messages are upstream's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message

from apiserver.admission.chain import CREATE, DELETE, UPDATE, AdmissionAttributes, forbidden
from apiserver.auth.node import LEASE_NAMESPACE, node_name
from protos.kubeling.v1 import authentication_pb2, core_pb2

__all__ = ["NodeRestriction", "forbidden_labels"]

M = TypeVar("M", bound=Message)
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
_RESTRICTED = "node-restriction.kubernetes.io"
# Labels a kubelet sets on its own Node (upstream's kubeletapis.IsKubeletLabel).
_KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone"})
_KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _namespace(label: str) -> str:
    prefix, slash, _ = label.partition("/")
    return prefix if slash else ""


def _under(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def forbidden_labels(labels: set[str]) -> list[str]:
    out = []
    for label in labels:
        ns = _namespace(label)
        if _under(ns, _RESTRICTED):
            out.append(label)
        elif (_under(ns, "kubernetes.io") or _under(ns, "k8s.io")) and label not in _KUBELET_LABELS \
                and not any(_under(ns, k) for k in _KUBELET_NAMESPACES):
            out.append(label)
    return sorted(out)


def _as(kind: type[M], obj: object) -> M:
    if not isinstance(obj, kind):
        raise TypeError(f"expected a {kind.__name__}, got {type(obj).__name__}")
    return obj


def _modified_labels(new: dict[str, str], old: dict[str, str]) -> set[str]:
    return {k for k in new.keys() | old.keys() if new.get(k) != old.get(k)}


PodLookup = Callable[[str, str], core_pb2.Pod | None]


@dataclass
class NodeRestriction:
    pods: PodLookup  # (namespace, name) -> the pod, None when there is none
    resources: frozenset[str] = frozenset({"pods", "nodes", "leases", "serviceaccounts"})

    async def validate(self, attrs: AdmissionAttributes) -> None:
        node = node_name(attrs.user)
        if node is None:
            return
        if attrs.resource == "serviceaccounts":
            self._token(node, attrs)
        elif attrs.resource == "pods":
            self._pod(node, attrs)
        elif attrs.resource == "nodes":
            self._node(node, attrs)
        elif attrs.namespace == LEASE_NAMESPACE and attrs.name != node:
            raise forbidden(attrs, "leases.coordination.k8s.io",
                            f'node "{node}" is not allowed to modify lease "{attrs.name}"')

    def _token(self, node: str, attrs: AdmissionAttributes) -> None:
        """A kubelet asks tokens only for the pods bound to it (the ServiceAccount is the
        pod's: the TokenRequest checks that)."""
        if attrs.subresource != "token":
            raise forbidden(attrs, "serviceaccounts", f'node "{node}" may not modify serviceaccounts')
        req = _as(authentication_pb2.TokenRequest, attrs.obj)
        ref = req.spec.boundObjectRef
        if ref.kind != "Pod":
            raise forbidden(attrs, "serviceaccounts", "node requested token not bound to a pod")
        if not ref.uid:
            raise forbidden(attrs, "serviceaccounts", "node requested token with a pod binding without a uid")
        pod = self.pods(attrs.namespace, ref.name)
        if pod is None or pod.metadata.uid != ref.uid:
            raise forbidden(attrs, "serviceaccounts", f"the UID in the bound object reference ({ref.uid}) does not "
                                                      "match the UID in record. The object might have been deleted "
                                                      "and then recreated")
        if pod.spec.nodeName != node:
            raise forbidden(attrs, "serviceaccounts",
                            "node requested token bound to a pod scheduled on a different node")

    def _pod(self, node: str, attrs: AdmissionAttributes) -> None:
        if attrs.subresource == "status":
            old = _as(core_pb2.Pod, attrs.old)
            if old.spec.nodeName != node:
                raise forbidden(attrs, "pods", f'node "{node}" can only update pod status for pods with '
                                               "spec.nodeName set to itself")
            if dict(_as(core_pb2.Pod, attrs.obj).metadata.labels) != dict(old.metadata.labels):
                raise forbidden(attrs, "pods", f'node "{node}" cannot update labels through pod status')
            return
        if attrs.operation == CREATE:
            pod = _as(core_pb2.Pod, attrs.obj)
            if MIRROR_POD_ANNOTATION not in pod.metadata.annotations:
                raise forbidden(attrs, "pods", f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, '
                                               f'node "{node}" can only create mirror pods')
            if pod.spec.nodeName != node:
                raise forbidden(attrs, "pods", f'node "{node}" can only create pods with spec.nodeName set to itself')
        elif attrs.operation == DELETE:
            if _as(core_pb2.Pod, attrs.old).spec.nodeName != node:
                raise forbidden(attrs, "pods", f'node "{node}" can only delete pods with spec.nodeName set to itself')
        else:
            raise forbidden(attrs, "pods", f'unexpected operation "{attrs.operation}", node "{node}" can only '
                                           "create and delete mirror pods")

    def _node(self, node: str, attrs: AdmissionAttributes) -> None:
        if attrs.name != node:
            raise forbidden(attrs, "nodes", f'node "{node}" is not allowed to modify node "{attrs.name}"')
        if attrs.operation == CREATE:
            bad = forbidden_labels(set(_as(core_pb2.Node, attrs.obj).metadata.labels))
            if bad:
                raise forbidden(attrs, "nodes", f'node "{node}" is not allowed to set the following labels: '
                                                + ", ".join(bad))
        elif attrs.operation == UPDATE and attrs.subresource != "status":
            new, old = _as(core_pb2.Node, attrs.obj), _as(core_pb2.Node, attrs.old)
            if list(new.spec.taints) != list(old.spec.taints):
                raise forbidden(attrs, "nodes", f'node "{node}" is not allowed to modify taints')
            bad = forbidden_labels(_modified_labels(dict(new.metadata.labels), dict(old.metadata.labels)))
            if bad:
                raise forbidden(attrs, "nodes", "is not allowed to modify labels: " + ", ".join(bad))

"""The scheme: every resource the API serves, one entry each (upstream's runtime.Scheme and
RESTMapper in one table).

An entry says what a resource is — group, version, kind, plural, singular, short names,
categories, scope, subresources, its message — and everything that lists resources is
derived from the entries: the typed clients, the apiserver's gRPC services, the REST
routes, discovery, OpenAPI, the registries and the controller manager's informers.

A resource's gRPC API is built from its entry, not written in a .proto: the `<Kind>List`
and `<Kind>WatchEvent` messages and the service (`Create`, `Get`, `List`, `Update`,
`UpdateStatus` when it has a status, `Delete`, `Watch`, and a method per subresource that
has one) are added to protobuf's descriptor pool when the entry is made, with the field
numbers every resource shares, so any gRPC client (reflection describes them) reads them
as it would generated ones.

The built-in entries are constants (`PODS`, `NODES`, ...; `BUILTIN` in order). A `Scheme`
is one process's table: it starts with the built-ins and takes more at run time
(`register`: custom resources), and what is derived from it follows (`generation`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from protos.kubeling.v1 import (
    api_pb2,
    apps_pb2,
    authentication_pb2,
    autoscaling_pb2,
    batch_pb2,
    coordination_pb2,
    core_pb2,
    custom_pb2,
    discovery_pb2,
    events_pb2,
    meta_pb2,
    node_pb2,
    policy_pb2,
    rbac_pb2,
    scheduling_pb2,
    storage_pb2,
)

__all__ = ["ApiObject", "ObjectT", "Method", "Subresource", "ResourceType", "Scheme", "BUILTIN", "VERBS",
           "PACKAGE", "PODS", "NODES", "NAMESPACES", "EVENTS", "SERVICEACCOUNTS", "CONFIGMAPS", "SECRETS",
           "SERVICES", "ENDPOINTS", "ENDPOINTSLICES", "LEASES", "ROLES", "CLUSTERROLES", "ROLEBINDINGS",
           "CLUSTERROLEBINDINGS", "DEPLOYMENTS", "REPLICASETS", "JOBS", "PRIORITYCLASSES", "POD_DISRUPTION_BUDGETS",
           "PODTEMPLATES", "CUSTOMRESOURCEDEFINITIONS", "VALIDATINGWEBHOOKCONFIGURATIONS",
           "MUTATINGWEBHOOKCONFIGURATIONS", "VALIDATINGADMISSIONPOLICIES", "VALIDATINGADMISSIONPOLICYBINDINGS",
           "FLOWSCHEMAS", "PRIORITYLEVELCONFIGURATIONS", "EVENTS_V1", "INGRESSCLASSES", "INGRESSES",
           "NETWORKPOLICIES", "CERTIFICATESIGNINGREQUESTS", "STORAGEVERSIONMIGRATIONS",
           "APISERVICES", "RUNTIMECLASSES", "CUSTOM_SERVICE", "deletes_collections", "PERSISTENTVOLUMES",
           "PERSISTENTVOLUMECLAIMS", "STORAGECLASSES", "CSIDRIVERS", "CSINODES", "VOLUMEATTACHMENTS",
           "CSISTORAGECAPACITIES", "CRONJOBS", "DAEMONSETS", "STATEFULSETS", "CONTROLLERREVISIONS",
           "REPLICATIONCONTROLLERS", "HORIZONTALPODAUTOSCALERS", "HORIZONTALPODAUTOSCALERS_V1",
           "RESOURCEQUOTAS", "LIMITRANGES"]

# The protobuf package of the API's messages and services.
PACKAGE = "kubeling.v1"
# The service of every resource kept as JSON (protos/kubeling/v1/custom.proto).
CUSTOM_SERVICE = f"{PACKAGE}.CustomResources"
# What every resource takes, as discovery lists them; all but namespaces also deletecollection
# (upstream's namespace storage deletes one at a time).
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


def deletes_collections(rt: ResourceType[Any]) -> bool:
    return not (rt.group == "" and rt.plural == "namespaces")


class ApiObject(Protocol):
    """What every object the API serves is: a message (the protobuf calls the generic code
    makes) with `metadata`, meta.v1 ObjectMeta (upstream's runtime.Object and metav1.Object)."""

    @property
    def metadata(self) -> meta_pb2.ObjectMeta: ...

    @classmethod
    def FromString(cls, data: bytes, /) -> Any: ...

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...

    def CopyFrom(self, other: Any, /) -> None: ...

    def HasField(self, name: str, /) -> bool: ...

    def ClearField(self, name: str, /) -> None: ...


# One resource's object type, for what is generic over resources (clients, informers, registries).
ObjectT = TypeVar("ObjectT", bound=ApiObject)


@dataclass(frozen=True)
class Method:
    """A gRPC method a subresource adds to its resource's service."""

    name: str
    request: type[Message]
    response: type[Message] | None = None  # None: the resource's own message
    streaming: bool = False  # a server stream of responses
    rbac_verb: str = ""  # what RBAC checks ("": the subresource's first verb)


@dataclass(frozen=True)
class Subresource:
    """A subresource as discovery describes it (upstream's APIResource of `<plural>/<name>`),
    and its gRPC method when it has one."""

    name: str  # the URL segment: status, scale, binding, log, exec, ...
    verbs: tuple[str, ...] = ("get", "patch", "update")
    kind: str = ""  # what it takes and returns ("": the resource's own kind)
    group: str | None = None  # that kind's group and version, when not the resource's
    version: str = ""
    method: Method | None = None
    more: tuple[Method, ...] = ()  # further methods (scale: GetScale, then UpdateScale)

    @property
    def methods(self) -> tuple[Method, ...]:
        return ((self.method,) if self.method is not None else ()) + self.more


@dataclass(frozen=True, eq=False)
class ResourceType(Generic[ObjectT]):
    """One resource of the API. Entries compare by identity: one entry per resource."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    message: type[ObjectT]
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()  # `kubectl get all` lists the "all" category
    subresources: tuple[Subresource, ...] = ()
    singular: str = ""  # default: the kind, lower case
    service: str = ""  # the gRPC service's name in PACKAGE; default: the kind's plural, e.g. PriorityClasses
    # Another version of a resource of the scheme (its storage version): served from that
    # resource's objects, converted on the way in and out (autoscaling/v1 of the v2
    # HorizontalPodAutoscalers), as upstream serves one resource at several versions.
    view_of: ResourceType[Any] | None = None
    # Kept as JSON (message CustomResource: typed metadata, the rest as the object's JSON),
    # as upstream keeps custom resources, and served by the one CustomResources service
    # instead of a service of its own (so any kind name may be defined at run time).
    custom: bool = False

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        if not self.service:
            object.__setattr__(self, "service", _plural_of(self.kind))
        names = [s.name for s in self.subresources]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.plural}: a subresource is listed twice: {names}")
        if self.custom:
            if self.message is not custom_pb2.CustomResource:
                raise ValueError(f"{self.plural}: a resource kept as JSON has the CustomResource message")
            return
        _grpc_file(self)  # its service and messages, for reflection and every client, from now on

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """plural.group, as upstream names resources in messages (pods, deployments.apps)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def path_prefix(self) -> str:
        """The URL path of its group-version."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def has_status(self) -> bool:
        return self.subresource("status") is not None

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    # ------------------------------------------------------------ gRPC

    @property
    def service_name(self) -> str:
        """The gRPC service's full name, e.g. kubeling.v1.Pods (kubeling.v1.CustomResources
        for every resource kept as JSON)."""
        return CUSTOM_SERVICE if self.custom else f"{PACKAGE}.{self.service}"

    @property
    def _message_name(self) -> str:
        """What its List and WatchEvent messages are named after: the kind, and a second
        version's version (HorizontalPodAutoscalerV1List beside HorizontalPodAutoscalerList)."""
        return self.kind + (self.version.upper() if self.view_of is not None else "")

    @functools.cached_property
    def list_message(self) -> type[Message]:
        """`<Kind>List`: metadata (ListMeta) = 1, items = 2."""
        if self.custom:
            return custom_pb2.CustomResourceList
        return _message_class(_grpc_file(self), f"{PACKAGE}.{self._message_name}List")

    @functools.cached_property
    def event_message(self) -> type[Message]:
        """`<Kind>WatchEvent`: type = 1, object = 2, batch (several events in one message) = 3."""
        if self.custom:
            return custom_pb2.CustomResourceWatchEvent
        return _message_class(_grpc_file(self), f"{PACKAGE}.{self._message_name}WatchEvent")

    @functools.cached_property
    def methods(self) -> dict[str, Method]:
        """The service's methods by name, in the order its service (_grpc_file) declares them
        (none of its own for a resource kept as JSON: the CustomResources service serves it)."""
        if self.custom:
            return {}
        service = _grpc_file(self).FindServiceByName(self.service_name)
        return {m.name: Method(m.name, message_factory.GetMessageClass(m.input_type),
                               message_factory.GetMessageClass(m.output_type), m.server_streaming)
                for m in service.methods}


def _plural_of(kind: str) -> str:
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    if kind.endswith(("ss", "x", "ch", "sh")):
        return kind + "es"
    return kind + "s"


def _message_class(pool: descriptor_pool.DescriptorPool, name: str) -> type[Message]:
    cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return cls


def _grpc_file(rt: ResourceType[Any]) -> descriptor_pool.DescriptorPool:
    """Add the resource's List and WatchEvent messages and its service to the default pool
    (once), where the generated messages and gRPC reflection live; return the pool."""
    pool = descriptor_pool.Default()
    name = f"kubeling/v1/resources/{rt.group or 'core'}/{rt.version}/{rt.plural}/{rt.kind}.proto"
    try:
        pool.FindFileByName(name)
        return pool
    except KeyError:
        pass
    base = rt._message_name
    taken = [(pool.FindMessageTypeByName, f"{PACKAGE}.{base}List"),
             (pool.FindMessageTypeByName, f"{PACKAGE}.{base}WatchEvent"), (pool.FindServiceByName, rt.service_name)]
    for find, symbol in taken:
        try:
            find(symbol)
        except KeyError:
            continue
        raise ValueError(f"{symbol} exists already: the kind {rt.kind} (or its service {rt.service}) has an entry")
    field_type = descriptor_pb2.FieldDescriptorProto
    own = f".{rt.message.DESCRIPTOR.full_name}"
    list_name, event_name = f"{base}List", f"{base}WatchEvent"
    f = descriptor_pb2.FileDescriptorProto(name=name, package=PACKAGE, syntax="proto3")
    deps = {rt.message.DESCRIPTOR.file.name, meta_pb2.DESCRIPTOR.name}
    for sub in rt.subresources:
        for method in sub.methods:
            deps.update(m.DESCRIPTOR.file.name for m in (method.request, method.response) if m is not None)
    f.dependency.extend(sorted(deps))

    def message_field(message: descriptor_pb2.DescriptorProto, name: str, number: int, type_name: str,
                      repeated: bool = False) -> None:
        message.field.add(name=name, number=number, type=field_type.TYPE_MESSAGE, type_name=type_name,
                          label=field_type.LABEL_REPEATED if repeated else field_type.LABEL_OPTIONAL, json_name=name)

    lst = f.message_type.add(name=list_name)
    message_field(lst, "metadata", 1, f".{PACKAGE}.ListMeta")
    message_field(lst, "items", 2, own, repeated=True)
    event = f.message_type.add(name=event_name)
    event.field.add(name="type", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL,
                    json_name="type")
    message_field(event, "object", 2, own)
    message_field(event, "batch", 3, f".{PACKAGE}.{event_name}", repeated=True)
    service = f.service.add(name=rt.service)
    # The methods (ResourceType.methods reads them from here): the verbs, then each subresource's.
    generic = {"Get": f".{PACKAGE}.GetRequest", "List": f".{PACKAGE}.ListRequest",
               "Delete": f".{PACKAGE}.DeleteRequest", "Watch": f".{PACKAGE}.WatchRequest"}
    responses = {"List": f".{PACKAGE}.{list_name}", "Watch": f".{PACKAGE}.{event_name}"}
    verbs = ["Create", "Get", "List", "Update", *(["UpdateStatus"] if rt.has_status else []), "Delete", "Watch"]
    for verb in verbs:
        service.method.add(name=verb, input_type=generic.get(verb, own), output_type=responses.get(verb, own),
                           server_streaming=verb == "Watch")
    for sub in rt.subresources:
        for m in sub.methods:
            response = f".{m.response.DESCRIPTOR.full_name}" if m.response is not None else own
            service.method.add(name=m.name, input_type=f".{m.request.DESCRIPTOR.full_name}", output_type=response,
                               server_streaming=m.streaming)
    pool.Add(f)
    return pool


class Scheme:
    """One process's table of resources: the built-ins, and what is registered at run time."""

    def __init__(self, entries: Iterable[ResourceType[Any]] = ()) -> None:
        self._entries: list[ResourceType[Any]] = []
        self._by_path: dict[tuple[str, str, str], ResourceType[Any]] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType[Any]] = {}
        # Moves with every change: what is derived from the scheme (discovery, OpenAPI) is
        # rebuilt when it moved.
        self.generation = 0
        for rt in entries:
            self.register(rt)

    @classmethod
    def builtin(cls) -> Scheme:
        return cls(BUILTIN)

    def register(self, rt: ResourceType[Any]) -> None:
        path = (rt.group, rt.version, rt.plural)
        kind = (rt.group, rt.version, rt.kind)
        if path in self._by_path:
            raise ValueError(f"{rt.group_resource} ({rt.api_version}) is already registered")
        if kind in self._by_kind:
            raise ValueError(f"the kind {rt.api_version} {rt.kind} is already registered "
                             f"(as {self._by_kind[kind].group_resource})")
        self._entries.append(rt)
        self._by_path[path] = rt
        self._by_kind[kind] = rt
        self.generation += 1

    def unregister(self, rt: ResourceType[Any]) -> None:
        if self._by_path.get((rt.group, rt.version, rt.plural)) is not rt:
            raise KeyError(f"{rt.group_resource} is not registered")
        self._entries.remove(rt)
        del self._by_path[(rt.group, rt.version, rt.plural)]
        del self._by_kind[(rt.group, rt.version, rt.kind)]
        self.generation += 1

    def changed(self) -> None:
        """Something derived from an entry changed without the entry (a custom resource's
        schema): what follows the scheme is rebuilt."""
        self.generation += 1

    def __iter__(self) -> Iterator[ResourceType[Any]]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, rt: object) -> bool:
        return rt in self._entries

    def lookup(self, group: str, version: str, plural: str) -> ResourceType[Any] | None:
        """The resource at /api(s)/<group>/<version>/<plural>, if any."""
        return self._by_path.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceType[Any] | None:
        group, _, version = api_version.rpartition("/")
        return self._by_kind.get((group, version, kind))

    def groups(self) -> dict[str, list[str]]:
        """Every group (the core group "" first) with its versions, the preferred first."""
        out: dict[str, list[str]] = {}
        for rt in self._entries:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out


# ---------------------------------------------------------------- the built-in resources

_RBAC = "rbac.authorization.k8s.io"
_STATUS = Subresource("status")
_SCALE = Subresource("scale", kind="Scale", group="autoscaling", version="v1",
                     method=Method("GetScale", meta_pb2.GetRequest, autoscaling_pb2.Scale, rbac_verb="get"),
                     more=(Method("UpdateScale", autoscaling_pb2.Scale, autoscaling_pb2.Scale, rbac_verb="update"),))
# The streams: POST (SPDY) or GET (WebSocket).
_STREAM_VERBS = ("create", "get")
_PROXY_VERBS = ("create", "delete", "get", "patch", "update")  # one per HTTP method proxied

PODS = ResourceType(
    "", "v1", "Pod", "pods", core_pb2.Pod, short_names=("po",), categories=("all",), subresources=(
        _STATUS,
        Subresource("binding", ("create",), kind="Binding", method=Method("Bind", core_pb2.Binding)),
        Subresource("eviction", ("create",), kind="Eviction", group="policy", version="v1",
                    method=Method("Evict", policy_pb2.Eviction)),
        Subresource("ephemeralcontainers"),
        Subresource("log", ("get",), method=Method("Log", api_pb2.PodLogRequest, api_pb2.PodLogChunk, True)),
        Subresource("exec", _STREAM_VERBS, kind="PodExecOptions"),
        Subresource("attach", _STREAM_VERBS, kind="PodAttachOptions"),
        Subresource("portforward", _STREAM_VERBS, kind="PodPortForwardOptions"),
        Subresource("proxy", _PROXY_VERBS, kind="PodProxyOptions"),
        Subresource("resize")))
NODES = ResourceType("", "v1", "Node", "nodes", core_pb2.Node, namespaced=False, short_names=("no",),
                     subresources=(_STATUS, Subresource("proxy", _PROXY_VERBS, kind="NodeProxyOptions")))
NAMESPACES = ResourceType("", "v1", "Namespace", "namespaces", core_pb2.Namespace, namespaced=False,
                          short_names=("ns",), subresources=(_STATUS, Subresource("finalize", ("update",))))
EVENTS = ResourceType("", "v1", "Event", "events", core_pb2.Event, short_names=("ev",))
SERVICEACCOUNTS = ResourceType(
    "", "v1", "ServiceAccount", "serviceaccounts", core_pb2.ServiceAccount, short_names=("sa",), subresources=(
        Subresource("token", ("create",), kind="TokenRequest", group="authentication.k8s.io", version="v1",
                    method=Method("CreateToken", authentication_pb2.TokenRequest,
                                  authentication_pb2.TokenRequest)),))
CONFIGMAPS = ResourceType("", "v1", "ConfigMap", "configmaps", core_pb2.ConfigMap, short_names=("cm",))
SECRETS = ResourceType("", "v1", "Secret", "secrets", core_pb2.Secret)
SERVICES = ResourceType("", "v1", "Service", "services", core_pb2.Service, short_names=("svc",),
                        categories=("all",),
                        subresources=(_STATUS, Subresource("proxy", _PROXY_VERBS, kind="ServiceProxyOptions")))
ENDPOINTS = ResourceType("", "v1", "Endpoints", "endpoints", core_pb2.Endpoints, short_names=("ep",),
                         service="EndpointsService")
ENDPOINTSLICES = ResourceType("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices",
                              discovery_pb2.EndpointSlice)
LEASES = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", coordination_pb2.Lease)
ROLES = ResourceType(_RBAC, "v1", "Role", "roles", rbac_pb2.Role)
CLUSTERROLES = ResourceType(_RBAC, "v1", "ClusterRole", "clusterroles", rbac_pb2.ClusterRole, namespaced=False)
ROLEBINDINGS = ResourceType(_RBAC, "v1", "RoleBinding", "rolebindings", rbac_pb2.RoleBinding)
CLUSTERROLEBINDINGS = ResourceType(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings",
                                   rbac_pb2.ClusterRoleBinding, namespaced=False)
DEPLOYMENTS = ResourceType("apps", "v1", "Deployment", "deployments", apps_pb2.Deployment, short_names=("deploy",),
                           categories=("all",), subresources=(_STATUS, _SCALE))
REPLICASETS = ResourceType("apps", "v1", "ReplicaSet", "replicasets", apps_pb2.ReplicaSet, short_names=("rs",),
                           categories=("all",), subresources=(_STATUS, _SCALE))
JOBS = ResourceType("batch", "v1", "Job", "jobs", batch_pb2.Job, categories=("all",), subresources=(_STATUS,))
CRONJOBS = ResourceType("batch", "v1", "CronJob", "cronjobs", batch_pb2.CronJob, short_names=("cj",),
                        categories=("all",), subresources=(_STATUS,))
DAEMONSETS = ResourceType("apps", "v1", "DaemonSet", "daemonsets", apps_pb2.DaemonSet, short_names=("ds",),
                          categories=("all",), subresources=(_STATUS,))
STATEFULSETS = ResourceType("apps", "v1", "StatefulSet", "statefulsets", apps_pb2.StatefulSet, short_names=("sts",),
                            categories=("all",), subresources=(_STATUS, _SCALE))
CONTROLLERREVISIONS = ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions",
                                   apps_pb2.ControllerRevision)
HORIZONTALPODAUTOSCALERS = ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                                        autoscaling_pb2.HorizontalPodAutoscaler, short_names=("hpa",),
                                        categories=("all",), subresources=(_STATUS,))
HORIZONTALPODAUTOSCALERS_V1 = ResourceType(
    "autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
    autoscaling_pb2.HorizontalPodAutoscalerV1, short_names=("hpa",), categories=("all",), subresources=(_STATUS,),
    service="HorizontalPodAutoscalersV1", view_of=HORIZONTALPODAUTOSCALERS)
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "Event", "events", events_pb2.EventV1, short_names=("ev",),
                         service="EventsV1", view_of=EVENTS)
REPLICATIONCONTROLLERS = ResourceType("", "v1", "ReplicationController", "replicationcontrollers",
                                      core_pb2.ReplicationController, short_names=("rc",), categories=("all",),
                                      subresources=(_STATUS, _SCALE))
RESOURCEQUOTAS = ResourceType("", "v1", "ResourceQuota", "resourcequotas", core_pb2.ResourceQuota,
                              short_names=("quota",), subresources=(_STATUS,))
LIMITRANGES = ResourceType("", "v1", "LimitRange", "limitranges", core_pb2.LimitRange, short_names=("limits",))
PRIORITYCLASSES = ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses",
                               scheduling_pb2.PriorityClass, namespaced=False, short_names=("pc",))
PODTEMPLATES = ResourceType("", "v1", "PodTemplate", "podtemplates", core_pb2.PodTemplate)
CUSTOMRESOURCEDEFINITIONS = ResourceType(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", custom_pb2.CustomResource,
    namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",), subresources=(_STATUS,),
    custom=True)
POD_DISRUPTION_BUDGETS = ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets",
                                      policy_pb2.PodDisruptionBudget, short_names=("pdb",), subresources=(_STATUS,))
PERSISTENTVOLUMES = ResourceType("", "v1", "PersistentVolume", "persistentvolumes", core_pb2.PersistentVolume,
                                 namespaced=False, short_names=("pv",), subresources=(_STATUS,))
PERSISTENTVOLUMECLAIMS = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims",
                                      core_pb2.PersistentVolumeClaim, short_names=("pvc",), subresources=(_STATUS,))
_STORAGE = "storage.k8s.io"
STORAGECLASSES = ResourceType(_STORAGE, "v1", "StorageClass", "storageclasses", storage_pb2.StorageClass,
                              namespaced=False, short_names=("sc",))
CSIDRIVERS = ResourceType(_STORAGE, "v1", "CSIDriver", "csidrivers", storage_pb2.CSIDriver, namespaced=False)
CSINODES = ResourceType(_STORAGE, "v1", "CSINode", "csinodes", storage_pb2.CSINode, namespaced=False)
VOLUMEATTACHMENTS = ResourceType(_STORAGE, "v1", "VolumeAttachment", "volumeattachments",
                                 storage_pb2.VolumeAttachment, namespaced=False, subresources=(_STATUS,))
CSISTORAGECAPACITIES = ResourceType(_STORAGE, "v1", "CSIStorageCapacity", "csistoragecapacities",
                                    storage_pb2.CSIStorageCapacity, service="CSIStorageCapacities")
_ADMISSIONREGISTRATION = "admissionregistration.k8s.io"
VALIDATINGWEBHOOKCONFIGURATIONS = ResourceType(
    _ADMISSIONREGISTRATION, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
    custom_pb2.CustomResource, namespaced=False, categories=("api-extensions",), custom=True)
MUTATINGWEBHOOKCONFIGURATIONS = ResourceType(
    _ADMISSIONREGISTRATION, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
    custom_pb2.CustomResource, namespaced=False, categories=("api-extensions",), custom=True)
VALIDATINGADMISSIONPOLICIES = ResourceType(
    _ADMISSIONREGISTRATION, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
    custom_pb2.CustomResource, namespaced=False, categories=("api-extensions",), subresources=(_STATUS,),
    custom=True)
VALIDATINGADMISSIONPOLICYBINDINGS = ResourceType(
    _ADMISSIONREGISTRATION, "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
    custom_pb2.CustomResource, namespaced=False, categories=("api-extensions",), custom=True)
RUNTIMECLASSES = ResourceType("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", node_pb2.RuntimeClass,
                              namespaced=False)
_FLOWCONTROL = "flowcontrol.apiserver.k8s.io"
FLOWSCHEMAS = ResourceType(_FLOWCONTROL, "v1", "FlowSchema", "flowschemas", custom_pb2.CustomResource,
                           namespaced=False, subresources=(_STATUS,), custom=True)
PRIORITYLEVELCONFIGURATIONS = ResourceType(_FLOWCONTROL, "v1", "PriorityLevelConfiguration",
                                           "prioritylevelconfigurations", custom_pb2.CustomResource,
                                           namespaced=False, subresources=(_STATUS,), custom=True)
_NETWORKING = "networking.k8s.io"
INGRESSCLASSES = ResourceType(_NETWORKING, "v1", "IngressClass", "ingressclasses", custom_pb2.CustomResource,
                              namespaced=False, custom=True)
INGRESSES = ResourceType(_NETWORKING, "v1", "Ingress", "ingresses", custom_pb2.CustomResource, short_names=("ing",),
                         subresources=(_STATUS,), custom=True)
NETWORKPOLICIES = ResourceType(_NETWORKING, "v1", "NetworkPolicy", "networkpolicies", custom_pb2.CustomResource,
                               short_names=("netpol",), custom=True)
CERTIFICATESIGNINGREQUESTS = ResourceType("certificates.k8s.io", "v1", "CertificateSigningRequest",
                                          "certificatesigningrequests", custom_pb2.CustomResource, namespaced=False,
                                          short_names=("csr",), subresources=(_STATUS, Subresource("approval")),
                                          custom=True)
STORAGEVERSIONMIGRATIONS = ResourceType("storagemigration.k8s.io", "v1", "StorageVersionMigration",
                                        "storageversionmigrations", custom_pb2.CustomResource, namespaced=False,
                                        subresources=(_STATUS,), custom=True)
APISERVICES = ResourceType("apiregistration.k8s.io", "v1", "APIService", "apiservices", custom_pb2.CustomResource,
                           namespaced=False, categories=("api-extensions",), subresources=(_STATUS,), custom=True)

# In discovery's order.
BUILTIN: tuple[ResourceType[Any], ...] = (
    PODS, NODES, NAMESPACES, EVENTS, SERVICEACCOUNTS, CONFIGMAPS, SECRETS, SERVICES, ENDPOINTS, PODTEMPLATES,
    PERSISTENTVOLUMES, PERSISTENTVOLUMECLAIMS, REPLICATIONCONTROLLERS, RESOURCEQUOTAS, LIMITRANGES,
    ENDPOINTSLICES, LEASES, ROLES, CLUSTERROLES,
    ROLEBINDINGS, CLUSTERROLEBINDINGS, DEPLOYMENTS, REPLICASETS, DAEMONSETS, STATEFULSETS, CONTROLLERREVISIONS,
    HORIZONTALPODAUTOSCALERS, HORIZONTALPODAUTOSCALERS_V1, EVENTS_V1, JOBS, CRONJOBS, PRIORITYCLASSES,
    POD_DISRUPTION_BUDGETS, INGRESSCLASSES, INGRESSES, NETWORKPOLICIES, CERTIFICATESIGNINGREQUESTS,
    STORAGEVERSIONMIGRATIONS,
    STORAGECLASSES, CSIDRIVERS, CSINODES, VOLUMEATTACHMENTS, CSISTORAGECAPACITIES, RUNTIMECLASSES,
    VALIDATINGWEBHOOKCONFIGURATIONS,
    MUTATINGWEBHOOKCONFIGURATIONS, VALIDATINGADMISSIONPOLICIES, VALIDATINGADMISSIONPOLICYBINDINGS,
    FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS, CUSTOMRESOURCEDEFINITIONS, APISERVICES)

"""A typed asyncio client for the kubeling API.

    async with Client("127.0.0.1:6443") as c:
        pod = await c.pods.create(Pod(...))
        async for ev in c.pods.watch(resource_version=pod.metadata.resourceVersion):
            print(ev.type, ev.object.metadata.name)
        templates = c.resource(scheme.PODTEMPLATES)  # any resource of the scheme

Each resource's calls go to the gRPC service its scheme entry describes. Failures raise
the typed errors of `kubeling.errors` (NotFound, Conflict, Expired, ...).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, overload
from urllib.parse import urlsplit

import grpc
import yaml

from kubeling import errors, scheme
from kubeling.errors import from_rpc_error
from kubeling.scheme import CUSTOM_SERVICE, ObjectT, ResourceType
from protos.kubeling.v1 import (
    api_pb2,
    authentication_pb2,
    authorization_pb2,
    autoscaling_pb2,
    core_pb2,
    custom_pb2,
    meta_pb2,
    metrics_pb2,
    policy_pb2,
)

__all__ = ["Client", "ResourceClient", "PodClient", "WatchEvent", "GRPC_EXTENSION", "TLSConfig", "DRY_RUN_METADATA"]

# gRPC's dryRun=All: a write with this metadata runs every stage but the write.
DRY_RUN_METADATA = (("dry-run", "All"),)

# The kubeconfig cluster extension that carries the apiserver's gRPC address (kubectl
# ignores it and uses `server`, the REST API).
GRPC_EXTENSION = "kubeling.io/grpc"


_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    # client-go's HTTP/2 health check: a ping after 30 s of silence, the connection given up
    # when it goes unanswered for 15 s (gRPC core waits for http2.ping_timeout_ms, 60 s by
    # default, whatever keepalive_timeout_ms says), so a watch on a dead link is made again
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 15_000),
    ("grpc.http2.ping_timeout_ms", 15_000),
    # Reconnect quickly after an apiserver restart (gRPC's default backs off up to 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


@dataclass(frozen=True)
class TLSConfig:
    """How a client reaches a TLS apiserver: the CA that signed its certificate, and the
    client's own credentials (a certificate and key, and/or a bearer token), PEM bytes."""

    ca: bytes
    cert: bytes | None = None
    key: bytes | None = None
    token: str = ""

    @classmethod
    def from_files(cls, ca: Path, cert: Path | None = None, key: Path | None = None, token: str = "") -> TLSConfig:
        return cls(ca.read_bytes(), cert.read_bytes() if cert else None, key.read_bytes() if key else None, token)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        creds = grpc.ssl_channel_credentials(self.ca, self.key, self.cert)
        if self.token:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(self.token))
        return creds


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[ObjectT]):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: ObjectT


def _stub(channel: grpc.aio.Channel, resource: ResourceType[Any]) -> dict[str, Any]:
    """A resource's gRPC methods by name, made from its scheme entry (what a generated stub
    has); for a resource kept as JSON, the CustomResources service's, each request wrapped
    with the resource's group, version and plural."""
    if resource.custom:
        return _custom_stub(channel, resource)
    out: dict[str, Any] = {}
    for method in resource.methods.values():
        response: Any = method.response
        make = channel.unary_stream if method.streaming else channel.unary_unary
        out[method.name] = make(f"/{resource.service_name}/{method.name}", request_serializer=_serialize,
                                response_deserializer=response.FromString)
    return out


_CUSTOM_REQUESTS: dict[str, Any] = {
    "Create": custom_pb2.CustomObjectRequest, "Update": custom_pb2.CustomObjectRequest,
    "UpdateStatus": custom_pb2.CustomObjectRequest, "UpdateApproval": custom_pb2.CustomObjectRequest,
    "Get": custom_pb2.CustomGetRequest,
    "List": custom_pb2.CustomListRequest, "Delete": custom_pb2.CustomDeleteRequest,
    "Watch": custom_pb2.CustomWatchRequest}
_CUSTOM_RESPONSES: dict[str, Any] = {"List": custom_pb2.CustomResourceList,
                                     "Watch": custom_pb2.CustomResourceWatchEvent}


def _custom_stub(channel: grpc.aio.Channel, resource: ResourceType[Any]) -> dict[str, Any]:
    gvr = custom_pb2.GroupVersionResource(group=resource.group, version=resource.version, resource=resource.plural)
    out: dict[str, Any] = {}
    for name, wrapper in _CUSTOM_REQUESTS.items():
        response = _CUSTOM_RESPONSES.get(name, custom_pb2.CustomResource)
        make = channel.unary_stream if name == "Watch" else channel.unary_unary

        def wrap(request: Any, wrapper: Any = wrapper) -> bytes:
            if wrapper is custom_pb2.CustomObjectRequest:
                return _serialize(wrapper(resource=gvr, object=request))
            return _serialize(wrapper(resource=gvr, request=request))
        out[name] = make(f"/{CUSTOM_SERVICE}/{name}", request_serializer=wrap,
                         response_deserializer=response.FromString)
    return out


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


class ResourceClient(Generic[ObjectT]):
    """The verbs of one resource. Namespaced calls default to namespace "default"."""

    def __init__(self, channel: grpc.aio.Channel, resource: ResourceType[ObjectT], timeout: float | None,
                 wait_for_ready: bool = True) -> None:
        self.resource = resource
        self.rebind(channel)
        self.kind = resource.kind
        self.namespaced = resource.namespaced
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready

    def rebind(self, channel: grpc.aio.Channel) -> None:
        """Calls from now on go over `channel`; those under way finish on the one they began on."""
        self._stub = _stub(channel, self.resource)

    async def _call(self, method: str, request: Any, *, dry_run: bool = False) -> Any:
        try:
            return await self._stub[method](request, timeout=self.timeout,
                                                     wait_for_ready=self.wait_for_ready,
                                                     metadata=DRY_RUN_METADATA if dry_run else None)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None

    async def create(self, obj: ObjectT, *, dry_run: bool = False) -> ObjectT:
        """With `dry_run`: judged and answered as the write would be, nothing stored."""
        return await self._call("Create", obj, dry_run=dry_run)

    async def get(self, name: str, namespace: str = "", *, resource_version: str = "") -> ObjectT:
        """The latest object; with resource_version "0" whatever the apiserver's cache holds
        (cheaper, possibly a moment old), "N" one not older than N."""
        return await self._call("Get", meta_pb2.GetRequest(namespace=namespace, name=name,
                                                           resourceVersion=resource_version))

    async def get_scale(self, name: str, namespace: str = "") -> autoscaling_pb2.Scale:
        """The scale subresource (a resource without one: NotFound, as REST answers)."""
        if "GetScale" not in self._stub:
            raise errors.NotFound(f"the server could not find the requested resource ({self.resource.plural}/scale)")
        return await self._call("GetScale", meta_pb2.GetRequest(namespace=namespace, name=name))

    async def update_scale(self, scale: autoscaling_pb2.Scale, *, dry_run: bool = False) -> autoscaling_pb2.Scale:
        """Set spec.replicas through the scale subresource (its metadata.resourceVersion,
        when set, a precondition)."""
        if "UpdateScale" not in self._stub:
            raise errors.NotFound(f"the server could not find the requested resource ({self.resource.plural}/scale)")
        return await self._call("UpdateScale", scale, dry_run=dry_run)

    async def list(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                   limit: int = 0, continue_token: str = "", resource_version: str = "") -> Any:
        """One page: `.items` and `.metadata` (resourceVersion, continue)."""
        req = meta_pb2.ListRequest(namespace=namespace, labelSelector=label_selector,
                                   fieldSelector=field_selector, limit=limit, resourceVersion=resource_version)
        setattr(req, "continue", continue_token)
        return await self._call("List", req)

    async def list_all(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                       page_size: int = 500) -> tuple[builtins.list[ObjectT], str]:
        """Every item, page by page at one revision; returns (items, resourceVersion)."""
        items: builtins.list[ObjectT] = []
        token = ""
        while True:
            page = await self.list(namespace, label_selector=label_selector, field_selector=field_selector,
                                   limit=page_size, continue_token=token)
            items.extend(page.items)
            token = getattr(page.metadata, "continue")
            if not token:
                return items, page.metadata.resourceVersion

    async def update(self, obj: ObjectT, *, dry_run: bool = False) -> ObjectT:
        return await self._call("Update", obj, dry_run=dry_run)

    async def update_status(self, obj: ObjectT, *, dry_run: bool = False) -> ObjectT:
        return await self._call("UpdateStatus", obj, dry_run=dry_run)

    async def update_approval(self, obj: ObjectT, *, dry_run: bool = False) -> ObjectT:
        """certificatesigningrequests/approval: only the Approved/Denied conditions count."""
        return await self._call("UpdateApproval", obj, dry_run=dry_run)

    async def delete(self, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     propagation_policy: str | None = None, dry_run: bool = False) -> ObjectT:
        """propagation_policy: Background (unset), Foreground or Orphan, for the dependents."""
        req = meta_pb2.DeleteRequest(namespace=namespace, name=name)
        if propagation_policy is not None:
            req.propagationPolicy = propagation_policy
        if grace_period_seconds is not None:
            req.gracePeriodSeconds = grace_period_seconds
        if uid is not None:
            req.preconditions.uid = uid
        if resource_version is not None:
            req.preconditions.resourceVersion = resource_version
        return await self._call("Delete", req, dry_run=dry_run)

    async def watch(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                    resource_version: str = "", allow_bookmarks: bool = False,
                    timeout_seconds: int = 0) -> AsyncIterator[WatchEvent[ObjectT]]:
        """Events after resource_version ("" or "0": current state as ADDED first).

        Raises Expired when resource_version is too old: relist and watch again."""
        req = meta_pb2.WatchRequest(namespace=namespace, labelSelector=label_selector,
                                    fieldSelector=field_selector, resourceVersion=resource_version,
                                    allowWatchBookmarks=allow_bookmarks, timeoutSeconds=timeout_seconds,
                                    batchEvents=True)
        call = self._stub["Watch"](req, wait_for_ready=self.wait_for_ready)
        try:
            async for ev in call:
                if ev.batch:  # several events that were ready at once, in order
                    for one in ev.batch:
                        yield WatchEvent(one.type, one.object)
                else:
                    yield WatchEvent(ev.type, ev.object)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # not this task's cancellation: the channel under the stream was closed (`rotate`
            # retired it): an end the caller resumes from, as any other
            raise errors.ServiceUnavailable("the watch's connection was closed") from None
        finally:
            call.cancel()


class PodClient(ResourceClient[core_pb2.Pod]):
    async def evict(self, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
                    dry_run: bool = False) -> core_pb2.Pod:
        """pods/eviction: a delete a PodDisruptionBudget may refuse (TooManyRequests)."""
        eviction = policy_pb2.Eviction(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace))
        if grace_period_seconds is not None:
            eviction.deleteOptions.gracePeriodSeconds = grace_period_seconds
        result: core_pb2.Pod = await self._call("Evict", eviction, dry_run=dry_run)
        return result

    async def bind(self, name: str, node: str, namespace: str = "", *, uid: str = "",
                   annotations: dict[str, str] | None = None) -> core_pb2.Pod:
        """Assign the pod to a node (refused with Conflict when it has one already)."""
        b = core_pb2.Binding(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace, uid=uid,
                                                          annotations=annotations or {}),
                             target=meta_pb2.ObjectReference(kind="Node", name=node))
        return await self._call("Bind", b)

    async def logs(self, name: str, namespace: str = "", *, container: str = "", follow: bool = False,
                   previous: bool = False, tail_lines: int | None = None, timestamps: bool = False,
                   limit_bytes: int | None = None) -> AsyncIterator[bytes]:
        """A container's log (pods/log), from the pod's kubelet; with `follow`, until the container ends."""
        req = api_pb2.PodLogRequest(namespace=namespace, name=name, container=container, follow=follow,
                                    previous=previous, timestamps=timestamps)
        if tail_lines is not None:
            req.tailLines = tail_lines
        if limit_bytes is not None:
            req.limitBytes = limit_bytes
        call = self._stub["Log"](req, wait_for_ready=self.wait_for_ready)
        try:
            async for chunk in call:
                yield chunk.data
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()


class ServiceAccountClient(ResourceClient[core_pb2.ServiceAccount]):
    async def create_token(self, name: str, namespace: str = "", *, audiences: list[str] | None = None,
                           expiration_seconds: int | None = None,
                           bound_pod: core_pb2.Pod | None = None) -> authentication_pb2.TokenRequest:
        """A token for the ServiceAccount (serviceaccounts/token), bound to a pod when given."""
        req = authentication_pb2.TokenRequest(metadata=meta_pb2.ObjectMeta(name=name, namespace=namespace))
        req.spec.audiences.extend(audiences or [])
        if expiration_seconds is not None:
            req.spec.expirationSeconds = expiration_seconds
        if bound_pod is not None:
            req.spec.boundObjectRef.CopyFrom(authentication_pb2.BoundObjectReference(
                kind="Pod", apiVersion="v1", name=bound_pod.metadata.name, uid=bound_pod.metadata.uid))
        result: authentication_pb2.TokenRequest = await self._call("CreateToken", req)
        return result


_C = TypeVar("_C", bound=ResourceClient[Any])


class _Typed(Generic[_C]):
    """A Client attribute that is one resource's client, typed."""

    def __init__(self, resource: ResourceType[Any], kind: type[_C]) -> None:
        self.entry = resource
        self.kind = kind

    @overload
    def __get__(self, client: None, owner: type[Any]) -> _Typed[_C]: ...

    @overload
    def __get__(self, client: Client, owner: type[Any]) -> _C: ...

    def __get__(self, client: Client | None, owner: type[Any]) -> _Typed[_C] | _C:
        if client is None:
            return self
        return client.resource(self.entry, self.kind)


def _typed(resource: ResourceType[ObjectT]) -> _Typed[ResourceClient[ObjectT]]:
    return _Typed(resource, ResourceClient)


def _kubeconfig_bytes(path: Path, section: dict[str, Any], name: str) -> bytes | None:
    """A kubeconfig's `<name>-data` (base64) or `<name>` (a file, relative to the kubeconfig)."""
    if section.get(f"{name}-data"):
        return base64.b64decode(str(section[f"{name}-data"]))
    if section.get(name):
        return (path.parent / str(section[name])).read_bytes()
    return None


class Client:
    def __init__(self, address: str, *, timeout: float | None = 30.0, wait_for_ready: bool = True,
                 channel: grpc.aio.Channel | None = None, tls: TLSConfig | None = None) -> None:
        """`timeout` bounds every unary call; with `wait_for_ready` a call made while the
        apiserver is unreachable waits for it (within the timeout) instead of failing.
        With `tls` the channel is TLS, with the client's certificate and/or token."""
        self.address = address
        self.tls = tls
        if channel is None:
            channel = grpc.aio.secure_channel(address, tls.channel_credentials(), options=_CHANNEL_OPTIONS) \
                if tls is not None else grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self.channel = channel
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._resources: dict[ResourceType[Any], ResourceClient[Any]] = {}
        self._dynamic: dict[tuple[str, str, str], ResourceClient[custom_pb2.CustomResource]] = {}
        self._retired: list[grpc.aio.Channel] = []  # channels `rotate` replaced, streams may still run on them

    @overload
    def resource(self, resource: ResourceType[ObjectT]) -> ResourceClient[ObjectT]: ...

    @overload
    def resource(self, resource: ResourceType[Any], kind: type[_C]) -> _C: ...

    def resource(self, resource: ResourceType[Any], kind: type[ResourceClient[Any]] = ResourceClient) -> Any:
        """The client of one resource of the scheme (made once per Client)."""
        found = self._resources.get(resource)
        if found is None:
            found = self._resources[resource] = kind(self.channel, resource, self.timeout, self.wait_for_ready)
        return found

    def dynamic(self, api_version: str, plural: str, kind: str = "", *, namespaced: bool = True,
                ) -> ResourceClient[custom_pb2.CustomResource]:
        """A dynamic client: the custom resource at /apis/<api_version>/<plural>, its objects
        CustomResource messages (`kubeling.dynamic` makes and reads them)."""
        group, _, version = api_version.rpartition("/")
        key = (group, version, plural)
        found = self._dynamic.get(key)
        if found is None:
            entry = ResourceType(group, version, kind or plural, plural, custom_pb2.CustomResource,
                                 namespaced=namespaced, custom=True)
            found = self._dynamic[key] = ResourceClient(self.channel, entry, self.timeout, self.wait_for_ready)
        return found

    async def pod_metrics(self, namespace: str, *, label_selector: str = "") -> list[metrics_pb2.PodMetrics]:
        """metrics.k8s.io PodMetrics of a namespace's pods (the kubeling.v1.Metrics service):
        their containers' cpu and memory now, from the kubelets; pods no kubelet reported on
        are missing, as metrics-server leaves them out."""
        call = self.channel.unary_unary("/kubeling.v1.Metrics/ListPodMetrics", request_serializer=_serialize,
                                        response_deserializer=metrics_pb2.PodMetricsList.FromString)
        try:
            reply = await call(meta_pb2.ListRequest(namespace=namespace, labelSelector=label_selector),
                               timeout=self.timeout, wait_for_ready=self.wait_for_ready)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        return list(reply.items)

    async def subject_access_review(self, review: authorization_pb2.SubjectAccessReview,
                                    ) -> authorization_pb2.SubjectAccessReview:
        """May review.spec's user do this? (the kubeling.v1.Authorization service): the review
        with its status filled in by the apiserver's authorizer."""
        call = self.channel.unary_unary("/kubeling.v1.Authorization/CreateSubjectAccessReview",
                                        request_serializer=_serialize,
                                        response_deserializer=authorization_pb2.SubjectAccessReview.FromString)
        try:
            reply: authorization_pb2.SubjectAccessReview = await call(review, timeout=self.timeout,
                                                                      wait_for_ready=self.wait_for_ready)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        return reply

    # The built-in resources by name, typed (any other: `resource(entry)`).
    pods = _Typed(scheme.PODS, PodClient)
    nodes = _typed(scheme.NODES)
    namespaces = _typed(scheme.NAMESPACES)
    events = _typed(scheme.EVENTS)
    serviceaccounts = _Typed(scheme.SERVICEACCOUNTS, ServiceAccountClient)
    configmaps = _typed(scheme.CONFIGMAPS)
    secrets = _typed(scheme.SECRETS)
    leases = _typed(scheme.LEASES)
    roles = _typed(scheme.ROLES)
    clusterroles = _typed(scheme.CLUSTERROLES)
    rolebindings = _typed(scheme.ROLEBINDINGS)
    clusterrolebindings = _typed(scheme.CLUSTERROLEBINDINGS)
    replicasets = _typed(scheme.REPLICASETS)
    deployments = _typed(scheme.DEPLOYMENTS)
    jobs = _typed(scheme.JOBS)
    cronjobs = _typed(scheme.CRONJOBS)
    daemonsets = _typed(scheme.DAEMONSETS)
    statefulsets = _typed(scheme.STATEFULSETS)
    controllerrevisions = _typed(scheme.CONTROLLERREVISIONS)
    replicationcontrollers = _typed(scheme.REPLICATIONCONTROLLERS)
    resourcequotas = _typed(scheme.RESOURCEQUOTAS)
    limitranges = _typed(scheme.LIMITRANGES)
    horizontalpodautoscalers = _typed(scheme.HORIZONTALPODAUTOSCALERS)
    priorityclasses = _typed(scheme.PRIORITYCLASSES)
    poddisruptionbudgets = _typed(scheme.POD_DISRUPTION_BUDGETS)
    services = _typed(scheme.SERVICES)
    endpoints = _typed(scheme.ENDPOINTS)
    endpointslices = _typed(scheme.ENDPOINTSLICES)
    customresourcedefinitions = _typed(scheme.CUSTOMRESOURCEDEFINITIONS)
    validatingwebhookconfigurations = _typed(scheme.VALIDATINGWEBHOOKCONFIGURATIONS)
    mutatingwebhookconfigurations = _typed(scheme.MUTATINGWEBHOOKCONFIGURATIONS)
    validatingadmissionpolicies = _typed(scheme.VALIDATINGADMISSIONPOLICIES)
    validatingadmissionpolicybindings = _typed(scheme.VALIDATINGADMISSIONPOLICYBINDINGS)
    apiservices = _typed(scheme.APISERVICES)
    ingressclasses = _typed(scheme.INGRESSCLASSES)
    ingresses = _typed(scheme.INGRESSES)
    networkpolicies = _typed(scheme.NETWORKPOLICIES)
    certificatesigningrequests = _typed(scheme.CERTIFICATESIGNINGREQUESTS)
    storageversionmigrations = _typed(scheme.STORAGEVERSIONMIGRATIONS)
    runtimeclasses = _typed(scheme.RUNTIMECLASSES)
    persistentvolumes = _typed(scheme.PERSISTENTVOLUMES)
    persistentvolumeclaims = _typed(scheme.PERSISTENTVOLUMECLAIMS)
    storageclasses = _typed(scheme.STORAGECLASSES)
    csidrivers = _typed(scheme.CSIDRIVERS)
    csinodes = _typed(scheme.CSINODES)
    volumeattachments = _typed(scheme.VOLUMEATTACHMENTS)
    csistoragecapacities = _typed(scheme.CSISTORAGECAPACITIES)

    def rotate(self, tls: TLSConfig) -> grpc.aio.Channel:
        """New credentials (a renewed client certificate) without a restart: calls from now
        on, in every resource client made so far too, go over a new channel with `tls`;
        streams under way (watches) go on over the old channel, which is returned for the
        caller to close when it is due (once the old certificate expires)."""
        old = self.channel
        self.tls = tls
        self.channel = grpc.aio.secure_channel(self.address, tls.channel_credentials(), options=_CHANNEL_OPTIONS)
        for client in (*self._resources.values(), *self._dynamic.values()):
            client.rebind(self.channel)
        self._retired.append(old)
        return old

    async def close_retired(self, channel: grpc.aio.Channel) -> None:
        """Close a channel `rotate` retired: streams still on it end (informers resume on the new one)."""
        if channel in self._retired:
            self._retired.remove(channel)
            await channel.close()

    @classmethod
    def from_kubeconfig(cls, path: str | Path, *, context: str = "", **options: Any) -> Client:
        """A client for the cluster of a kubeconfig's context (the current one unless named;
        as `kubeling up` writes them): the gRPC address of its `kubeling.io/grpc` extension,
        else its server's host:port."""
        config = yaml.safe_load(Path(path).read_text()) or {}
        current = context or config.get("current-context", "")
        chosen: dict[str, Any] = next((c.get("context", {}) for c in config.get("contexts", [])
                                       if c.get("name") == current), {})
        if context and not chosen:
            raise ValueError(f"{path}: no context {context!r}")
        cluster: dict[str, Any] = next((c.get("cluster", {}) for c in config.get("clusters", [])
                                        if c.get("name") == chosen.get("cluster")), {})
        grpc_address = next((str((e.get("extension") or {}).get("address", "")) for e in cluster.get("extensions", [])
                             if e.get("name") == GRPC_EXTENSION), "")
        server = grpc_address or str(cluster.get("server", ""))
        address = urlsplit(server).netloc if "://" in server else server
        if not address:
            raise ValueError(f"{path}: no server for the context {current!r}")
        user: dict[str, Any] = next((u.get("user", {}) for u in config.get("users", [])
                                     if u.get("name") == chosen.get("user")), {})
        ca = _kubeconfig_bytes(Path(path), cluster, "certificate-authority")
        if ca is not None and "tls" not in options:
            options["tls"] = TLSConfig(ca, _kubeconfig_bytes(Path(path), user, "client-certificate"),
                                       _kubeconfig_bytes(Path(path), user, "client-key"), str(user.get("token", "")))
        return cls(address, **options)

    async def close(self) -> None:
        for old in self._retired:
            await old.close()
        self._retired.clear()
        await self.channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


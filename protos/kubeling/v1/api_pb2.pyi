from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from protos.kubeling.v1 import core_pb2 as _core_pb2
from protos.kubeling.v1 import coordination_pb2 as _coordination_pb2
from protos.kubeling.v1 import rbac_pb2 as _rbac_pb2
from protos.kubeling.v1 import authentication_pb2 as _authentication_pb2
from protos.kubeling.v1 import apps_pb2 as _apps_pb2
from protos.kubeling.v1 import batch_pb2 as _batch_pb2
from protos.kubeling.v1 import scheduling_pb2 as _scheduling_pb2
from protos.kubeling.v1 import policy_pb2 as _policy_pb2
from protos.kubeling.v1 import discovery_pb2 as _discovery_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PodList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Pod]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Pod, _Mapping]]] = ...) -> None: ...

class PodWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Pod
    batch: _containers.RepeatedCompositeFieldContainer[PodWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Pod, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[PodWatchEvent, _Mapping]]] = ...) -> None: ...

class PodLogRequest(_message.Message):
    __slots__ = ("namespace", "name", "container", "follow", "previous", "tailLines", "timestamps", "limitBytes")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    TAILLINES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    LIMITBYTES_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    container: str
    follow: bool
    previous: bool
    tailLines: int
    timestamps: bool
    limitBytes: int
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., container: _Optional[str] = ..., follow: _Optional[bool] = ..., previous: _Optional[bool] = ..., tailLines: _Optional[int] = ..., timestamps: _Optional[bool] = ..., limitBytes: _Optional[int] = ...) -> None: ...

class PodLogChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class NodeList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Node]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Node, _Mapping]]] = ...) -> None: ...

class NodeWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Node
    batch: _containers.RepeatedCompositeFieldContainer[NodeWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Node, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[NodeWatchEvent, _Mapping]]] = ...) -> None: ...

class NamespaceList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Namespace]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Namespace, _Mapping]]] = ...) -> None: ...

class NamespaceWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Namespace
    batch: _containers.RepeatedCompositeFieldContainer[NamespaceWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Namespace, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[NamespaceWatchEvent, _Mapping]]] = ...) -> None: ...

class EventList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Event]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Event, _Mapping]]] = ...) -> None: ...

class EventWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Event
    batch: _containers.RepeatedCompositeFieldContainer[EventWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Event, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[EventWatchEvent, _Mapping]]] = ...) -> None: ...

class LeaseList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_coordination_pb2.Lease]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_coordination_pb2.Lease, _Mapping]]] = ...) -> None: ...

class LeaseWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _coordination_pb2.Lease
    batch: _containers.RepeatedCompositeFieldContainer[LeaseWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_coordination_pb2.Lease, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[LeaseWatchEvent, _Mapping]]] = ...) -> None: ...

class RoleList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_rbac_pb2.Role]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_rbac_pb2.Role, _Mapping]]] = ...) -> None: ...

class RoleWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _rbac_pb2.Role
    batch: _containers.RepeatedCompositeFieldContainer[RoleWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_rbac_pb2.Role, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[RoleWatchEvent, _Mapping]]] = ...) -> None: ...

class ClusterRoleList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_rbac_pb2.ClusterRole]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_rbac_pb2.ClusterRole, _Mapping]]] = ...) -> None: ...

class ClusterRoleWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _rbac_pb2.ClusterRole
    batch: _containers.RepeatedCompositeFieldContainer[ClusterRoleWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_rbac_pb2.ClusterRole, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ClusterRoleWatchEvent, _Mapping]]] = ...) -> None: ...

class RoleBindingList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_rbac_pb2.RoleBinding]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_rbac_pb2.RoleBinding, _Mapping]]] = ...) -> None: ...

class RoleBindingWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _rbac_pb2.RoleBinding
    batch: _containers.RepeatedCompositeFieldContainer[RoleBindingWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_rbac_pb2.RoleBinding, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[RoleBindingWatchEvent, _Mapping]]] = ...) -> None: ...

class ClusterRoleBindingList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_rbac_pb2.ClusterRoleBinding]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_rbac_pb2.ClusterRoleBinding, _Mapping]]] = ...) -> None: ...

class ClusterRoleBindingWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _rbac_pb2.ClusterRoleBinding
    batch: _containers.RepeatedCompositeFieldContainer[ClusterRoleBindingWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_rbac_pb2.ClusterRoleBinding, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ClusterRoleBindingWatchEvent, _Mapping]]] = ...) -> None: ...

class ServiceAccountList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.ServiceAccount]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.ServiceAccount, _Mapping]]] = ...) -> None: ...

class ServiceAccountWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.ServiceAccount
    batch: _containers.RepeatedCompositeFieldContainer[ServiceAccountWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.ServiceAccount, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ServiceAccountWatchEvent, _Mapping]]] = ...) -> None: ...

class ConfigMapList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.ConfigMap]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.ConfigMap, _Mapping]]] = ...) -> None: ...

class ConfigMapWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.ConfigMap
    batch: _containers.RepeatedCompositeFieldContainer[ConfigMapWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.ConfigMap, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ConfigMapWatchEvent, _Mapping]]] = ...) -> None: ...

class SecretList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Secret]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Secret, _Mapping]]] = ...) -> None: ...

class SecretWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Secret
    batch: _containers.RepeatedCompositeFieldContainer[SecretWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Secret, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[SecretWatchEvent, _Mapping]]] = ...) -> None: ...

class ReplicaSetList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_apps_pb2.ReplicaSet]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_apps_pb2.ReplicaSet, _Mapping]]] = ...) -> None: ...

class ReplicaSetWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _apps_pb2.ReplicaSet
    batch: _containers.RepeatedCompositeFieldContainer[ReplicaSetWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_apps_pb2.ReplicaSet, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ReplicaSetWatchEvent, _Mapping]]] = ...) -> None: ...

class DeploymentList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_apps_pb2.Deployment]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_apps_pb2.Deployment, _Mapping]]] = ...) -> None: ...

class DeploymentWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _apps_pb2.Deployment
    batch: _containers.RepeatedCompositeFieldContainer[DeploymentWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_apps_pb2.Deployment, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[DeploymentWatchEvent, _Mapping]]] = ...) -> None: ...

class JobList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_batch_pb2.Job]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_batch_pb2.Job, _Mapping]]] = ...) -> None: ...

class JobWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _batch_pb2.Job
    batch: _containers.RepeatedCompositeFieldContainer[JobWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_batch_pb2.Job, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[JobWatchEvent, _Mapping]]] = ...) -> None: ...

class PriorityClassList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_scheduling_pb2.PriorityClass]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_scheduling_pb2.PriorityClass, _Mapping]]] = ...) -> None: ...

class PriorityClassWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _scheduling_pb2.PriorityClass
    batch: _containers.RepeatedCompositeFieldContainer[PriorityClassWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_scheduling_pb2.PriorityClass, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[PriorityClassWatchEvent, _Mapping]]] = ...) -> None: ...

class PodDisruptionBudgetList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_policy_pb2.PodDisruptionBudget]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_policy_pb2.PodDisruptionBudget, _Mapping]]] = ...) -> None: ...

class PodDisruptionBudgetWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _policy_pb2.PodDisruptionBudget
    batch: _containers.RepeatedCompositeFieldContainer[PodDisruptionBudgetWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_policy_pb2.PodDisruptionBudget, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[PodDisruptionBudgetWatchEvent, _Mapping]]] = ...) -> None: ...

class ServiceList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Service]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Service, _Mapping]]] = ...) -> None: ...

class ServiceWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Service
    batch: _containers.RepeatedCompositeFieldContainer[ServiceWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Service, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ServiceWatchEvent, _Mapping]]] = ...) -> None: ...

class EndpointsList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_core_pb2.Endpoints]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_core_pb2.Endpoints, _Mapping]]] = ...) -> None: ...

class EndpointsWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _core_pb2.Endpoints
    batch: _containers.RepeatedCompositeFieldContainer[EndpointsWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_core_pb2.Endpoints, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[EndpointsWatchEvent, _Mapping]]] = ...) -> None: ...

class EndpointSliceList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[_discovery_pb2.EndpointSlice]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[_discovery_pb2.EndpointSlice, _Mapping]]] = ...) -> None: ...

class EndpointSliceWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: _discovery_pb2.EndpointSlice
    batch: _containers.RepeatedCompositeFieldContainer[EndpointSliceWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[_discovery_pb2.EndpointSlice, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[EndpointSliceWatchEvent, _Mapping]]] = ...) -> None: ...

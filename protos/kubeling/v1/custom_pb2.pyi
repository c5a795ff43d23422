from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CustomResource(_message.Message):
    __slots__ = ("metadata", "apiVersion", "kind", "content")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    APIVERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    apiVersion: str
    kind: str
    content: str
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., apiVersion: _Optional[str] = ..., kind: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class CustomResourceList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[CustomResource]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[CustomResource, _Mapping]]] = ...) -> None: ...

class CustomResourceWatchEvent(_message.Message):
    __slots__ = ("type", "object", "batch")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: CustomResource
    batch: _containers.RepeatedCompositeFieldContainer[CustomResourceWatchEvent]
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[CustomResource, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[CustomResourceWatchEvent, _Mapping]]] = ...) -> None: ...

class GroupVersionResource(_message.Message):
    __slots__ = ("group", "version", "resource")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    group: str
    version: str
    resource: str
    def __init__(self, group: _Optional[str] = ..., version: _Optional[str] = ..., resource: _Optional[str] = ...) -> None: ...

class CustomObjectRequest(_message.Message):
    __slots__ = ("resource", "object")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    resource: GroupVersionResource
    object: CustomResource
    def __init__(self, resource: _Optional[_Union[GroupVersionResource, _Mapping]] = ..., object: _Optional[_Union[CustomResource, _Mapping]] = ...) -> None: ...

class CustomGetRequest(_message.Message):
    __slots__ = ("resource", "request")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    resource: GroupVersionResource
    request: _meta_pb2.GetRequest
    def __init__(self, resource: _Optional[_Union[GroupVersionResource, _Mapping]] = ..., request: _Optional[_Union[_meta_pb2.GetRequest, _Mapping]] = ...) -> None: ...

class CustomListRequest(_message.Message):
    __slots__ = ("resource", "request")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    resource: GroupVersionResource
    request: _meta_pb2.ListRequest
    def __init__(self, resource: _Optional[_Union[GroupVersionResource, _Mapping]] = ..., request: _Optional[_Union[_meta_pb2.ListRequest, _Mapping]] = ...) -> None: ...

class CustomDeleteRequest(_message.Message):
    __slots__ = ("resource", "request")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    resource: GroupVersionResource
    request: _meta_pb2.DeleteRequest
    def __init__(self, resource: _Optional[_Union[GroupVersionResource, _Mapping]] = ..., request: _Optional[_Union[_meta_pb2.DeleteRequest, _Mapping]] = ...) -> None: ...

class CustomWatchRequest(_message.Message):
    __slots__ = ("resource", "request")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    resource: GroupVersionResource
    request: _meta_pb2.WatchRequest
    def __init__(self, resource: _Optional[_Union[GroupVersionResource, _Mapping]] = ..., request: _Optional[_Union[_meta_pb2.WatchRequest, _Mapping]] = ...) -> None: ...

import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContainerMetrics(_message.Message):
    __slots__ = ("name", "usage")
    class UsageEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    usage: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., usage: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PodMetrics(_message.Message):
    __slots__ = ("metadata", "timestamp", "window", "containers")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    timestamp: _timestamp_pb2.Timestamp
    window: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerMetrics]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerMetrics, _Mapping]]] = ...) -> None: ...

class PodMetricsList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PodMetrics]
    def __init__(self, items: _Optional[_Iterable[_Union[PodMetrics, _Mapping]]] = ...) -> None: ...

from protos.kubeling.v1 import core_pb2 as _core_pb2
from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RuntimeClassOverhead(_message.Message):
    __slots__ = ("podFixed",)
    class PodFixedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PODFIXED_FIELD_NUMBER: _ClassVar[int]
    podFixed: _containers.ScalarMap[str, str]
    def __init__(self, podFixed: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RuntimeClassScheduling(_message.Message):
    __slots__ = ("nodeSelector", "tolerations")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODESELECTOR_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    nodeSelector: _containers.ScalarMap[str, str]
    tolerations: _containers.RepeatedCompositeFieldContainer[_core_pb2.Toleration]
    def __init__(self, nodeSelector: _Optional[_Mapping[str, str]] = ..., tolerations: _Optional[_Iterable[_Union[_core_pb2.Toleration, _Mapping]]] = ...) -> None: ...

class RuntimeClass(_message.Message):
    __slots__ = ("metadata", "handler", "overhead", "scheduling")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    handler: str
    overhead: RuntimeClassOverhead
    scheduling: RuntimeClassScheduling
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., handler: _Optional[str] = ..., overhead: _Optional[_Union[RuntimeClassOverhead, _Mapping]] = ..., scheduling: _Optional[_Union[RuntimeClassScheduling, _Mapping]] = ...) -> None: ...

from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EndpointConditions(_message.Message):
    __slots__ = ("ready", "serving", "terminating")
    READY_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    serving: bool
    terminating: bool
    def __init__(self, ready: _Optional[bool] = ..., serving: _Optional[bool] = ..., terminating: _Optional[bool] = ...) -> None: ...

class ForZone(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ForNode(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class EndpointHints(_message.Message):
    __slots__ = ("forZones", "forNodes")
    FORZONES_FIELD_NUMBER: _ClassVar[int]
    FORNODES_FIELD_NUMBER: _ClassVar[int]
    forZones: _containers.RepeatedCompositeFieldContainer[ForZone]
    forNodes: _containers.RepeatedCompositeFieldContainer[ForNode]
    def __init__(self, forZones: _Optional[_Iterable[_Union[ForZone, _Mapping]]] = ..., forNodes: _Optional[_Iterable[_Union[ForNode, _Mapping]]] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("addresses", "conditions", "hostname", "targetRef", "deprecatedTopology", "nodeName", "zone", "hints")
    class DeprecatedTopologyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    TARGETREF_FIELD_NUMBER: _ClassVar[int]
    DEPRECATEDTOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedScalarFieldContainer[str]
    conditions: EndpointConditions
    hostname: str
    targetRef: _meta_pb2.ObjectReference
    deprecatedTopology: _containers.ScalarMap[str, str]
    nodeName: str
    zone: str
    hints: EndpointHints
    def __init__(self, addresses: _Optional[_Iterable[str]] = ..., conditions: _Optional[_Union[EndpointConditions, _Mapping]] = ..., hostname: _Optional[str] = ..., targetRef: _Optional[_Union[_meta_pb2.ObjectReference, _Mapping]] = ..., deprecatedTopology: _Optional[_Mapping[str, str]] = ..., nodeName: _Optional[str] = ..., zone: _Optional[str] = ..., hints: _Optional[_Union[EndpointHints, _Mapping]] = ...) -> None: ...

class EndpointSlicePort(_message.Message):
    __slots__ = ("name", "protocol", "port", "appProtocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    APPPROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    protocol: str
    port: int
    appProtocol: str
    def __init__(self, name: _Optional[str] = ..., protocol: _Optional[str] = ..., port: _Optional[int] = ..., appProtocol: _Optional[str] = ...) -> None: ...

class EndpointSlice(_message.Message):
    __slots__ = ("metadata", "addressType", "endpoints", "ports")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ADDRESSTYPE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    addressType: str
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    ports: _containers.RepeatedCompositeFieldContainer[EndpointSlicePort]
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., addressType: _Optional[str] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., ports: _Optional[_Iterable[_Union[EndpointSlicePort, _Mapping]]] = ...) -> None: ...

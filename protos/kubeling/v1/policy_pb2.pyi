import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from protos.kubeling.v1 import meta_pb2 as _meta_pb2
from protos.kubeling.v1 import core_pb2 as _core_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PodDisruptionBudgetSpec(_message.Message):
    __slots__ = ("minAvailable", "selector", "maxUnavailable", "unhealthyPodEvictionPolicy")
    MINAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MAXUNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHYPODEVICTIONPOLICY_FIELD_NUMBER: _ClassVar[int]
    minAvailable: _core_pb2.IntOrString
    selector: _meta_pb2.LabelSelector
    maxUnavailable: _core_pb2.IntOrString
    unhealthyPodEvictionPolicy: str
    def __init__(self, minAvailable: _Optional[_Union[_core_pb2.IntOrString, _Mapping]] = ..., selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., maxUnavailable: _Optional[_Union[_core_pb2.IntOrString, _Mapping]] = ..., unhealthyPodEvictionPolicy: _Optional[str] = ...) -> None: ...

class PodDisruptionBudgetStatus(_message.Message):
    __slots__ = ("observedGeneration", "disruptedPods", "disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods", "conditions")
    class DisruptedPodsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    OBSERVEDGENERATION_FIELD_NUMBER: _ClassVar[int]
    DISRUPTEDPODS_FIELD_NUMBER: _ClassVar[int]
    DISRUPTIONSALLOWED_FIELD_NUMBER: _ClassVar[int]
    CURRENTHEALTHY_FIELD_NUMBER: _ClassVar[int]
    DESIREDHEALTHY_FIELD_NUMBER: _ClassVar[int]
    EXPECTEDPODS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    observedGeneration: int
    disruptedPods: _containers.MessageMap[str, _timestamp_pb2.Timestamp]
    disruptionsAllowed: int
    currentHealthy: int
    desiredHealthy: int
    expectedPods: int
    conditions: _containers.RepeatedCompositeFieldContainer[_meta_pb2.Condition]
    def __init__(self, observedGeneration: _Optional[int] = ..., disruptedPods: _Optional[_Mapping[str, _timestamp_pb2.Timestamp]] = ..., disruptionsAllowed: _Optional[int] = ..., currentHealthy: _Optional[int] = ..., desiredHealthy: _Optional[int] = ..., expectedPods: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[_meta_pb2.Condition, _Mapping]]] = ...) -> None: ...

class Eviction(_message.Message):
    __slots__ = ("metadata", "deleteOptions")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DELETEOPTIONS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    deleteOptions: _meta_pb2.DeleteOptions
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., deleteOptions: _Optional[_Union[_meta_pb2.DeleteOptions, _Mapping]] = ...) -> None: ...

class PodDisruptionBudget(_message.Message):
    __slots__ = ("metadata", "spec", "status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodDisruptionBudgetSpec, _Mapping]] = ..., status: _Optional[_Union[PodDisruptionBudgetStatus, _Mapping]] = ...) -> None: ...

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PodLogRequest(_message.Message):
    __slots__ = ("namespace", "name", "container", "follow", "previous", "tailLines", "timestamps", "limitBytes", "sinceSeconds", "sinceTime")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    TAILLINES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    LIMITBYTES_FIELD_NUMBER: _ClassVar[int]
    SINCESECONDS_FIELD_NUMBER: _ClassVar[int]
    SINCETIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    container: str
    follow: bool
    previous: bool
    tailLines: int
    timestamps: bool
    limitBytes: int
    sinceSeconds: int
    sinceTime: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., container: _Optional[str] = ..., follow: _Optional[bool] = ..., previous: _Optional[bool] = ..., tailLines: _Optional[int] = ..., timestamps: _Optional[bool] = ..., limitBytes: _Optional[int] = ..., sinceSeconds: _Optional[int] = ..., sinceTime: _Optional[str] = ...) -> None: ...

class PodLogChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

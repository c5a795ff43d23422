from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceAttributes(_message.Message):
    __slots__ = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SUBRESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., verb: _Optional[str] = ..., group: _Optional[str] = ..., version: _Optional[str] = ..., resource: _Optional[str] = ..., subresource: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class NonResourceAttributes(_message.Message):
    __slots__ = ("path", "verb")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    path: str
    verb: str
    def __init__(self, path: _Optional[str] = ..., verb: _Optional[str] = ...) -> None: ...

class ExtraValue(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, items: _Optional[_Iterable[str]] = ...) -> None: ...

class SubjectAccessReviewSpec(_message.Message):
    __slots__ = ("resourceAttributes", "nonResourceAttributes", "user", "groups", "extra", "uid")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ExtraValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ExtraValue, _Mapping]] = ...) -> None: ...
    RESOURCEATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    NONRESOURCEATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    resourceAttributes: ResourceAttributes
    nonResourceAttributes: NonResourceAttributes
    user: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    extra: _containers.MessageMap[str, ExtraValue]
    uid: str
    def __init__(self, resourceAttributes: _Optional[_Union[ResourceAttributes, _Mapping]] = ..., nonResourceAttributes: _Optional[_Union[NonResourceAttributes, _Mapping]] = ..., user: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., extra: _Optional[_Mapping[str, ExtraValue]] = ..., uid: _Optional[str] = ...) -> None: ...

class SubjectAccessReviewStatus(_message.Message):
    __slots__ = ("allowed", "reason")
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    reason: str
    def __init__(self, allowed: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class SubjectAccessReview(_message.Message):
    __slots__ = ("spec", "status")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    spec: SubjectAccessReviewSpec
    status: SubjectAccessReviewStatus
    def __init__(self, spec: _Optional[_Union[SubjectAccessReviewSpec, _Mapping]] = ..., status: _Optional[_Union[SubjectAccessReviewStatus, _Mapping]] = ...) -> None: ...

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

class JobSpec(_message.Message):
    __slots__ = ("parallelism", "completions", "activeDeadlineSeconds", "selector", "manualSelector", "template", "backoffLimit", "ttlSecondsAfterFinished", "completionMode", "suspend")
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    ACTIVEDEADLINESECONDS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MANUALSELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    BACKOFFLIMIT_FIELD_NUMBER: _ClassVar[int]
    TTLSECONDSAFTERFINISHED_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONMODE_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_FIELD_NUMBER: _ClassVar[int]
    parallelism: int
    completions: int
    activeDeadlineSeconds: int
    selector: _meta_pb2.LabelSelector
    manualSelector: bool
    template: _core_pb2.PodTemplateSpec
    backoffLimit: int
    ttlSecondsAfterFinished: int
    completionMode: str
    suspend: bool
    def __init__(self, parallelism: _Optional[int] = ..., completions: _Optional[int] = ..., activeDeadlineSeconds: _Optional[int] = ..., selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., manualSelector: _Optional[bool] = ..., template: _Optional[_Union[_core_pb2.PodTemplateSpec, _Mapping]] = ..., backoffLimit: _Optional[int] = ..., ttlSecondsAfterFinished: _Optional[int] = ..., completionMode: _Optional[str] = ..., suspend: _Optional[bool] = ...) -> None: ...

class JobCondition(_message.Message):
    __slots__ = ("type", "status", "lastProbeTime", "lastTransitionTime", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LASTPROBETIME_FIELD_NUMBER: _ClassVar[int]
    LASTTRANSITIONTIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    lastProbeTime: _timestamp_pb2.Timestamp
    lastTransitionTime: _timestamp_pb2.Timestamp
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., lastProbeTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lastTransitionTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("conditions", "startTime", "completionTime", "active", "succeeded", "failed", "ready", "terminating")
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    STARTTIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONTIME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_FIELD_NUMBER: _ClassVar[int]
    conditions: _containers.RepeatedCompositeFieldContainer[JobCondition]
    startTime: _timestamp_pb2.Timestamp
    completionTime: _timestamp_pb2.Timestamp
    active: int
    succeeded: int
    failed: int
    ready: int
    terminating: int
    def __init__(self, conditions: _Optional[_Iterable[_Union[JobCondition, _Mapping]]] = ..., startTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completionTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., ready: _Optional[int] = ..., terminating: _Optional[int] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("metadata", "spec", "status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    spec: JobSpec
    status: JobStatus
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., status: _Optional[_Union[JobStatus, _Mapping]] = ...) -> None: ...

class JobTemplateSpec(_message.Message):
    __slots__ = ("metadata", "spec")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    spec: JobSpec
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ...) -> None: ...

class CronJobSpec(_message.Message):
    __slots__ = ("schedule", "startingDeadlineSeconds", "concurrencyPolicy", "suspend", "jobTemplate", "successfulJobsHistoryLimit", "failedJobsHistoryLimit", "timeZone")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    STARTINGDEADLINESECONDS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCYPOLICY_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_FIELD_NUMBER: _ClassVar[int]
    JOBTEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SUCCESSFULJOBSHISTORYLIMIT_FIELD_NUMBER: _ClassVar[int]
    FAILEDJOBSHISTORYLIMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    schedule: str
    startingDeadlineSeconds: int
    concurrencyPolicy: str
    suspend: bool
    jobTemplate: JobTemplateSpec
    successfulJobsHistoryLimit: int
    failedJobsHistoryLimit: int
    timeZone: str
    def __init__(self, schedule: _Optional[str] = ..., startingDeadlineSeconds: _Optional[int] = ..., concurrencyPolicy: _Optional[str] = ..., suspend: _Optional[bool] = ..., jobTemplate: _Optional[_Union[JobTemplateSpec, _Mapping]] = ..., successfulJobsHistoryLimit: _Optional[int] = ..., failedJobsHistoryLimit: _Optional[int] = ..., timeZone: _Optional[str] = ...) -> None: ...

class CronJobStatus(_message.Message):
    __slots__ = ("active", "lastScheduleTime", "lastSuccessfulTime")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    LASTSCHEDULETIME_FIELD_NUMBER: _ClassVar[int]
    LASTSUCCESSFULTIME_FIELD_NUMBER: _ClassVar[int]
    active: _containers.RepeatedCompositeFieldContainer[_meta_pb2.ObjectReference]
    lastScheduleTime: _timestamp_pb2.Timestamp
    lastSuccessfulTime: _timestamp_pb2.Timestamp
    def __init__(self, active: _Optional[_Iterable[_Union[_meta_pb2.ObjectReference, _Mapping]]] = ..., lastScheduleTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lastSuccessfulTime: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CronJob(_message.Message):
    __slots__ = ("metadata", "spec", "status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    spec: CronJobSpec
    status: CronJobStatus
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[CronJobSpec, _Mapping]] = ..., status: _Optional[_Union[CronJobStatus, _Mapping]] = ...) -> None: ...

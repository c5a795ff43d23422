"""Audit logging (upstream's k8s.io/apiserver/pkg/audit and its WithAudit filter): every
request the policy does not leave out gives `audit.k8s.io/v1` Events — RequestReceived
when it is known who asks what, ResponseStarted when a long-running one starts to answer,
ResponseComplete when it is answered — with who (user, groups, source IP, user agent),
what (verb, URI, the object's reference), the answer's status and, by level, the request's
and the response's objects; the authorization decision and admission's audit annotations
ride along. Both front ends go through it (the request pipeline)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.audit.log import AuditLog
from apiserver.audit.policy import DEFAULT_POLICY, Policy, load_policy, parse_policy
from apiserver.audit.webhook import AuditWebhook
from apiserver.auth.authentication import UserInfo
from apiserver.endpoints.request import RequestInfo

__all__ = ["Auditor", "AuditRecord", "AuditLog", "AuditSink", "Policy", "load_policy", "parse_policy",
           "DEFAULT_POLICY"]


class AuditSink(Protocol):
    """A backend events are written to (the log, the webhook): it must not block."""

    def write(self, event: dict[str, Any]) -> None: ...


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _user(user: UserInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {key: list(values) for key, values in user.extra}
    return out


def _object_ref(info: RequestInfo) -> dict[str, str] | None:
    if not info.resource_request:
        return None
    ref = {"resource": info.resource, "namespace": info.namespace, "name": info.name, "apiGroup": info.group,
           "apiVersion": info.version, "subresource": info.subresource}
    return {k: v for k, v in ref.items() if v}


@dataclass
class AuditRecord:
    """One request's events: the fields they share, and what the front end adds."""

    log: AuditSink
    level: str
    omit: frozenset[str]
    event: dict[str, Any]
    omit_managed_fields: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    request_object: Any = None
    response_object: Any = None
    _started: bool = False

    @property
    def wants_request(self) -> bool:
        return self.level in ("Request", "RequestResponse")

    @property
    def wants_response(self) -> bool:
        return self.level == "RequestResponse"

    def _emit(self, stage: str, status: dict[str, Any] | None = None) -> None:
        if stage in self.omit:
            return
        event = {**self.event, "stage": stage}
        if status is not None:
            event["responseStatus"] = status
        if self.request_object is not None and self.wants_request:
            event["requestObject"] = self._recorded(self.request_object)
        if self.response_object is not None and self.wants_response and stage == "ResponseComplete":
            event["responseObject"] = self._recorded(self.response_object)
        event["requestReceivedTimestamp"] = self.event["requestReceivedTimestamp"]
        event["stageTimestamp"] = _now()
        if self.annotations:
            event["annotations"] = dict(self.annotations)
        self.log.write(event)

    def _recorded(self, obj: Any) -> Any:
        """An object as the event records it: without managed fields when the policy says
        so (a list's items too)."""
        if not self.omit_managed_fields or not isinstance(obj, dict):
            return obj
        out = {**obj}
        metadata = out.get("metadata")
        if isinstance(metadata, dict) and "managedFields" in metadata:
            out["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
        if isinstance(out.get("items"), list):
            out["items"] = [self._recorded(item) for item in out["items"]]
        return out

    def received(self) -> None:
        self._emit("RequestReceived")

    def started(self, code: int = 200) -> None:
        """A long-running request (a watch, a stream) starts answering."""
        if not self._started:
            self._started = True
            self._emit("ResponseStarted", {"metadata": {}, "code": code})

    @property
    def unnamed_create(self) -> bool:
        """A create whose URL names nothing: the object made names it (objectRef.name)."""
        ref = self.event.get("objectRef")
        return ref is not None and self.event["verb"] == "create" and "name" not in ref

    def named(self, name: str) -> None:
        if name and "objectRef" in self.event:
            self.event["objectRef"]["name"] = name

    def completed(self, code: int, failure: dict[str, Any] | None = None) -> None:
        status: dict[str, Any] = {"metadata": {}, **(failure or {}), "code": code}
        self._emit("ResponseComplete", status)


class Auditor:
    def __init__(self, policy: Policy, sinks: list[AuditSink]) -> None:
        self.policy = policy
        self.sinks = sinks

    def write(self, event: dict[str, Any]) -> None:
        for sink in self.sinks:
            sink.write(event)

    async def start(self) -> None:
        for sink in self.sinks:
            if isinstance(sink, AuditWebhook):
                await sink.start()

    async def stop(self) -> None:
        for sink in self.sinks:
            if isinstance(sink, AuditWebhook):
                await sink.stop()
            elif isinstance(sink, AuditLog):
                sink.close()

    def begin(self, user: UserInfo, info: RequestInfo, *, uri: str, source_ip: str,
              user_agent: str) -> AuditRecord | None:
        """The request's record (None: the policy leaves it out), its RequestReceived event
        written."""
        rule = self.policy.rule_for(user, info)
        if rule is None or rule.level == "None":
            return None
        level, omit = rule.level, frozenset(self.policy.omit_stages) | frozenset(rule.omit_stages)
        event: dict[str, Any] = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": level,
                                 "auditID": str(uuid.uuid4()), "stage": "", "requestURI": uri, "verb": info.verb,
                                 "user": _user(user), "sourceIPs": [source_ip] if source_ip else [],
                                 "userAgent": user_agent, "requestReceivedTimestamp": _now()}
        ref = _object_ref(info)
        if ref is not None:
            event["objectRef"] = ref
        record = AuditRecord(self, level, omit, event, self.policy.omits_managed_fields(rule))
        record.received()
        return record

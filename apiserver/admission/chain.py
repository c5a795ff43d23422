"""Admission: what runs after a write is authorized and validated, before it is stored,
as upstream's admission chain (k8s.io/apiserver/pkg/admission). A plugin sees who
writes, the operation, and the new and stored objects, and refuses with Forbidden.

Writes the apiserver makes itself (bootstrap, finalizers, IPAM) carry no user and are
not admitted: upstream's loopback client is `system:masters`, which the plugins here
let through anyway.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apiserver.auth.authentication import UserInfo, current_user
from kubeling import errors
from kubeling.scheme import ResourceType

__all__ = ["AdmissionAttributes", "AdmissionPlugin", "MutatingPlugin", "Admission", "forbidden", "EVERY_RESOURCE",
           "add_warning", "request_warnings", "audit_annotations", "add_audit_annotation"]

CREATE, UPDATE, DELETE, CONNECT = "CREATE", "UPDATE", "DELETE", "CONNECT"


class _Every(frozenset[str]):
    """The `resources` of a plugin that sees every resource (webhooks, policies)."""

    def __contains__(self, item: object) -> bool:
        return True


EVERY_RESOURCE: frozenset[str] = _Every()

# What admission tells the client besides its verdict (upstream's warning.AddWarning, the
# `Warning` headers) and the audit log (annotations), per request: the front end sets a
# fresh list for each request and reads it when it answers.
request_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("request_warnings",
                                                                                     default=None)
audit_annotations: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("audit_annotations",
                                                                                          default=None)


def add_audit_annotation(key: str, value: str) -> None:
    """An annotation on this request's audit events (none when it is not audited)."""
    annotations = audit_annotations.get()
    if annotations is not None:
        annotations[key] = value


def add_warning(text: str) -> None:
    warnings = request_warnings.get()
    if warnings is not None and text not in warnings:
        warnings.append(text)


@dataclass(frozen=True)
class AdmissionAttributes:
    """One write, as upstream's admission.Attributes."""

    user: UserInfo
    operation: str  # CREATE, UPDATE, DELETE
    resource: str  # plural
    subresource: str  # "", "status" or "token"
    namespace: str
    name: str
    obj: Any | None  # the object to store (None on DELETE)
    old: Any | None  # the stored object (None on CREATE)
    dry_run: bool = False
    kind: ResourceType[Any] | None = None  # the scheme entry written through
    # CONNECT (pods/exec, attach, portforward): the options' kind (PodExecOptions, ...); obj
    # is then the options as JSON, not a stored object
    options_kind: str = ""


class AdmissionPlugin(Protocol):
    resources: frozenset[str]

    async def validate(self, attrs: AdmissionAttributes) -> None:
        """Return to admit; raise an ApiError (Forbidden) to refuse."""


class MutatingPlugin(Protocol):
    resources: frozenset[str]

    async def mutate(self, attrs: AdmissionAttributes) -> bool | None:
        """Change attrs.obj (a new object, before validation), or raise to refuse; True:
        the change came from outside (a webhook's patch) and is to be defaulted again."""


def forbidden(attrs: AdmissionAttributes, group_resource: str, reason: str) -> errors.Forbidden:
    """Upstream's admission.NewForbidden: `pods "p" is forbidden: <reason>`."""
    name = f' "{attrs.name}"' if attrs.name else ""
    plural, _, group = group_resource.partition(".")
    return errors.Forbidden(f"{group_resource}{name} is forbidden: {reason}",
                            metadata={"name": attrs.name, "group": group, "resource": plural})


@dataclass(frozen=True)
class Admission:
    """The chain one resource's registry runs (only the plugins that handle it), mutating
    plugins before the object is validated, validating ones after (upstream's order)."""

    plugins: Sequence[AdmissionPlugin]
    mutating: Sequence[MutatingPlugin] = ()
    kind: ResourceType[Any] | None = None

    def _attributes(self, operation: str, resource: str, obj: Any | None, old: Any | None,
                    subresource: str, dry_run: bool) -> AdmissionAttributes | None:
        user = current_user.get()
        if user is None:
            return None  # the apiserver's own write
        meta = (obj if obj is not None else old).metadata  # type: ignore[union-attr]
        return AdmissionAttributes(user, operation, resource, subresource, meta.namespace, meta.name, obj, old,
                                   dry_run, self.kind)

    async def mutate(self, operation: str, resource: str, obj: Any | None, old: Any | None = None, *,
                     subresource: str = "", dry_run: bool = False) -> bool:
        """Whether an extension (a webhook) changed the object: it is to be defaulted again."""
        attrs = self._attributes(operation, resource, obj, old, subresource, dry_run)
        patched = False
        if attrs is not None:
            for plugin in self.mutating:
                patched = await plugin.mutate(attrs) is True or patched
        return patched

    async def admit(self, operation: str, resource: str, obj: Any | None, old: Any | None, *,
                    subresource: str = "", dry_run: bool = False) -> None:
        attrs = self._attributes(operation, resource, obj, old, subresource, dry_run)
        if attrs is not None:
            for plugin in self.plugins:
                await plugin.validate(attrs)

    async def connect(self, resource: str, subresource: str, namespace: str, name: str, options_kind: str,
                      options: dict[str, Any]) -> None:
        """A CONNECT (pods/exec, attach, portforward): what admits connections is asked
        (webhooks and policies; upstream's built-in plugins have nothing to say of them)."""
        user = current_user.get()
        if user is None:
            return
        attrs = AdmissionAttributes(user, CONNECT, resource, subresource, namespace, name, options, None, False,
                                    self.kind, options_kind)
        for plugin in self.plugins:
            if getattr(plugin, "admits_connect", False):
                await plugin.validate(attrs)

    def for_resource(self, kind: ResourceType[Any]) -> Admission | None:
        plugins = [p for p in self.plugins if kind.plural in p.resources]
        mutating = [p for p in self.mutating if kind.plural in p.resources]
        return Admission(plugins, mutating, kind) if plugins or mutating else None

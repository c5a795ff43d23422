"""Admission: what runs after a write is authorized and validated, before it is stored,
as upstream's admission chain (k8s.io/apiserver/pkg/admission). A plugin sees who
writes, the operation, and the new and stored objects, and refuses with Forbidden.

Writes the apiserver makes itself (bootstrap, finalizers, IPAM) carry no user and are
not admitted: upstream's loopback client is `system:masters`, which the plugins here
let through anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apiserver.auth.authentication import UserInfo, current_user
from kubeling import errors

__all__ = ["AdmissionAttributes", "AdmissionPlugin", "MutatingPlugin", "Admission", "forbidden"]

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"


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


class AdmissionPlugin(Protocol):
    resources: frozenset[str]

    async def validate(self, attrs: AdmissionAttributes) -> None:
        """Return to admit; raise an ApiError (Forbidden) to refuse."""


class MutatingPlugin(Protocol):
    resources: frozenset[str]

    async def mutate(self, attrs: AdmissionAttributes) -> None:
        """Change attrs.obj (a new object, before validation), or raise to refuse."""


def forbidden(attrs: AdmissionAttributes, group_resource: str, reason: str) -> errors.Forbidden:
    """Upstream's admission.NewForbidden: `pods "p" is forbidden: <reason>`."""
    name = f' "{attrs.name}"' if attrs.name else ""
    return errors.Forbidden(f"{group_resource}{name} is forbidden: {reason}")


@dataclass(frozen=True)
class Admission:
    """The chain one resource's registry runs (only the plugins that handle it)."""

    plugins: Sequence[AdmissionPlugin]
    mutating: Sequence[MutatingPlugin] = ()

    @staticmethod
    def _attributes(operation: str, resource: str, obj: Any | None, old: Any | None,
                    subresource: str) -> AdmissionAttributes | None:
        user = current_user.get()
        if user is None:
            return None  # the apiserver's own write
        meta = (obj if obj is not None else old).metadata  # type: ignore[union-attr]
        return AdmissionAttributes(user, operation, resource, subresource, meta.namespace, meta.name, obj, old)

    async def mutate(self, operation: str, resource: str, obj: Any) -> None:
        attrs = self._attributes(operation, resource, obj, None, "")
        if attrs is not None:
            for plugin in self.mutating:
                await plugin.mutate(attrs)

    async def admit(self, operation: str, resource: str, obj: Any | None, old: Any | None, *,
                    subresource: str = "") -> None:
        attrs = self._attributes(operation, resource, obj, old, subresource)
        if attrs is not None:
            for plugin in self.plugins:
                await plugin.validate(attrs)

    def for_resource(self, resource: str) -> Admission | None:
        plugins = [p for p in self.plugins if resource in p.resources]
        mutating = [p for p in self.mutating if resource in p.resources]
        return Admission(plugins, mutating) if plugins or mutating else None

"""What differs between resources: names, defaults, validation, field labels, deletion.

The generic registry (`registry.store`) does storage, preconditions and watches; a
Strategy subclass per resource (pods.py, nodes.py, ...) says what is special about it,
as upstream's `rest.RESTCreateStrategy` / `RESTUpdateStrategy` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from apiserver.validation import Checker
from kubeling import errors, names
from kubeling.errors import FieldViolation
from kubeling.scheme import ObjectT as T
from kubeling.scheme import ResourceType
from kubeling.timestamps import now

__all__ = ["Strategy", "DeletePlan", "T", "now", "timestamp"]


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


@dataclass(frozen=True, slots=True)
class DeletePlan:
    """How a delete proceeds: at once, or by setting deletionTimestamp (grace seconds)."""

    graceful: bool
    grace_seconds: int = 0


class Strategy(Generic[T]):
    """A resource's behaviour. What the resource is (names, scope, messages, subresources)
    is its scheme entry, `resource`: a subclass names it, or one is given (the same
    behaviour for an entry registered at run time)."""

    resource: ClassVar[ResourceType[Any]]
    # The field whose exact-match selectors index watchers (upstream's "trigger" funcs).
    index_field: ClassVar[str | None] = None
    # False: reads and watches go to etcd, nothing is kept in memory (upstream's
    # UndecoratedStorage, for resources written far more often than they are watched).
    watch_cache: ClassVar[bool] = True
    # The controller manager's garbage collector follows it (all but what it ignores, as
    # upstream's): a delete's propagationPolicy Orphan or Foreground leaves a finalizer for
    # it (elsewhere the policy is moot).
    garbage_collected: ClassVar[bool] = True
    # A second version's field labels that its storage version names otherwise (upstream's
    # field label conversion functions): view label -> stored label.
    field_label_conversions: ClassVar[dict[str, str]] = {}
    # Its etcd keys: <prefix>/<storage_path>/[<namespace>/]<name> ("": the plural; upstream
    # keys custom resources and CRDs by group too: <group>/<plural>).
    storage_path: str = ""

    def __init__(self, resource: ResourceType[T] | None = None) -> None:
        if resource is not None:
            self.resource = resource  # type: ignore[misc]  # this instance's, over the class's
        entry = self.resource
        self.kind = entry.kind
        # How errors name the kind and the resource: upstream's qualified forms
        # (Deployment.apps "x" is invalid; deployments.apps "x" not found; core ones bare).
        self.qualified_kind = f"{entry.kind}.{entry.group}" if entry.group else entry.kind
        self.plural = entry.plural
        self.namespaced = entry.namespaced
        self.message: type[T] = entry.message
        self.list_message: type[Message] = entry.list_message
        self.event_message: type[Message] = entry.event_message
        self.has_status = entry.has_status
        self.storage_path = self.storage_path or (f"{entry.group}/{entry.plural}" if entry.custom else entry.plural)
        # The version objects are stored in (kept as JSON: apiVersion says which).
        self.storage_version = entry.api_version

    # True where objects stored in several versions are read as they were stored (kept as
    # JSON and converted by a webhook): see JsonCodec.
    stored_versions_vary = False

    def from_storage(self, obj: T) -> None:
        """What reading an object from etcd makes of it (custom resources: their defaults)."""

    def validate_name(self, name: str) -> list[str]:
        """metadata.name's rule (most resources: a DNS-1123 subdomain)."""
        return names.dns1123_subdomain(name)

    # ---- field labels (field selectors) ----
    def fields(self, obj: T) -> dict[str, str]:
        meta = obj.metadata
        out = {"metadata.name": meta.name}
        if self.namespaced:
            out["metadata.namespace"] = meta.namespace
        return out

    def field_labels(self) -> frozenset[str]:
        return frozenset(self.fields(self.message()).keys())

    # ---- decoding ----
    def unknown_fields(self, obj: T) -> list[str]:
        """Fields of a decoded object its schema drops, by path (custom resources: what the
        structural schema prunes; a message has no room for unknown fields to begin with)."""
        return []

    def warnings(self) -> list[str]:
        """Warnings every request to this resource gets (a deprecated custom resource version)."""
        return []

    def printer(self) -> Any:
        """Its table columns and row function when they are its own (custom resources'
        additionalPrinterColumns); None: the front end's printer for the resource."""
        return None

    # ---- create / update ----
    def prepare_for_create(self, obj: T) -> None:
        """Clear what a client may not set on create (status defaults, ...)."""

    def default(self, obj: T) -> None:
        """Fill defaults, as upstream's SetDefaults_*."""

    def validate(self, obj: T, check: Checker) -> None:
        """Add a violation per invalid field of a new or updated object."""

    def prepare_for_update(self, new: T, old: T) -> None:
        """A normal update may not change status: keep the stored one."""
        if self.has_status:
            # by field name: the registry is the same for every resource, not all have status
            stored: Any = old
            new_with_status: Any = new
            new_with_status.status.CopyFrom(stored.status)

    def prepare_for_status_update(self, new: T, old: T) -> None:
        """A status update changes status only: everything else is the stored object's."""
        written: Any = new
        kept = type(written.status)()
        kept.CopyFrom(written.status)
        new.CopyFrom(old)
        written.status.CopyFrom(kept)

    def validate_update(self, new: T, old: T, check: Checker) -> None:
        """Extra rules for updates (immutable fields)."""

    def validate_create(self, obj: T, check: Checker) -> None:
        """Extra rules for creates only."""

    def prepare_for_ephemeral_update(self, new: T, old: T) -> None:
        """pods/ephemeralcontainers: only that list of the new object counts (pods only)."""
        raise errors.BadRequest(f"{self.plural} have no ephemeral containers")

    def validate_ephemeral_update(self, new: T, old: T, check: Checker) -> None:
        """Rules for a pods/ephemeralcontainers write."""

    def prepare_for_resize(self, new: T, old: T) -> None:
        """pods/resize: only the containers' resources of the new object count (pods only)."""
        raise errors.BadRequest(f"{self.plural} cannot be resized")

    def prepare_for_finalize(self, new: T, old: T) -> None:
        """namespaces/finalize: only spec.finalizers of the new object counts (namespaces only)."""
        raise errors.BadRequest(f"{self.plural} have no finalize subresource")

    def validate_resize(self, new: T, old: T, check: Checker) -> None:
        """Rules for a pods/resize write."""

    def validate_status(self, new: T, check: Checker) -> None:
        """Rules for a status update."""

    def validate_status_update(self, new: T, old: T, check: Checker) -> None:
        """Rules for a status update that compare it with the stored object."""

    def prepare_for_approval(self, new: T, old: T) -> None:
        """certificatesigningrequests/approval: only the conditions of the new object count."""
        raise errors.BadRequest(f"{self.plural} have no approval subresource")

    def validate_approval(self, new: T, old: T, check: Checker) -> None:
        """Rules for an approval write."""

    def spec_changed(self, new: T, old: T) -> bool:
        """Whether metadata.generation must be bumped."""
        if not hasattr(new, "spec"):
            return False
        changed: Any = new
        stored: Any = old
        spec, old_spec = changed.spec, stored.spec
        return bool(spec.SerializeToString(deterministic=True) != old_spec.SerializeToString(deterministic=True))

    # ---- delete ----
    def delete_plan(self, obj: T, grace_seconds: int | None) -> DeletePlan:
        """Immediate unless the resource says otherwise (pods bound to a node are graceful)."""
        return DeletePlan(False)

    def mark_deleting(self, obj: T) -> None:
        """Called when deletionTimestamp is set (namespaces turn Terminating)."""

    def finalized(self, obj: T) -> bool:
        """Whether resource-specific finalization is done (namespaces: spec.finalizers empty)."""
        return True

    def violations(self, obj: T) -> list[FieldViolation]:
        check = Checker()
        self.validate(obj, check)
        return check.violations

"""Namespaces (cluster-scoped): deletion is two-phase, as upstream.

Deleting a namespace marks it Terminating (deletionTimestamp); the namespace
finalizer (`apiserver.controllers.namespace_finalizer`) empties it and then removes it.
"""

from __future__ import annotations

from apiserver.registry.generic.strategy import DeletePlan, Strategy
from apiserver.validation import Checker
from kubeling import errors, names, scheme
from protos.kubeling.v1 import core_pb2

__all__ = ["NamespaceStrategy", "FINALIZER", "SYSTEM_NAMESPACES"]

FINALIZER = "kubernetes"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


NAME_LABEL = "kubernetes.io/metadata.name"


class NamespaceStrategy(Strategy[core_pb2.Namespace]):
    resource = scheme.NAMESPACES

    def validate_name(self, name: str) -> list[str]:
        return names.dns1123_label(name)

    def fields(self, obj: core_pb2.Namespace) -> dict[str, str]:
        out = super().fields(obj)
        out["status.phase"] = obj.status.phase
        return out

    def default(self, obj: core_pb2.Namespace) -> None:
        # The immutable name label upstream sets, so that selectors can pick namespaces by name.
        obj.metadata.labels[NAME_LABEL] = obj.metadata.name

    def prepare_for_create(self, obj: core_pb2.Namespace) -> None:
        obj.status.Clear()
        obj.status.phase = "Active"
        if FINALIZER not in obj.spec.finalizers:
            obj.spec.finalizers.append(FINALIZER)

    def prepare_for_update(self, new: core_pb2.Namespace, old: core_pb2.Namespace) -> None:
        super().prepare_for_update(new, old)
        # spec.finalizers change only through the finalize step, as upstream's /finalize.
        new.spec.CopyFrom(old.spec)

    def prepare_for_finalize(self, new: core_pb2.Namespace, old: core_pb2.Namespace) -> None:
        """namespaces/finalize (upstream's finalizeUpdateStrategy): the stored namespace with
        the new spec.finalizers; a terminating namespace left without any is removed."""
        finalizers = list(new.spec.finalizers)
        new.CopyFrom(old)
        new.spec.ClearField("finalizers")
        new.spec.finalizers.extend(finalizers)

    def validate(self, obj: core_pb2.Namespace, check: Checker) -> None:
        for i, f in enumerate(obj.spec.finalizers):
            check.name(f"spec.finalizers[{i}]", f, names.qualified_name)

    def validate_status(self, new: core_pb2.Namespace, check: Checker) -> None:
        check.unsupported("status.phase", new.status.phase, ("Active", "Terminating"))

    def delete_plan(self, obj: core_pb2.Namespace, grace_seconds: int | None) -> DeletePlan:
        if obj.metadata.name in SYSTEM_NAMESPACES:
            raise errors.Forbidden(f'namespaces "{obj.metadata.name}" is forbidden: this namespace may not be deleted')
        return DeletePlan(False)

    def mark_deleting(self, obj: core_pb2.Namespace) -> None:
        obj.status.phase = "Terminating"

    def finalized(self, obj: core_pb2.Namespace) -> bool:
        return not obj.spec.finalizers

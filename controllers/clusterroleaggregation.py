"""The clusterrole-aggregation controller, as upstream's pkg/controller/clusterroleaggregation:
a ClusterRole with an aggregationRule is given the rules of the ClusterRoles its selectors
match (`kubeling.rbacaggregation`), rewritten whenever any ClusterRole changes, so a role
labelled `rbac.authorization.k8s.io/aggregate-to-edit: "true"` is part of edit (and,
through edit, of admin) within a sync."""

from __future__ import annotations

import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.rbacaggregation import aggregated_rules
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import rbac_pb2

__all__ = ["ClusterRoleAggregationController"]

log = logging.getLogger(__name__)


class ClusterRoleAggregationController:
    def __init__(self, client: Client, clusterroles: Informer[rbac_pb2.ClusterRole], workers: int = 1) -> None:
        self.client = client
        self.clusterroles = clusterroles
        self.queue = WorkQueue("clusterrole-aggregation")
        self.workers = Workers(self.queue, self.sync, workers)
        clusterroles.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                 on_delete=self._changed)

    def _changed(self, _role: rbac_pb2.ClusterRole) -> None:
        # any role may be selected by any aggregated one: judge every aggregated role again
        for role in self.clusterroles.store.list():
            if role.HasField("aggregationRule"):
                self.queue.add(role.metadata.name)

    async def sync(self, name: str) -> None:
        role = self.clusterroles.store.get(name)
        if role is None or not role.HasField("aggregationRule"):
            return
        rules = aggregated_rules(role, self.clusterroles.store.list())
        if list(role.rules) == rules:
            return
        updated = rbac_pb2.ClusterRole()
        updated.CopyFrom(role)
        del updated.rules[:]
        updated.rules.extend(rules)
        try:
            await self.client.clusterroles.update(updated)
        except errors.NotFound:
            return
        log.info("clusterrole %s: %d rules aggregated", name, len(rules))

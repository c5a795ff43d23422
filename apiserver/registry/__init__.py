"""Resource registries: the generic store plus one Strategy per resource."""

from __future__ import annotations

from typing import Any

from apiserver.registry.apps import DeploymentStrategy, ReplicaSetStrategy
from apiserver.registry.configmaps import ConfigMapStrategy, SecretStrategy
from apiserver.registry.events import EventStrategy
from apiserver.registry.jobs import JobStrategy
from apiserver.registry.leases import LeaseStrategy
from apiserver.registry.namespaces import NamespaceStrategy
from apiserver.registry.nodes import NodeStrategy
from apiserver.registry.pods import PodStrategy
from apiserver.registry.policy import PodDisruptionBudgetStrategy
from apiserver.registry.rbac import ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy
from apiserver.registry.scheduling import PriorityClassStrategy
from apiserver.registry.serviceaccounts import ServiceAccountStrategy
from apiserver.registry.services import EndpointSliceStrategy, EndpointsStrategy, ServiceStrategy
from apiserver.registry.strategy import DeletePlan, Strategy

__all__ = ["Strategy", "DeletePlan", "PodStrategy", "NodeStrategy", "NamespaceStrategy",
           "EventStrategy", "LeaseStrategy", "RoleStrategy", "ClusterRoleStrategy", "RoleBindingStrategy",
           "ClusterRoleBindingStrategy", "ServiceAccountStrategy", "ConfigMapStrategy", "SecretStrategy",
           "ReplicaSetStrategy", "DeploymentStrategy", "JobStrategy", "PriorityClassStrategy",
           "PodDisruptionBudgetStrategy", "ServiceStrategy", "EndpointsStrategy", "EndpointSliceStrategy",
           "ALL_STRATEGIES"]

ALL_STRATEGIES: tuple[type[Strategy[Any]], ...] = (
    NamespaceStrategy, NodeStrategy, PodStrategy, EventStrategy, LeaseStrategy,
    RoleStrategy, ClusterRoleStrategy, RoleBindingStrategy, ClusterRoleBindingStrategy, ServiceAccountStrategy,
    ConfigMapStrategy, SecretStrategy, ReplicaSetStrategy, DeploymentStrategy, JobStrategy, PriorityClassStrategy,
    PodDisruptionBudgetStrategy, ServiceStrategy, EndpointsStrategy, EndpointSliceStrategy)

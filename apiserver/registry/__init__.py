"""Resource registries: the generic store plus one Strategy per resource."""

from __future__ import annotations

from typing import Any

from apiserver.registry.apps import DeploymentStrategy, ReplicaSetStrategy
from apiserver.registry.batch import JobStrategy
from apiserver.registry.coordination import LeaseStrategy
from apiserver.registry.core.configmaps import ConfigMapStrategy, SecretStrategy
from apiserver.registry.core.events import EventStrategy
from apiserver.registry.core.namespaces import NamespaceStrategy
from apiserver.registry.core.nodes import NodeStrategy
from apiserver.registry.core.pods import PodStrategy
from apiserver.registry.core.serviceaccounts import ServiceAccountStrategy
from apiserver.registry.core.services import EndpointSliceStrategy, EndpointsStrategy, ServiceStrategy
from apiserver.registry.generic.strategy import DeletePlan, Strategy
from apiserver.registry.policy import PodDisruptionBudgetStrategy
from apiserver.registry.rbac import ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy
from apiserver.registry.scheduling import PriorityClassStrategy

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

"""The core group (v1): its resources' strategies, and their subresources beside them
(pods' binding, eviction, log and streams; serviceaccounts' token; Services' allocations)."""

from __future__ import annotations

from apiserver.registry.core.configmaps import ConfigMapStrategy, SecretStrategy
from apiserver.registry.core.events import EventStrategy
from apiserver.registry.core.limitranges import LimitRangeStrategy
from apiserver.registry.core.namespaces import NamespaceStrategy
from apiserver.registry.core.nodes import NodeStrategy
from apiserver.registry.core.persistentvolumes import PersistentVolumeClaimStrategy, PersistentVolumeStrategy
from apiserver.registry.core.pods import PodStrategy
from apiserver.registry.core.podtemplates import PodTemplateStrategy
from apiserver.registry.core.replicationcontrollers import ReplicationControllerStrategy
from apiserver.registry.core.resourcequotas import ResourceQuotaStrategy
from apiserver.registry.core.serviceaccounts import ServiceAccountStrategy
from apiserver.registry.core.services import EndpointsStrategy, ServiceStrategy

__all__ = ["STRATEGIES"]

# This group's resources, for the registry's table.
STRATEGIES = (PodStrategy, NodeStrategy, NamespaceStrategy, EventStrategy, ServiceAccountStrategy, ConfigMapStrategy,
              SecretStrategy, ServiceStrategy, EndpointsStrategy, PodTemplateStrategy, PersistentVolumeStrategy,
              PersistentVolumeClaimStrategy, ReplicationControllerStrategy, ResourceQuotaStrategy, LimitRangeStrategy)

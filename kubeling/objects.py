"""The API's object types: every resource the apiserver serves is one of these generated
messages, each with `metadata` (meta.v1 ObjectMeta)."""

from __future__ import annotations

from typing import TypeVar

from protos.kubeling.v1 import (
                               apps_pb2,
                               batch_pb2,
                               coordination_pb2,
                               core_pb2,
                               discovery_pb2,
                               policy_pb2,
                               rbac_pb2,
                               scheduling_pb2,
)

__all__ = ["ApiObject", "ObjectT"]

ApiObject = (core_pb2.Pod | core_pb2.Node | core_pb2.Namespace | core_pb2.Event | coordination_pb2.Lease
             | core_pb2.ServiceAccount | core_pb2.ConfigMap | core_pb2.Secret | rbac_pb2.Role | rbac_pb2.ClusterRole
             | rbac_pb2.RoleBinding | rbac_pb2.ClusterRoleBinding | apps_pb2.ReplicaSet | apps_pb2.Deployment
             | batch_pb2.Job | scheduling_pb2.PriorityClass | policy_pb2.PodDisruptionBudget | core_pb2.Service
             | core_pb2.Endpoints | discovery_pb2.EndpointSlice)
# One resource's object type, for what is generic over resources (clients, informers, registries).
ObjectT = TypeVar("ObjectT", bound=ApiObject)

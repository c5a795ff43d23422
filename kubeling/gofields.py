"""The fields Go's JSON encoder writes even when they are empty, per message: what
upstream's types declare without `omitempty` (scalars: "", 0, false) and every
non-pointer struct (`{}`, even with omitempty). Clients that validate what they read
(the official client's models, lightkube's) require them: a Node without
`status.nodeInfo.kubeProxyVersion`, a Service without `status.loadBalancer` are refused.

Read from the json tags of k8s.io/api and k8s.io/apimachinery v0.32.9 (the minor this
server reports) for the fields kubeling's messages have, by message name. Left out: the
types whose zero value Go writes as null or as text (metav1.Time, MicroTime, Quantity,
IntOrString, ResourceList) and slices and maps without omitempty (null), which clients
read as absent. tests/unit/test_gofields.py checks that every entry names a field its
message has, and the encoder (kubeling.kjson) writes them.
"""

from __future__ import annotations

__all__ = ["ALWAYS_WRITTEN"]

# message name (in package kubeling.v1) -> its fields Go always writes
ALWAYS_WRITTEN: dict[str, tuple[str, ...]] = {
    "Binding": ("metadata", "target"),
    "ClusterRole": ("metadata",),
    "ClusterRoleBinding": ("metadata", "roleRef"),
    "Condition": ("type", "status", "reason", "message"),
    "ConfigMap": ("metadata",),
    "ConfigMapKeySelector": ("key",),
    "Container": ("name", "resources"),
    "ContainerPort": ("containerPort",),
    "ContainerStateTerminated": ("exitCode",),
    "ContainerStatus": ("name", "state", "lastState", "ready", "restartCount", "image", "imageID"),
    "DaemonEndpoint": ("Port",),
    "Deployment": ("metadata", "spec", "status"),
    "DeploymentCondition": ("type", "status"),
    "DeploymentSpec": ("template", "strategy"),
    "DownwardAPIVolumeFile": ("path",),
    "Endpoint": ("conditions",),
    "EndpointAddress": ("ip",),
    "EndpointPort": ("port",),
    "EndpointSlice": ("metadata", "addressType"),
    "Endpoints": ("metadata",),
    "EnvVar": ("name",),
    "Event": ("metadata", "involvedObject", "source", "reportingComponent", "reportingInstance"),
    "Eviction": ("metadata",),
    "ForZone": ("name",),
    "GRPCAction": ("port",),
    "HTTPHeader": ("name", "value"),
    "HostIP": ("ip",),
    "HostPathVolumeSource": ("path",),
    "Job": ("metadata", "spec", "status"),
    "JobCondition": ("type", "status"),
    "JobSpec": ("template",),
    "KeyToPath": ("key", "path"),
    "LabelSelectorRequirement": ("key", "operator"),
    "Lease": ("metadata", "spec"),
    "Namespace": ("metadata", "spec", "status"),
    "Node": ("metadata", "spec", "status"),
    "NodeAddress": ("type", "address"),
    "NodeCondition": ("type", "status"),
    "NodeDaemonEndpoints": ("kubeletEndpoint",),
    "NodeSelectorRequirement": ("key", "operator"),
    "NodeStatus": ("daemonEndpoints", "nodeInfo"),
    "NodeSystemInfo": ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
                       "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"),
    "ObjectFieldSelector": ("fieldPath",),
    "OwnerReference": ("kind", "name", "apiVersion"),
    "Pod": ("metadata", "spec", "status"),
    "PodAffinityTerm": ("topologyKey",),
    "PodCondition": ("type", "status"),
    "PodDisruptionBudget": ("metadata", "spec", "status"),
    "PodDisruptionBudgetStatus": ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"),
    "PodIP": ("ip",),
    "PodSchedulingGate": ("name",),
    "PodTemplateSpec": ("metadata", "spec"),
    "PreferredSchedulingTerm": ("weight", "preference"),
    "PriorityClass": ("metadata", "value"),
    "ReplicaSet": ("metadata", "spec", "status"),
    "ReplicaSetCondition": ("type", "status"),
    "ReplicaSetSpec": ("template",),
    "ReplicaSetStatus": ("replicas",),
    "Role": ("metadata",),
    "RoleBinding": ("metadata", "roleRef"),
    "RoleRef": ("apiGroup", "kind", "name"),
    "Scale": ("metadata", "spec", "status"),
    "ScaleStatus": ("replicas",),
    "Secret": ("metadata",),
    "SecretKeySelector": ("key",),
    "Service": ("metadata", "spec", "status"),
    "ServiceAccount": ("metadata",),
    "ServiceAccountTokenProjection": ("path",),
    "ServicePort": ("port",),
    "ServiceStatus": ("loadBalancer",),
    "Subject": ("kind", "name"),
    "Taint": ("key", "effect"),
    "TokenRequest": ("metadata", "spec", "status"),
    "TokenRequestStatus": ("token",),
    "TopologySpreadConstraint": ("maxSkew", "topologyKey", "whenUnsatisfiable"),
    "Volume": ("name",),
    "VolumeMount": ("name", "mountPath"),
    "WeightedPodAffinityTerm": ("weight", "podAffinityTerm"),
}

"""Defaulting and validation of the strategies, without a server."""

from __future__ import annotations

from apiserver.registry.core.nodes import NodeStrategy
from apiserver.registry.core.pods import PodStrategy
from apiserver.validation import Checker
from kubeling import names
from protos.kubeling.v1 import core_pb2
from tests.objects import node, pod


def violations(strategy: object, obj: object) -> dict[str, str]:
    check = Checker()
    strategy.default(obj)  # type: ignore[attr-defined]
    strategy.validate(obj, check)  # type: ignore[attr-defined]
    return {v.field: v.description for v in check.violations}


def test_pod_defaults() -> None:
    p = pod("a")
    p.spec.containers[0].resources.limits["memory"] = "1Gi"
    p.spec.containers[0].ports.add(containerPort=80)
    p.spec.containers[0].livenessProbe.httpGet.port.intVal = 80
    p.spec.tolerations.add(key="k", value="v", effect="NoSchedule")
    strategy = PodStrategy()
    strategy.default(p)
    c = p.spec.containers[0]
    assert p.spec.restartPolicy == "Always" and p.spec.schedulerName == "default-scheduler"
    assert p.spec.terminationGracePeriodSeconds == 30
    # priority and preemptionPolicy are the Priority admission plugin's, as upstream
    assert not p.spec.HasField("priority") and not p.spec.HasField("preemptionPolicy")
    assert c.resources.requests["memory"] == "1Gi"  # requests default to limits
    assert c.ports[0].protocol == "TCP"
    assert c.imagePullPolicy == "Always"  # untagged image
    assert (c.livenessProbe.periodSeconds, c.livenessProbe.timeoutSeconds, c.livenessProbe.failureThreshold,
            c.livenessProbe.httpGet.path) == (10, 1, 3, "/")
    assert p.spec.tolerations[0].operator == "Equal"
    tagged = pod("b", image="busybox:1.35")
    strategy.default(tagged)
    assert tagged.spec.containers[0].imagePullPolicy == "IfNotPresent"


def test_pod_validation_names_each_field() -> None:
    p = pod("a")
    p.spec.containers[0].name = "Main"
    p.spec.containers.add(name="main2", image="x", resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
    p.spec.containers[0].ports.add(containerPort=70000, name="TOO_LONG_PORT_NAME_X")
    p.spec.containers[0].env.add(name="1BAD")
    p.spec.tolerations.add(operator="Exists", value="x")
    p.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.add(
        matchExpressions=[core_pb2.NodeSelectorRequirement(key="zone", operator="In")])
    p.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.add()
    p.spec.topologySpreadConstraints.add(maxSkew=0, whenUnsatisfiable="Maybe")
    p.spec.containers[0].readinessProbe.periodSeconds = 5  # no handler
    got = violations(PodStrategy(), p)
    for field in ["spec.containers[0].name", "spec.containers[0].ports[0].containerPort",
                  "spec.containers[0].ports[0].name", "spec.containers[0].env[0].name",
                  "spec.containers[1].resources.requests", "spec.tolerations[0].operator",
                  "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
                  "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                  "spec.topologySpreadConstraints[0].maxSkew", "spec.topologySpreadConstraints[0].topologyKey",
                  "spec.topologySpreadConstraints[0].whenUnsatisfiable", "spec.containers[0].readinessProbe"]:
        assert field in got, field
    assert "must be less than or equal to cpu limit" in got["spec.containers[1].resources.requests"]


def test_valid_pod_has_no_violations_and_is_canonicalized() -> None:
    p = pod("a", cpu="0.5")
    p.spec.containers[0].resources.limits["memory"] = "0.5Gi"
    assert violations(PodStrategy(), p) == {}
    assert p.spec.containers[0].resources.requests["cpu"] == "500m"
    assert p.spec.containers[0].resources.limits["memory"] == "512Mi"


def test_pod_needs_containers() -> None:
    p = core_pb2.Pod(metadata={"name": "x"})
    assert "spec.containers" in violations(PodStrategy(), p)


def test_node_validation_and_canonical_capacity() -> None:
    n = node("n1")
    n.status.capacity["cpu"] = "4000m"
    n.spec.taints.add(key="dedicated", value="gpu", effect="NoSchedule")
    assert violations(NodeStrategy(), n) == {}
    assert n.status.capacity["cpu"] == "4"
    bad = node("n2")
    bad.spec.podCIDR = "10.0.0.1/24"  # host bits set
    bad.spec.taints.add(key="k", effect="Sometimes")
    bad.status.capacity["memory"] = "lots"
    got = violations(NodeStrategy(), bad)
    assert {"spec.podCIDR", "spec.taints[0].effect", "status.capacity[memory]"} <= set(got)


def test_name_rules() -> None:
    assert names.dns1123_label("web-1") == []
    assert names.dns1123_label("Web") and names.dns1123_label("a" * 64) and names.dns1123_label("-a")
    assert names.dns1123_subdomain("a.b-c.d") == [] and names.dns1123_subdomain("a..b")
    assert names.qualified_name("example.com/Name_1") == [] and names.qualified_name("a/b/c")
    assert names.qualified_name("/x") and names.qualified_name("x" * 64)
    assert names.label_value("") == [] and names.label_value("-x")
    assert names.port_name("http") == [] and names.port_name("8080") and names.port_name("a--b")

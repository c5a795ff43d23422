"""A kopf operator for Greetings (crd.yaml): each Greeting gets a ConfigMap holding its
message and a Deployment of busybox pods that print it, both owned by the Greeting (so
the garbage collector removes them with it); a change of the Greeting's spec changes
them; the status says what was made.

    kopf run --standalone --namespace default examples/greeting-operator/operator.py
"""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes import client, config

GROUP, VERSION, PLURAL = "kubeling.example", "v1", "greetings"


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    config.load_kube_config()
    settings.posting.level = 30  # warnings and errors become Events; progress stays in the log


def _config_map(name: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-greeting"},
            "data": {"message": message}}


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "greeting", "greeting": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"{name}-greeter", "labels": labels},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "greeter", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                                "command": ["sh", "-c", "cat /etc/greeting/message; echo; exec sleep 3600"],
                                "volumeMounts": [{"name": "greeting", "mountPath": "/etc/greeting"}]}],
                "volumes": [{"name": "greeting", "configMap": {"name": f"{name}-greeting"}}]}}}}


# kopf passes what a handler names by keyword: spec, name, namespace, patch, body, logger, ...
@kopf.on.create(GROUP, VERSION, PLURAL)
def create(**kwargs: Any) -> None:
    spec, name, namespace, patch = kwargs["spec"], kwargs["name"], kwargs["namespace"], kwargs["patch"]
    config_map: Any = _config_map(name, spec["message"])
    deployment: Any = _deployment(name, spec.get("replicas", 1))
    kopf.adopt(config_map)  # ownerReferences to the Greeting: collected with it
    kopf.adopt(deployment)
    client.CoreV1Api().create_namespaced_config_map(namespace, config_map)
    client.AppsV1Api().create_namespaced_deployment(namespace, deployment)
    patch.status.update(phase="Created", configMap=config_map["metadata"]["name"],
                        deployment=deployment["metadata"]["name"], message=spec["message"],
                        replicas=spec.get("replicas", 1))


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def update(**kwargs: Any) -> None:
    spec, name, namespace, patch = kwargs["spec"], kwargs["name"], kwargs["namespace"], kwargs["patch"]
    client.CoreV1Api().patch_namespaced_config_map(f"{name}-greeting", namespace,
                                                   {"data": {"message": spec["message"]}})
    client.AppsV1Api().patch_namespaced_deployment(f"{name}-greeter", namespace,
                                                   {"spec": {"replicas": spec.get("replicas", 1)}})
    patch.status.update(phase="Updated", message=spec["message"], replicas=spec.get("replicas", 1))

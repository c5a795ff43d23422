"""Admission extensions and impersonation in a running cluster: a webhook server (TLS, its
own CA) behind a Service with no selector and an EndpointSlice of the host's address,
reached by the apiserver on the Service's ClusterIP through kube-proxy's rules, its
certificate verified for `<service>.<namespace>.svc`, as kube-apiserver does; pods made
with `kubectl run` mutated and validated by it; and `kubectl --as`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.admissionwebhook import AdmissionWebhookServer, webhook_config
from tests.e2e.conftest import Cluster, ServiceNetwork
from tests.e2e.kubectl import Kubectl
from tests.wait import until


@pytest.fixture
async def webhook(service_network: ServiceNetwork, tmp_path: Path) -> AsyncIterator[AdmissionWebhookServer]:
    server = AdmissionWebhookServer(tmp_path / "webhook-pki", host=service_network.address,
                                    names=("webhook.hooks.svc",))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _service_objects(server: AdmissionWebhookServer) -> str:
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hooks"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook", "namespace": "hooks"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "webhook-1", "namespace": "hooks", "labels": {"kubernetes.io/service-name": "webhook"}},
         "addressType": "IPv4", "endpoints": [{"addresses": [server.host], "conditions": {"ready": True}}],
         "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]}])


def _via_service(server: AdmissionWebhookServer, path: str, name: str, resources: list[str]) -> dict[str, object]:
    return {"name": name, "clientConfig": {"service": {"namespace": "hooks", "name": "webhook", "path": path},
                                           "caBundle": server.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}


async def test_webhooks_behind_a_service_mutate_and_validate_kubectl_writes(
        cluster: Cluster, service_network: ServiceNetwork, kubectl: Kubectl,
        webhook: AdmissionWebhookServer) -> None:
    await kubectl("apply", "-f", "-", stdin=_service_objects(webhook))
    await kubectl("apply", "-f", "-", stdin=json.dumps(webhook_config(
        "MutatingWebhookConfiguration", "inject", [_via_service(webhook, "/mutate", "inject.example.com", ["pods"])])))
    await kubectl("apply", "-f", "-", stdin=json.dumps(webhook_config(
        "ValidatingWebhookConfiguration", "deny", [_via_service(webhook, "/deny", "deny.example.com",
                                                                 ["configmaps"])])))

    async def injected() -> dict[str, Any] | None:
        # a first pod may come before kube-proxy programmed the ClusterIP: the webhook then
        # fails closed and the create is refused; try again until it is admitted
        code, _, _ = await kubectl("run", "web", "--image=busybox", "--restart=Never", "--command", "--",
                                   "sleep", "3600", ok=False)
        if code != 0:
            return None
        return dict(json.loads((await kubectl("get", "pod", "web", "-o", "json"))[1]))
    pod = await until(injected, timeout=30, what="a pod admitted through the webhook's Service")
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert names == ["web", "sidecar"] and pod["metadata"]["labels"]["webhook"] == "mutated", pod
    assert webhook.requests("/mutate")[-1]["object"]["metadata"]["name"] == "web"
    code, _, err = await kubectl("create", "configmap", "deny-me", ok=False)
    assert code != 0 and 'admission webhook "deny.example.com" denied the request: the name is not allowed: ' \
                         "deny-me" in err, err
    await kubectl("create", "configmap", "fine")
    await kubectl("delete", "pod", "web", "--wait=false")


async def test_kubectl_as_in_a_cluster(cluster: Cluster, kubectl: Kubectl) -> None:
    """`kubectl auth can-i --as=jane` answers for jane; a ServiceAccount impersonated gets what
    RBAC gives it."""
    assert (await kubectl("auth", "can-i", "list", "pods", ok=False))[:2] == (0, "yes\n")
    assert (await kubectl("auth", "can-i", "list", "pods", "--as=jane", ok=False))[:2] == (1, "no\n")
    sa = "--as=system:serviceaccount:default:default"
    code, _, err = await kubectl("get", "pods", sa, ok=False)
    assert code != 0 and 'User "system:serviceaccount:default:default" cannot list resource "pods"' in err, err
    await kubectl("create", "rolebinding", "default-view", "--clusterrole=view",
                  "--serviceaccount=default:default")

    async def lists() -> bool:
        return (await kubectl("get", "pods", sa, ok=False))[0] == 0
    await until(lists, timeout=10, what="the ServiceAccount's binding")

"""v1 PodTemplate, added by its message, its strategy and its scheme entry alone: served
over gRPC (the service the scheme builds) and REST, in discovery and OpenAPI, and driven
by the real kubectl (upstream's conformance test "PodTemplates should run the lifecycle
of PodTemplates" in kubectl's terms)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from apiserver.server import APIServer
from kubeling import errors, scheme
from kubeling.client import Client
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.kubectl import Kubectl
from tests.objects import pod

MANIFEST = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "nginx-pod-template", "labels": {
    "podtemplate-static": "true"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
        "containers": [{"name": "nginx", "image": "busybox", "command": ["httpd", "-f"]}]}}}


async def test_podtemplates_over_grpc(rest: APIServer) -> None:
    async with Client(rest.address) as c:
        templates = c.resource(scheme.PODTEMPLATES)
        made = await templates.create(core_pb2.PodTemplate(
            metadata=meta_pb2.ObjectMeta(name="t", namespace="default"),
            template=core_pb2.PodTemplateSpec(spec=pod("x").spec)))
        # defaulted as a pod's spec is
        assert made.template.spec.restartPolicy == "Always" and made.template.spec.dnsPolicy == "ClusterFirst"
        made.metadata.labels["seen"] = "yes"
        updated = await templates.update(made)
        assert (await templates.get("t", "default")).metadata.labels["seen"] == "yes"
        page = await templates.list("default")
        assert [t.metadata.name for t in page.items] == ["t"]
        async for first in templates.watch("default", resource_version="0"):
            assert (first.type, first.object.metadata.resourceVersion) == ("ADDED", updated.metadata.resourceVersion)
            break
        with pytest.raises(errors.Invalid, match="template.spec.containers: Required value"):
            await templates.create(core_pb2.PodTemplate(metadata=meta_pb2.ObjectMeta(name="empty")))
        await templates.delete("t", "default")
        with pytest.raises(errors.NotFound, match='podtemplates "t" not found'):
            await templates.get("t", "default")


async def test_kubectl_runs_the_lifecycle_of_podtemplates(rest: APIServer, tmp_path: Path) -> None:
    kubectl = Kubectl(write_kubeconfig(tmp_path / "kubeconfig", rest.rest_address))
    _, out, _ = await kubectl("api-resources", "--api-group=", "-o", "wide")
    line = next(row for row in out.splitlines() if row.startswith("podtemplates "))
    assert line.split()[1:4] == ["v1", "true", "PodTemplate"], line
    _, out, _ = await kubectl("explain", "podtemplates.template.spec.containers")  # from /openapi/v3
    assert "FIELD: containers" in out or "FIELDS:" in out, out

    manifest = tmp_path / "podtemplate.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST))
    _, out, _ = await kubectl("create", "-f", str(manifest))  # validated against OpenAPI first
    assert out.strip() == "podtemplate/nginx-pod-template created"
    _, out, _ = await kubectl("get", "podtemplates", "-l", "podtemplate-static=true")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "CREATED", "AT"] and row.startswith("nginx-pod-template ")
    await kubectl("patch", "podtemplate", "nginx-pod-template", "--type=merge", "-p",
                  '{"metadata":{"labels":{"podtemplate":"patched"}}}')
    _, out, _ = await kubectl("get", "podtemplate", "nginx-pod-template", "-o", "json")
    got = json.loads(out)
    assert got["metadata"]["labels"] == {"podtemplate-static": "true", "podtemplate": "patched"}
    assert got["template"]["spec"]["containers"][0]["image"] == "busybox"
    await kubectl("delete", "podtemplates", "-l", "podtemplate-static=true")
    code, _, err = await kubectl("get", "podtemplate", "nginx-pod-template", ok=False)
    assert code == 1 and 'podtemplates "nginx-pod-template" not found' in err

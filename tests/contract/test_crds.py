"""CustomResourceDefinitions against their protocol: the real kubectl and the official
Python client on the REST API, the project's own client on gRPC, the apiserver on a real
etcd. Names follow the upstream conformance tests they mirror where one exists
(test/conformance/testdata/conformance.yaml, [sig-api-machinery] CustomResource*)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from apiserver.server import APIServer
from kubeling.kubeconfig import write_kubeconfig
from tests.e2e.kubectl import Kubectl
from tests.wait import until

CRONTAB_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec:
                  type: string
                image:
                  type: string
                replicas:
                  type: integer
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
"""

CRONTAB = """
apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
"""


def _kubectl(server: APIServer, tmp_path: Path) -> Kubectl:
    return Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.rest_address))


class Rest:
    """Raw HTTP against the REST API (what kubectl hides: statuses, headers, bodies)."""

    def __init__(self, server: APIServer, session: aiohttp.ClientSession) -> None:
        self.base = f"http://{server.rest_address}"
        self.session = session

    async def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                   query: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        data = None if body is None else body if isinstance(body, (str, bytes)) else json.dumps(body)
        async with self.session.request(method, self.base + path, data=data, params=query,
                                        headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
            return resp.status, parsed, resp.headers


@pytest.fixture
async def http(rest: APIServer) -> Any:
    async with aiohttp.ClientSession() as session:
        yield Rest(rest, session)


async def _established(http: Rest, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        code, crd, _ = await http.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = {c["type"]: c for c in (crd.get("status") or {}).get("conditions", [])} if code == 200 else {}
        return crd if conditions.get("Established", {}).get("status") == "True" else None
    return await until(check, timeout=20, what=f"{name} Established")


async def test_kubectl_crontab_from_the_documentation(rest: APIServer, http: Rest, tmp_path: Path) -> None:
    """The task "Extend the Kubernetes API with CustomResourceDefinitions", step by step."""
    kubectl = _kubectl(rest, tmp_path)
    (tmp_path / "crd.yaml").write_text(CRONTAB_CRD)
    _, out, _ = await kubectl("apply", "-f", str(tmp_path / "crd.yaml"))
    assert "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created" in out
    crd = await _established(http, "crontabs.stable.example.com")
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert crd["status"]["acceptedNames"]["kind"] == "CronTab"
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["spec"]["names"]["listKind"] == "CronTabList"
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]

    (tmp_path / "ct.yaml").write_text(CRONTAB)
    _, out, _ = await kubectl("apply", "-f", str(tmp_path / "ct.yaml"))
    assert "crontab.stable.example.com/my-new-cron-object created" in out
    _, out, _ = await kubectl("get", "crontab")
    assert out.split()[:4] == ["NAME", "AGE", "my-new-cron-object", out.split()[3]]
    _, out, _ = await kubectl("get", "ct", "-o", "yaml")
    got = yaml.safe_load(out)["items"][0]
    assert got["apiVersion"] == "stable.example.com/v1" and got["kind"] == "CronTab"
    assert got["spec"] == {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}
    assert got["metadata"]["generation"] == 1 and got["metadata"]["uid"]

    _, out, _ = await kubectl("api-resources", "--api-group=stable.example.com")
    assert "crontabs" in out and "ct" in out and "CronTab" in out

    # etcd holds the object as JSON under upstream's key
    kv, _ = await rest.registries[next(r for r in rest.scheme if r.plural == "crontabs")].storage.get(
        f"{rest.config.etcd_prefix}/stable.example.com/crontabs/default/my-new-cron-object".encode())
    assert kv is not None and json.loads(kv.value)["kind"] == "CronTab"

    _, out, _ = await kubectl("delete", "-f", str(tmp_path / "crd.yaml"))
    await until(lambda: http.call("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs"),
                timeout=20, what="crontabs no longer served",
                check=lambda answer: answer[0] == 404)
    code, _, _ = await http.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                        "crontabs.stable.example.com")
    assert code == 404
    # the custom resource went with its definition
    kv, _ = await rest.registries[next(iter(rest.registries))].storage.get(
        f"{rest.config.etcd_prefix}/stable.example.com/crontabs/default/my-new-cron-object".encode())
    assert kv is None
    await asyncio.sleep(0)

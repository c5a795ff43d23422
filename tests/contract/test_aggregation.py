"""API aggregation against its protocol: the sample extension apiserver
(examples/sample-apiserver, a process) registered with an APIService on a TLS, RBAC
apiserver on a real etcd, used with the real kubectl. Mirrors what upstream's
[sig-api-machinery] Aggregator conformance tests check with their sample-apiserver."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import pki
from kubeling.client import TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl
from tests.wait import until

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-apiserver" / "server.py"
TOKENS = "secret-jane,jane,uid-jane\n"


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str, tmp_path: Path,
                  unused_tcp_port: int) -> AsyncIterator[tuple[APIServer, Path, int]]:
    root = tmp_path / "pki"
    pki.ensure(root, {}, ["api.wardle.svc"])
    (root / "tokens.csv").write_text(TOKENS)
    server = APIServer(apiserver_config(
        etcd, prefix, rest_listen="127.0.0.1:0", tls_cert_file=str(root / "apiserver.crt"),
        tls_private_key_file=str(root / "apiserver.key"), client_ca_file=str(root / "ca.crt"),
        token_auth_file=str(root / "tokens.csv"), authorization_mode="Node,RBAC",
        proxy_client_cert_file=str(root / "front-proxy-client.crt"),
        proxy_client_key_file=str(root / "front-proxy-client.key"),
        requestheader_client_ca_file=str(root / "front-proxy-ca.crt"), enable_aggregator_routing=True))
    await server.start()
    sample = subprocess.Popen([sys.executable, str(SAMPLE), "--listen", f"127.0.0.1:{unused_tcp_port}",
                               "--tls-cert-file", str(root / "apiserver.crt"),
                               "--tls-private-key-file", str(root / "apiserver.key"),
                               "--requestheader-client-ca-file", str(root / "front-proxy-ca.crt")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield server, root, unused_tcp_port
    finally:
        sample.terminate()
        sample.wait(10)
        await server.stop(grace=0)


def _kubectl(server: APIServer, root: Path, tmp_path: Path, who: str) -> Kubectl:
    tls = TLSConfig.from_files(root / "ca.crt", root / "admin.crt", root / "admin.key") if who == "admin" else \
        TLSConfig.from_files(root / "ca.crt", None, None, f"secret-{who}")
    (tmp_path / who).mkdir(exist_ok=True)
    return Kubectl(write_kubeconfig(tmp_path / who / "config", server.rest_address, tls=tls))


def _manifests(root: Path, port: int) -> str:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wardle"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "wardle"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "api-1", "namespace": "wardle", "labels": {"kubernetes.io/service-name": "api"}},
         "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1alpha1.wardle.example.com"},
         "spec": {"group": "wardle.example.com", "version": "v1alpha1", "groupPriorityMinimum": 2000,
                  "versionPriority": 200, "service": {"namespace": "wardle", "name": "api", "port": 443},
                  "caBundle": base64.b64encode((root / "ca.crt").read_bytes()).decode()}}]
    return yaml.safe_dump_all(docs)  # a stream, not a List: kubectl validates a List with OpenAPI v2


async def _available(admin: Kubectl, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        code, out, _ = await admin("get", "apiservice", name, "-o", "json", ok=False)
        if code != 0:
            return None
        found = json.loads(out)
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions", [])}
        return found if conditions.get("Available", {}).get("status") == "True" else None
    result: dict[str, Any] = await until(check, timeout=30, what=f"APIService {name} Available")
    return result


async def test_aggregator_supports_the_sample_apiserver(cluster: tuple[APIServer, Path, int], tmp_path: Path) -> None:
    """aggregator-supports-the-sample-apiserver: an extension apiserver behind an APIService
    is served through the apiserver: kubectl creates, lists and reads its objects, the user
    reaches it in the front proxy's headers, RBAC is the main apiserver's, discovery merged."""
    server, root, port = cluster
    admin, jane = _kubectl(server, root, tmp_path, "admin"), _kubectl(server, root, tmp_path, "jane")
    await admin("apply", "-f", "-", stdin=_manifests(root, port))
    await _available(admin, "v1alpha1.wardle.example.com")
    flunder = {"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
               "metadata": {"name": "rest-flunder", "namespace": "default"}, "spec": {"size": 3}}

    async def created() -> bool:  # kubectl's discovery cache may lag the APIService by a moment
        return (await admin("create", "-f", "-", stdin=json.dumps(flunder), ok=False))[0] == 0
    await until(created, timeout=20, what="the flunder created through the aggregator")
    code, out, _ = await admin("get", "flunders")
    assert out.split()[:3] == ["NAME", "AGE", "rest-flunder"], out
    await admin("label", "flunder", "rest-flunder", "tier=gold")  # a merge patch, through the proxy
    got = json.loads((await admin("get", "flunder", "rest-flunder", "-o", "json"))[1])
    assert got["metadata"]["annotations"]["wardle.example.com/created-by"] == "kubernetes-admin"
    assert got["metadata"]["labels"] == {"tier": "gold"}
    code, _, err = await jane("get", "flunders", ok=False)
    assert code != 0 and 'User "jane" cannot list resource "flunders" in API group "wardle.example.com" in the ' \
        'namespace "default"' in err, err
    resources = (await admin("api-resources", "--api-group=wardle.example.com", "-o", "name"))[1].split()
    assert resources == ["flunders.wardle.example.com"], resources
    groups = json.loads((await admin("get", "--raw", "/apis"))[1])
    assert "wardle.example.com" in [g["name"] for g in groups["groups"]]
    local = json.loads((await admin("get", "apiservice", "v1.apps", "-o", "json"))[1])
    assert local["spec"].get("service") is None and local["status"]["conditions"][0]["reason"] == "Local"
    table = (await admin("get", "apiservice", "v1alpha1.wardle.example.com"))[1]
    assert table.split()[:7] == ["NAME", "SERVICE", "AVAILABLE", "AGE", "v1alpha1.wardle.example.com",
                                 "wardle/api", "True"], table
    await admin("delete", "flunder", "rest-flunder")


async def test_an_apiservice_whose_server_is_gone_is_unavailable(cluster: tuple[APIServer, Path, int],
                                                                 tmp_path: Path) -> None:
    """Aggregator should manage the lifecycle of an APIService: Available follows the
    extension apiserver (its endpoints gone: MissingEndpoints), and requests fail with 503."""
    server, root, port = cluster
    admin = _kubectl(server, root, tmp_path, "admin")
    await admin("apply", "-f", "-", stdin=_manifests(root, port))
    await _available(admin, "v1alpha1.wardle.example.com")
    await admin("delete", "endpointslice", "api-1", "-n", "wardle")

    async def unavailable() -> dict[str, Any] | None:
        found = json.loads((await admin("get", "apiservice", "v1alpha1.wardle.example.com", "-o", "json"))[1])
        condition = found["status"]["conditions"][0]
        return condition if condition["status"] == "False" else None
    condition = await until(unavailable, timeout=20, what="the APIService unavailable")
    assert condition["reason"] == "MissingEndpoints", condition
    code, _, err = await admin("get", "--raw", "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
                               ok=False)
    assert code != 0 and "ServiceUnavailable" in err or "has no endpoints" in err, err
    await admin("delete", "apiservice", "v1alpha1.wardle.example.com")

"""Bootstrap tokens and what `kubeling join` does with them, against a TLS apiserver
(`--enable-bootstrap-token-auth`, `Node,RBAC`) and the controller manager on a real etcd:
a token authenticates as system:bootstrap:<id> (and not once expired, mistyped or not
for authentication); the bootstrap signer signs cluster-info with every token and drops
a deleted token's signature; the token cleaner deletes expired ones; discovery trusts
cluster-info only with the token's signature and the pinned CA; the TLS bootstrap gets
the node a client certificate (auto-approved) and a serving certificate (kubeling's
serving approval for the node network) that work."""

from __future__ import annotations

import base64
import ssl
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509

from apiserver.server import APIServer
from cluster import bootstrap
from cluster.etcd import EtcdServer
from cluster.join import JoinError, discover, join
from kubeling import bootstraptoken, dynamic, errors, pki
from kubeling.client import Client
from tests.contract.secured import secured_control_plane
from tests.wait import until

SETTINGS = {"clusterDomain": "cluster.local", "clusterDNS": ["10.96.0.10"], "rotateCertificates": True}


@dataclass
class _Cluster:
    server: APIServer
    root: Path
    admin: Client

    @property
    def ca(self) -> bytes:
        return (self.root / "ca.crt").read_bytes()

    async def whoami(self, token: str) -> tuple[int, Any]:
        context = ssl.create_default_context(cafile=str(self.root / "ca.crt"))
        async with aiohttp.ClientSession() as session, session.post(
                f"https://{self.server.rest_address}/apis/authentication.k8s.io/v1/selfsubjectreviews",
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, ssl=context,
                headers={"Authorization": f"Bearer {token}"}) as reply:
            return reply.status, await reply.json(content_type=None)


@pytest.fixture
async def cluster(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[_Cluster]:
    root = tmp_path / "pki"
    async with secured_control_plane(etcd, prefix, root, {}, apiserver={"enable_bootstrap_token_auth": True},
                                     manager={"approve_kubelet_serving_certificates": "127.0.0.0/8"}) \
            as (server, admin):
        await bootstrap.install(admin, bootstrap.cluster_info_kubeconfig(
            (root / "ca.crt").read_bytes(), server.rest_address, server.address), SETTINGS)
        yield _Cluster(server, root, admin)


async def _signed_for(cluster: _Cluster, token_id: str) -> bool:
    cm = await cluster.admin.configmaps.get(bootstraptoken.CLUSTER_INFO, bootstraptoken.CLUSTER_INFO_NAMESPACE)
    return bootstraptoken.JWS_PREFIX + token_id in cm.data


async def test_a_token_authenticates_as_a_bootstrapper_until_it_may_not(cluster: _Cluster) -> None:
    token = await bootstrap.create_token(cluster.admin, description="for the test")
    code, review = await cluster.whoami(token)
    info = review["status"]["userInfo"]
    assert code == 201 and info["username"] == f"system:bootstrap:{token[:6]}", review
    assert info["groups"] == ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                              "system:authenticated"]
    assert (await cluster.whoami(token[:7] + "x" * 16))[0] == 401, "the right id, a wrong secret"
    assert (await cluster.whoami("zzzzzz.0123456789abcdef"))[0] == 401, "no such token"
    expired = await bootstrap.create_token(cluster.admin, ttl=0)
    secret = await cluster.admin.secrets.get(bootstraptoken.SECRET_PREFIX + expired[:6], "kube-system")
    secret.data["expiration"] = b"2020-01-01T00:00:00Z"
    await cluster.admin.secrets.update(secret)
    assert (await cluster.whoami(expired))[0] == 401, "expired"
    signing_only = await bootstrap.create_token(cluster.admin)
    secret = await cluster.admin.secrets.get(bootstraptoken.SECRET_PREFIX + signing_only[:6], "kube-system")
    secret.data["usage-bootstrap-authentication"] = b"false"
    await cluster.admin.secrets.update(secret)
    assert (await cluster.whoami(signing_only))[0] == 401, "not for authentication"
    listed = {t.token_id: t for t in await bootstrap.list_tokens(cluster.admin)}
    assert listed[token[:6]].description == "for the test" and listed[token[:6]].usages == \
        "authentication,signing"


async def test_the_signer_signs_cluster_info_and_the_cleaner_deletes_expired_tokens(cluster: _Cluster) -> None:
    token = await bootstrap.create_token(cluster.admin)
    await until(lambda: _signed_for(cluster, token[:6]), "cluster-info signed with the new token")
    cm = await cluster.admin.configmaps.get(bootstraptoken.CLUSTER_INFO, bootstraptoken.CLUSTER_INFO_NAMESPACE)
    assert bootstraptoken.signature_valid(cm.data[bootstraptoken.JWS_PREFIX + token[:6]], cm.data["kubeconfig"],
                                          token[:6], token[7:])
    await bootstrap.delete_token(cluster.admin, token)

    async def unsigned() -> bool:
        return not await _signed_for(cluster, token[:6])
    await until(unsigned, "the deleted token's signature removed")

    short = await bootstrap.create_token(cluster.admin, ttl=2)

    async def cleaned() -> bool:
        try:
            await cluster.admin.secrets.get(bootstraptoken.SECRET_PREFIX + short[:6], "kube-system")
            return False
        except errors.NotFound:
            return True
    await until(cleaned, "the expired token deleted by the token cleaner", timeout=20)


async def test_discovery_trusts_only_a_signed_cluster_info_with_the_pinned_ca(cluster: _Cluster) -> None:
    token = await bootstrap.create_token(cluster.admin)
    await until(lambda: _signed_for(cluster, token[:6]), "cluster-info signed")
    pin = bootstraptoken.ca_cert_hash(cluster.ca)
    address = cluster.server.rest_address
    info = await discover(address, token, [pin], False, 10)
    assert (info.server, info.grpc, info.ca) == (address, cluster.server.address, cluster.ca)

    other_ca = pki.self_signed("not-the-cluster")[0]
    with pytest.raises(JoinError, match=f'none of the public keys "{pin}" are pinned'):
        await discover(address, token, [bootstraptoken.ca_cert_hash(other_ca)], False, 10)
    with pytest.raises(JoinError, match="failed to verify JWS signature of received cluster info object"):
        await discover(address, token[:7] + "0" * 16, [pin], False, 10)
    with pytest.raises(JoinError, match="there is no JWS signed token in the cluster-info ConfigMap. This token id "
                                        "'zzzzzz' is invalid"):
        await discover(address, "zzzzzz.0123456789abcdef", [pin], False, 1)
    assert (await discover(address, token, [], True, 10)).ca == cluster.ca, "unpinned, when asked"


async def test_the_tls_bootstrap_gives_the_node_working_certificates(cluster: _Cluster, tmp_path: Path) -> None:
    token = await bootstrap.create_token(cluster.admin)
    await until(lambda: _signed_for(cluster, token[:6]), "cluster-info signed")
    state = tmp_path / "joined"
    joined = await join(cluster.server.rest_address, token, [bootstraptoken.ca_cert_hash(cluster.ca)], False,
                        "joiner", "127.0.0.1", state, 20)
    for secret_file in ("pki/kubelet.key", "pki/kubelet-client-current.pem", "kubelet.conf"):
        assert stat.S_IMODE((state / secret_file).stat().st_mode) == 0o600, secret_file
    config = joined.kubelet_config()
    assert config.cluster_domain == "cluster.local" and config.cluster_dns == ["10.96.0.10"]
    assert config.rotate_certificates and config.node_ip == "127.0.0.1"
    serving = x509.load_pem_x509_certificate((state / "pki" / "kubelet.crt").read_bytes())
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["joiner"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # the kubeconfig is the node: it may register its Node, not read Secrets
    async with Client.from_kubeconfig(state / "kubelet.conf", timeout=10) as node:
        with pytest.raises(errors.NotFound):
            await node.nodes.get("joiner")
        with pytest.raises(errors.Forbidden):
            await node.secrets.list("kube-system")
    kubeconfig = yaml.safe_load((state / "kubelet.conf").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://{cluster.server.rest_address}"
    requests = (await cluster.admin.certificatesigningrequests.list()).items
    specs = [dynamic.content_of(r)["spec"] for r in requests]
    by_signer = {spec["signerName"]: spec["username"] for spec in specs}
    assert by_signer == {"kubernetes.io/kube-apiserver-client-kubelet": f"system:bootstrap:{token[:6]}",
                         "kubernetes.io/kubelet-serving": "system:node:joiner"}


async def test_a_serving_request_outside_the_node_network_waits_for_a_person(cluster: _Cluster,
                                                                             tmp_path: Path) -> None:
    token = await bootstrap.create_token(cluster.admin)
    await until(lambda: _signed_for(cluster, token[:6]), "cluster-info signed")
    with pytest.raises(JoinError, match="was not issued within 3s: is it approved"):
        await join(cluster.server.rest_address, token, [bootstraptoken.ca_cert_hash(cluster.ca)], False,
                   "elsewhere", "10.9.9.9", tmp_path / "joined", 3)
    pending = [r for r in (await cluster.admin.certificatesigningrequests.list()).items
               if dynamic.content_of(r)["spec"]["signerName"] == "kubernetes.io/kubelet-serving"]
    assert len(pending) == 1 and not dynamic.content_of(pending[0]).get("status", {}).get("conditions")
    assert base64.b64decode(dynamic.content_of(pending[0])["spec"]["request"]).startswith(b"-----BEGIN CERTIFICATE REQ")


@pytest.mark.parametrize(("args", "words"), [
    (["127.0.0.1:1", "--token", "not-a-token", "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64],
     "--token: the form is [a-z0-9]{6}.[a-z0-9]{16}"),
    (["127.0.0.1:1", "--token", "abcdef.0123456789abcdef"], "--discovery-token-ca-cert-hash sha256:<64 hex digits> "
                                                            "is required"),
    (["127.0.0.1:1", "--token", "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", "md5:00"],
     "not one: md5:00"),
    (["127.0.0.1:1", "--token", "abcdef.0123456789abcdef", "--discovery-token-unsafe-skip-ca-verification",
      "--node-name", "Not_A_Name"], "--node-name 'Not_A_Name'"),
])
def test_bad_join_input_is_refused_in_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cluster", "join", *args, "--state-dir", str(tmp_path / "j")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "j").exists()


def test_an_unreachable_cluster_is_told_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cluster", "join", "127.0.0.1:1", "--token",
                           "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64,
                           "--timeout", "1", "--state-dir", str(tmp_path / "j")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("kubeling join: reading cluster-info from 127.0.0.1:1"), \
        done.stderr
    assert "Traceback" not in done.stderr

"""certificates.k8s.io/v1 CertificateSigningRequests against a TLS apiserver with
`--authorization-mode Node,RBAC` on a real etcd: upstream's conformance test ([sig-auth]
Certificates API should support CSR API operations), the requester written from the
request, upstream's validation naming each field, the approval and signing admission
checks (`approve`/`sign` on the signer), the system:masters restriction, the real kubectl
(`kubectl certificate approve|deny`, `get csr`), and the gRPC SubjectAccessReview the
approver asks."""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from apiserver.server import APIServer
from cluster.etcd import EtcdServer
from kubeling import csr, pki
from kubeling.client import Client, TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from protos.kubeling.v1 import authorization_pb2
from tests.conftest import apiserver_config
from tests.e2e.kubectl import Kubectl

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
TOKENS = "secret-jane,jane,uid-jane\n"


@dataclass
class _Api:
    server: APIServer
    root: Path
    admin: aiohttp.ClientSession
    jane: aiohttp.ClientSession

    async def call(self, who: aiohttp.ClientSession, method: str, path: str, body: Any = None,
                   content_type: str = "application/json", query: dict[str, str] | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        async with who.request(method, f"https://{self.server.rest_address}{path}", data=data, params=query,
                               headers={"Content-Type": content_type}) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


def _session(root: Path, identity: str = "", token: str = "") -> aiohttp.ClientSession:
    context = ssl.create_default_context(cafile=str(root / "ca.crt"))
    if identity:
        context.load_cert_chain(str(root / f"{identity}.crt"), str(root / f"{identity}.key"))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), headers=headers)


@pytest.fixture
async def api(etcd: EtcdServer, prefix: str, tmp_path: Path) -> AsyncIterator[_Api]:
    root = tmp_path / "pki"
    pki.ensure(root, {"node-1": ["127.0.0.1"]})
    (root / "tokens.csv").write_text(TOKENS)
    server = APIServer(apiserver_config(etcd, prefix, rest_listen="127.0.0.1:0",
                                        tls_cert_file=str(root / "apiserver.crt"),
                                        tls_private_key_file=str(root / "apiserver.key"),
                                        client_ca_file=str(root / "ca.crt"), token_auth_file=str(root / "tokens.csv"),
                                        authorization_mode="Node,RBAC"))
    await server.start()
    admin, jane = _session(root, "admin"), _session(root, token="secret-jane")
    try:
        yield _Api(server, root, admin, jane)
    finally:
        await admin.close()
        await jane.close()
        await server.stop(grace=0)


def _request(common: str = "e2e.example.com", orgs: tuple[str, ...] = (), dns: tuple[str, ...] = ()) -> str:
    pem, _ = csr.make_request(common, orgs, dns_names=dns)
    return base64.b64encode(pem).decode()


def _csr(signer: str, *, name: str = "", generate: bool = False, request: str = "", **spec: Any) -> dict[str, Any]:
    meta = {"generateName": "e2e-example-csr-"} if generate else {"name": name}
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": meta,
            "spec": {"request": request or _request(dns=("e2e.example.com",)), "signerName": signer,
                     "usages": ["digital signature", "key encipherment", "server auth"], **spec}}


def _self_signed(common: str) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()) \
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + dt.timedelta(hours=1)) \
        .sign(key, hashes.SHA256())
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


async def test_csr_api_operations(api: _Api) -> None:
    """[sig-auth] Certificates API [Privileged:ClusterAdmin] should support CSR API operations."""
    admin = api.admin
    code, groups = await api.call(admin, "GET", "/apis")
    assert code == 200 and any(g["name"] == "certificates.k8s.io" and any(v["version"] == "v1" for v in g["versions"])
                               for g in groups["groups"])
    code, group = await api.call(admin, "GET", "/apis/certificates.k8s.io")
    assert code == 200 and [v["version"] for v in group["versions"]] == ["v1"]
    code, resources = await api.call(admin, "GET", "/apis/certificates.k8s.io/v1")
    names = {r["name"] for r in resources["resources"]}
    assert {"certificatesigningrequests", "certificatesigningrequests/approval",
            "certificatesigningrequests/status"} <= names, names

    signer = "example.com/e2e-csr-api"
    template = _csr(signer, generate=True, expirationSeconds=3600)
    for _ in range(2):
        assert (await api.call(admin, "POST", CSRS, template))[0] == 201
    code, created = await api.call(admin, "POST", CSRS, template)
    assert code == 201, created
    name = created["metadata"]["name"]
    code, got = await api.call(admin, "GET", f"{CSRS}/{name}")
    assert got["metadata"]["uid"] == created["metadata"]["uid"] and got["spec"]["expirationSeconds"] == 3600
    code, listed = await api.call(admin, "GET", CSRS, query={"fieldSelector": f"spec.signerName={signer}"})
    assert code == 200 and len(listed["items"]) == 3

    merge = "application/merge-patch+json"
    code, patched = await api.call(admin, "PATCH", f"{CSRS}/{name}", {"metadata": {"annotations": {"patched": "true"}}},
                                   merge)
    assert code == 200 and patched["metadata"]["annotations"]["patched"] == "true"
    patched["metadata"]["annotations"]["updated"] = "true"
    code, updated = await api.call(admin, "PUT", f"{CSRS}/{name}", patched)
    assert code == 200 and updated["metadata"]["annotations"]["updated"] == "true"
    async with admin.get(f"https://{api.server.rest_address}{CSRS}", params={
            "watch": "1", "resourceVersion": listed["metadata"]["resourceVersion"],
            "fieldSelector": f"metadata.name={name}"}) as watch:
        events = [json.loads(await watch.content.readline()) for _ in range(2)]
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]
    assert events[-1]["object"]["metadata"]["annotations"] == {"patched": "true", "updated": "true"}

    code, approval = await api.call(admin, "GET", f"{CSRS}/{name}/approval")
    assert code == 200 and approval["kind"] == "CertificateSigningRequest" and \
        approval["metadata"]["uid"] == created["metadata"]["uid"]
    code, patched = await api.call(admin, "PATCH", f"{CSRS}/{name}/approval", {
        "metadata": {"annotations": {"patchedapproval": "true"}},
        "status": {"conditions": [{"type": "ApprovalPatch", "status": "True", "reason": "e2e"}]}}, merge)
    assert code == 200, patched
    assert [c["type"] for c in patched["status"]["conditions"]] == ["ApprovalPatch"]
    assert patched["metadata"]["annotations"]["patchedapproval"] == "true"
    patched["status"]["conditions"].append({"type": "Approved", "status": "True", "reason": "E2E",
                                            "message": "Set from an e2e test"})
    code, approved = await api.call(admin, "PUT", f"{CSRS}/{name}/approval", patched)
    assert code == 200, approved
    assert [c["type"] for c in approved["status"]["conditions"]] == ["ApprovalPatch", "Approved"]
    assert approved["status"]["conditions"][1]["lastUpdateTime"]

    code, status = await api.call(admin, "GET", f"{CSRS}/{name}/status")
    assert code == 200 and status["metadata"]["uid"] == created["metadata"]["uid"]
    certificate = _self_signed("e2e.example.com")
    code, patched = await api.call(admin, "PATCH", f"{CSRS}/{name}/status", {
        "metadata": {"annotations": {"patchedstatus": "true"}}, "status": {"certificate": certificate}}, merge)
    assert code == 200, patched
    assert patched["status"]["certificate"] == certificate and patched["metadata"]["annotations"]["patchedstatus"]
    patched["status"]["conditions"].append({"type": "StatusUpdate", "status": "True", "reason": "E2E",
                                            "message": "Set from an e2e test"})
    code, updated = await api.call(admin, "PUT", f"{CSRS}/{name}/status", patched)
    assert code == 200, updated
    assert [c["type"] for c in updated["status"]["conditions"]] == ["ApprovalPatch", "Approved", "StatusUpdate"]

    assert (await api.call(admin, "DELETE", f"{CSRS}/{name}"))[0] == 200
    assert (await api.call(admin, "GET", f"{CSRS}/{name}"))[0] == 404
    code, listed = await api.call(admin, "GET", CSRS, query={"fieldSelector": f"spec.signerName={signer}"})
    assert len(listed["items"]) == 2
    code, _ = await api.call(admin, "DELETE", CSRS, query={"fieldSelector": f"spec.signerName={signer}"})
    assert code == 200
    code, listed = await api.call(admin, "GET", CSRS, query={"fieldSelector": f"spec.signerName={signer}"})
    assert listed["items"] == []


async def test_the_requester_is_who_sent_it_and_the_spec_never_changes(api: _Api) -> None:
    forged = _csr("example.com/s", name="mine", username="system:admin", groups=["system:masters"], uid="x")
    code, made = await api.call(api.jane, "POST", CSRS, forged)
    assert code == 403, "jane may not create CSRs until she is allowed"
    code, _ = await api.call(api.admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "metadata": {"name": "csr-requester"}, "rules": [{"apiGroups": ["certificates.k8s.io"],
                                                          "resources": ["certificatesigningrequests"],
                                                          "verbs": ["create", "get", "update"]}]})
    assert code == 201
    code, _ = await api.call(api.admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": "csr-requester"}, "subjects": [{"kind": "User", "name": "jane"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-requester"}})
    assert code == 201
    code, made = await api.call(api.jane, "POST", CSRS, {**forged, "status": {"conditions": [
        {"type": "Approved", "status": "True"}]}})
    assert code == 201, made
    spec = made["spec"]
    assert (spec["username"], spec["uid"]) == ("jane", "uid-jane") and "system:masters" not in spec["groups"]
    assert "system:authenticated" in spec["groups"] and "status" not in made or not made["status"].get("conditions")

    changed = {**made, "spec": {**spec, "signerName": "example.com/other", "usages": ["client auth"]}}
    code, updated = await api.call(api.jane, "PUT", f"{CSRS}/mine", changed)
    assert code == 200 and updated["spec"] == spec, "the spec never changes after create"


async def test_bad_requests_are_refused_naming_the_field(api: _Api) -> None:
    async def refused(body: dict[str, Any], field: str, words: str, path: str = CSRS, method: str = "POST") -> None:
        code, status = await api.call(api.admin, method, path, body)
        assert code == 422 and status["reason"] == "Invalid", status
        causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
        assert field in causes and words in causes[field], causes

    signer = "example.com/bad"
    not_pem = base64.b64encode(b"hello").decode()
    await refused(_csr(signer, name="a", request=not_pem), "spec.request",
                  "PEM block type must be CERTIFICATE REQUEST")
    signed = x509.load_pem_x509_csr(base64.b64decode(_request("aaaa.example.com")))
    der = signed.public_bytes(serialization.Encoding.DER).replace(b"aaaa", b"bbbb")  # the signature no longer holds
    tampered = (b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(der) +
                b"-----END CERTIFICATE REQUEST-----\n")
    await refused(_csr(signer, name="a", request=base64.b64encode(tampered).decode()), "spec.request",
                  "verification failure")
    await refused(_csr(signer, name="a", usages=[]), "spec.usages", "Required value")
    await refused(_csr(signer, name="a", usages=["server auth", "flying"]), "spec.usages[1]",
                  'Unsupported value: "flying"')
    await refused(_csr(signer, name="a", usages=["server auth", "server auth"]), "spec.usages[1]", "Duplicate value")
    await refused(_csr("no-slash", name="a"), "spec.signerName", "must be a fully qualified domain and path")
    await refused(_csr("example/x", name="a"), "spec.signerName", "at least two segments")
    await refused(_csr("kubernetes.io/legacy-unknown", name="a"), "spec.signerName", "legacy signerName")
    await refused(_csr(signer, name="a", expirationSeconds=599), "spec.expirationSeconds", "600 seconds")

    code, made = await api.call(api.admin, "POST", CSRS, _csr(signer, name="good"))
    assert code == 201, made
    both = {**made, "status": {"conditions": [{"type": "Approved", "status": "True"},
                                              {"type": "Denied", "status": "True"}]}}
    await refused(both, "status.conditions[1].type", "mutually exclusive", f"{CSRS}/good/approval", "PUT")
    false = {**made, "status": {"conditions": [{"type": "Approved", "status": "False"}]}}
    await refused(false, "status.conditions[0].status", 'Unsupported value: "False"', f"{CSRS}/good/approval", "PUT")
    sneaked = {**made, "status": {"conditions": [{"type": "Approved", "status": "True"}]}}
    code, kept = await api.call(api.admin, "PUT", f"{CSRS}/good/status", sneaked)
    assert code == 422 and 'may not add a condition of type "Approved"' in kept["message"], kept
    code, approved = await api.call(api.admin, "PUT", f"{CSRS}/good/approval", sneaked)
    assert code == 200, approved
    await refused({**approved, "status": {"conditions": []}}, "status.conditions",
                  'may not remove a condition of type "Approved"', f"{CSRS}/good/approval", "PUT")
    junk = {**approved, "status": {**approved["status"], "certificate": base64.b64encode(b"junk").decode()}}
    await refused(junk, "status.certificate", "must contain at least one CERTIFICATE PEM block",
                  f"{CSRS}/good/status", "PUT")
    issued = {**approved, "status": {**approved["status"], "certificate": _self_signed("one")}}
    code, issued = await api.call(api.admin, "PUT", f"{CSRS}/good/status", issued)
    assert code == 200, issued
    again = {**issued, "status": {**issued["status"], "certificate": _self_signed("two")}}
    await refused(again, "status.certificate", "may not modify existing certificate content",
                  f"{CSRS}/good/status", "PUT")


async def test_approving_and_signing_need_the_signers_verbs(api: _Api, tmp_path: Path) -> None:
    for kind, body in (("clusterroles", {"metadata": {"name": "csr-writer"}, "rules": [
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests",
                                                                  "certificatesigningrequests/approval",
                                                                  "certificatesigningrequests/status"],
             "verbs": ["create", "get", "update"]}]}),
            ("clusterrolebindings", {"metadata": {"name": "csr-writer"}, "subjects": [{"kind": "User", "name": "jane"}],
                                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                 "name": "csr-writer"}})):
        assert (await api.call(api.admin, "POST", f"/apis/rbac.authorization.k8s.io/v1/{kind}", body))[0] == 201
    code, made = await api.call(api.jane, "POST", CSRS, _csr("example.com/team-signer", name="j"))
    assert code == 201, made
    approve = {**made, "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "ok"}]}}
    code, status = await api.call(api.jane, "PUT", f"{CSRS}/j/approval", approve)
    assert code == 403 and status["message"] == (
        'certificatesigningrequests.certificates.k8s.io "j" is forbidden: user not permitted to approve requests '
        'with signerName "example.com/team-signer"'), status
    # the verbs on the signer, by `<domain>/*`
    for kind, body in (("clusterroles", {"metadata": {"name": "example-signer"}, "rules": [
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"],
             "verbs": ["approve"]}]}),
            ("clusterrolebindings", {"metadata": {"name": "example-signer"},
                                     "subjects": [{"kind": "User", "name": "jane"}],
                                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                 "name": "example-signer"}})):
        assert (await api.call(api.admin, "POST", f"/apis/rbac.authorization.k8s.io/v1/{kind}", body))[0] == 201
    code, approved = await api.call(api.jane, "PUT", f"{CSRS}/j/approval", approve)
    assert code == 200, approved
    signed = {**approved, "status": {**approved["status"], "certificate": _self_signed("j")}}
    code, status = await api.call(api.jane, "PUT", f"{CSRS}/j/status", signed)
    assert code == 403 and "user not permitted to sign requests with signerName" in status["message"], status

    masters = _csr(csr.KUBE_APISERVER_CLIENT, name="m", request=_request("evil", ("system:masters",)),
                   usages=["client auth"])
    code, status = await api.call(api.admin, "POST", CSRS, masters)
    assert code == 403 and "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not " \
                           "allowed" in status["message"], status


async def test_kubectl_approves_denies_and_lists_requests(api: _Api, tmp_path: Path) -> None:
    kubectl = Kubectl(write_kubeconfig(tmp_path / "config", api.server.rest_address,
                                       tls=TLSConfig.from_files(api.root / "ca.crt", api.root / "admin.crt",
                                                                api.root / "admin.key")))
    for name in ("to-approve", "to-deny"):
        await kubectl("create", "-f", "-", stdin=json.dumps(_csr("example.com/kubectl", name=name,
                                                                 expirationSeconds=7200)))
    _, out, _ = await kubectl("get", "csr")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"], out
    assert any(line.split()[0] == "to-approve" and line.split()[2:] == ["example.com/kubectl", "kubernetes-admin",
                                                                        "120m", "Pending"] for line in lines), out
    _, out, _ = await kubectl("certificate", "approve", "to-approve")
    assert "certificatesigningrequest.certificates.k8s.io/to-approve approved" in out
    _, out, _ = await kubectl("certificate", "deny", "to-deny")
    assert "certificatesigningrequest.certificates.k8s.io/to-deny denied" in out
    _, out, _ = await kubectl("get", "csr", "-o", "custom-columns=NAME:.metadata.name,CONDITION:.status.conditions[0]"
                                              ".type,REASON:.status.conditions[0].reason", "--no-headers")
    assert sorted(out.split()) == sorted(["to-approve", "Approved", "KubectlApprove", "to-deny", "Denied",
                                          "KubectlDeny"]), out
    code, _, err = await kubectl("certificate", "approve", "--force", "to-deny", ok=False)
    assert code != 0 and 'certificate signing request "to-deny" is already Denied' in err, err


async def test_the_subject_access_review_over_grpc(api: _Api) -> None:
    tls = TLSConfig.from_files(api.root / "ca.crt", api.root / "admin.crt", api.root / "admin.key")
    async with Client(api.server.address, tls=tls, timeout=10) as client:
        def review(user: str, groups: list[str], sub: str) -> authorization_pb2.SubjectAccessReview:
            r = authorization_pb2.SubjectAccessReview()
            r.spec.user, r.spec.groups[:] = user, groups
            a = r.spec.resourceAttributes
            a.group, a.resource, a.subresource = "certificates.k8s.io", "certificatesigningrequests", sub
            a.verb = "create"
            return r

        node = await client.subject_access_review(review("system:node:n1", ["system:nodes"], "selfnodeclient"))
        assert node.status.allowed, node.status
        bootstrapper = await client.subject_access_review(review("system:bootstrap:abc", ["system:bootstrappers"],
                                                                 "nodeclient"))
        assert bootstrapper.status.allowed
        nobody = await client.subject_access_review(review("jane", [], "selfnodeclient"))
        assert not nobody.status.allowed

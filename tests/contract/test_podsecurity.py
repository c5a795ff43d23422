"""The PodSecurity admission plugin over REST on a real etcd, as a user meets it: the
namespace labels choose the level per mode, enforce refuses with upstream's message,
warn answers with a Warning header (for pods and for workload templates), a bad label is
refused, and enforcing a level on a namespace warns about its pods that violate it."""

from __future__ import annotations

from typing import Any

from tests.contract.test_crds import Rest
from tests.wait import until

NS = "/api/v1/namespaces"


def _pod(name: str, **container: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox", **container}]}}


RESTRICTED_OK = {"securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                                     "capabilities": {"drop": ["ALL"]},
                                     "seccompProfile": {"type": "RuntimeDefault"}}}


async def _namespace(http: Rest, name: str, labels: dict[str, str]) -> None:
    code, body, _ = await http.call("POST", NS, {"metadata": {"name": name, "labels": labels}})
    assert code == 201, body

    async def seen() -> bool:  # admission reads the namespace from the apiserver's cache
        code, _, headers = await http.call("POST", f"{NS}/{name}/pods", _pod("probe", securityContext={
            "privileged": True}), query={"dryRun": "All"})
        return code == 403 or "Warning" in headers
    await until(seen, timeout=10, what=f"namespace {name} in force")


async def test_enforce_refuses_with_upstreams_message(http: Rest) -> None:
    await _namespace(http, "restricted", {"pod-security.kubernetes.io/enforce": "restricted"})
    code, body, _ = await http.call("POST", f"{NS}/restricted/pods", _pod("plain"))
    assert code == 403, body
    assert body["message"] == (
        'pods "plain" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or '
        'container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'), body["message"]
    code, body, _ = await http.call("POST", f"{NS}/restricted/pods", _pod("fine", **RESTRICTED_OK))
    assert code == 201, body
    # a metadata-only update of the admitted pod is not judged again; a spec change is
    code, _, _ = await http.call("PATCH", f"{NS}/restricted/pods/fine", {"metadata": {"labels": {"a": "b"}}},
                                 content_type="application/merge-patch+json")
    assert code == 200


async def test_baseline_checks_and_warnings(http: Rest) -> None:
    await _namespace(http, "baseline", {"pod-security.kubernetes.io/enforce": "baseline",
                                        "pod-security.kubernetes.io/warn": "restricted",
                                        "pod-security.kubernetes.io/warn-version": "v1.35"})
    bad = _pod("bad", securityContext={"privileged": True, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}},
               ports=[{"containerPort": 80, "hostPort": 8080}])
    bad["spec"].update(hostNetwork=True, volumes=[{"name": "host", "hostPath": {"path": "/etc"}}],
                       securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]})
    code, body, _ = await http.call("POST", f"{NS}/baseline/pods", bad)
    assert code == 403
    assert body["message"] == (
        'pods "bad" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "c" '
        'must not include "NET_ADMIN" in securityContext.capabilities.add), host namespaces (hostNetwork), hostPath '
        'volumes (volume "host"), hostPort (container "c" uses hostPort 8080), privileged (container "c" must not '
        "set securityContext.privileged=true), forbidden sysctls (kernel.msgmax)"), body["message"]
    code, body, headers = await http.call("POST", f"{NS}/baseline/pods", _pod("warned"))
    assert code == 201, body
    warning = headers["Warning"]
    assert warning.startswith('299 - "would violate PodSecurity \\"restricted:v1.35\\": allowPrivilegeEscalation '
                              '!= false'), warning
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": _pod("x", securityContext={"privileged": True})["spec"]}}}
    code, body, headers = await http.call("POST", "/apis/apps/v1/namespaces/baseline/deployments", deployment)
    assert code == 201, body  # only warned: enforce judges pods
    assert "privileged (container" in headers["Warning"], headers


async def test_namespace_labels_are_checked_and_existing_pods_named(http: Rest) -> None:
    code, body, _ = await http.call("POST", NS, {"metadata": {"name": "typo", "labels": {
        "pod-security.kubernetes.io/enforce": "restrictd"}}})
    assert code == 422 and 'Invalid value: "restrictd": must be one of privileged, baseline, restricted' in \
        body["message"], body
    code, _, _ = await http.call("POST", NS, {"metadata": {"name": "open"}})
    assert code == 201
    code, body, _ = await http.call("POST", f"{NS}/open/pods", _pod("root-pod", securityContext={"privileged": True}))
    assert code == 201, body

    async def warned() -> str:
        code, _, headers = await http.call("PATCH", f"{NS}/open", {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "baseline"}}}, content_type="application/merge-patch+json",
            query={"dryRun": "All"})
        assert code == 200
        return headers.get("Warning", "")
    warning = await until(warned, timeout=10, what="the existing pod named", check=bool)
    assert 'existing pods in namespace \\"open\\" violate the new PodSecurity enforce level \\"baseline:latest\\"' \
        in warning and "root-pod: privileged" in warning, warning

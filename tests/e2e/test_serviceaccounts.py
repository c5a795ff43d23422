"""ServiceAccounts on a secured cluster, as a user meets them: `kubectl create
serviceaccount`, pods running as one with upstream's projected token volume (token, CA,
namespace) written and kept by the kubelet, and that token used against the API from
outside the pod — forbidden until RBAC allows, allowed after, refused (401) once the pod
is gone. `kubectl create token` and `kubectl auth whoami` with such a token."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.admission.serviceaccount import API_ACCESS_PREFIX, TOKEN_MOUNT_PATH
from kubeling import errors
from kubeling.client import TLSConfig
from kubeling.kubeconfig import write_kubeconfig
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.objects import namespace
from tests.wait import until


async def _get(cluster: Cluster, token: str, path: str) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    async with aiohttp.ClientSession() as http, http.get(f"https://{cluster.apiserver.rest_address}{path}", ssl=ctx,
                                                         headers={"Authorization": f"Bearer {token}"}) as reply:
        return reply.status, await reply.text()



async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 30) -> None:
    await until(check, what, timeout)


async def test_a_pods_token_authenticates_until_the_pod_is_gone(cluster: Cluster, kubectl: Kubectl,
                                                                 tmp_path: Path) -> None:
    kubelet = await cluster.add_node(1)
    node = kubelet.config.node_name
    await kubectl("create", "serviceaccount", "reader")
    _, out, _ = await kubectl("get", "serviceaccounts")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["default", "reader"], out
    show = f"cat {TOKEN_MOUNT_PATH}/token; echo; cat {TOKEN_MOUNT_PATH}/namespace; echo; cat {TOKEN_MOUNT_PATH}/ca.crt"
    await cluster.client.pods.create(pod("app", container("main", "sh", "-c", f"{show}; sleep 3600"), node=node,
                                         serviceAccountName="reader"))
    running = await cluster.wait_pod("app", lambda p: p.status.phase == "Running")
    volume = next(v for v in running.spec.volumes if v.name.startswith(API_ACCESS_PREFIX))
    assert [m.mountPath for m in running.spec.containers[0].volumeMounts if m.name == volume.name] == \
        [TOKEN_MOUNT_PATH]

    async def logged() -> bool:
        return (await kubectl("logs", "app"))[1].count("-----END CERTIFICATE-----") == 1
    await _until(logged, "the pod to print its token")
    _, out, _ = await kubectl("logs", "app")
    token, namespace, *ca = out.splitlines()
    assert namespace == "default" and "\n".join(ca) + "\n" == (cluster.pki / "ca.crt").read_text()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == "system:serviceaccount:default:reader"
    assert claims["kubernetes.io"]["pod"] == {"name": "app", "uid": running.metadata.uid}
    assert claims["exp"] - claims["iat"] == 3607

    status, body = await _get(cluster, token, "/api/v1/namespaces/default/pods")
    assert status == 403 and 'User \\"system:serviceaccount:default:reader\\" cannot list resource \\"pods\\"' \
        in body, body
    await kubectl("create", "rolebinding", "reader-view", "--clusterrole=view", "--serviceaccount=default:reader")

    async def allowed() -> bool:
        return (await _get(cluster, token, "/api/v1/namespaces/default/pods"))[0] == 200
    await _until(allowed, "the binding to take effect")

    # `kubectl create token` (protobuf on the wire), and who such a token is.
    _, minted, _ = await kubectl("create", "token", "reader", "--duration=15m")
    assert (await _get(cluster, minted.strip(), "/api/v1/namespaces/default/pods"))[0] == 200
    as_reader = Kubectl(write_kubeconfig(tmp_path / "reader", cluster.apiserver.rest_address,
                                         tls=TLSConfig((cluster.pki / "ca.crt").read_bytes(), token=minted.strip())))
    _, whoami, _ = await as_reader("auth", "whoami", "-o", "json")
    assert json.loads(whoami)["status"]["userInfo"]["groups"] == [
        "system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    code, _, err = await kubectl("create", "token", "reader", "--duration=1m", ok=False)
    assert code != 0 and "may not specify a duration less than 10 minutes" in err, err

    await cluster.client.pods.delete("app", "default")
    await cluster.wait_gone("app")

    async def refused() -> bool:
        return (await _get(cluster, token, "/api/v1/namespaces/default/pods"))[0] == 401
    await _until(refused, "the token to die with its pod")
    assert (await _get(cluster, minted.strip(), "/api/v1/namespaces/default/pods"))[0] == 200  # not pod-bound


async def test_service_account_admission(cluster: Cluster) -> None:
    with pytest.raises(errors.Forbidden) as caught:
        await cluster.client.pods.create(pod("nobody", container("main", "true"), serviceAccountName="missing"))
    assert caught.value.message == ('pods "nobody" is forbidden: error looking up service account default/missing: '
                                    'serviceaccount "missing" not found')
    made = await cluster.client.pods.create(pod("quiet", container("main", "true"), automountServiceAccountToken=False))
    assert made.spec.serviceAccountName == "default" and not made.spec.volumes
    await cluster.client.namespaces.create(namespace("fresh"))
    # A pod right after its namespace: admission waits for the controller's `default`.
    fresh = pod("first", container("main", "true"))
    fresh.metadata.namespace = "fresh"
    made = await cluster.client.pods.create(fresh)
    assert made.spec.volumes[0].name.startswith(API_ACCESS_PREFIX)

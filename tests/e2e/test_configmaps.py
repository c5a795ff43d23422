"""ConfigMaps and Secrets with the real kubectl on a secured cluster (issue 20's first
part): created from literals (kubectl sends protobuf), read back as upstream shows them
(Secret data base64, stringData folded into data), listed, validated, and immutable ones
refused a change."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from kubeling import errors
from kubeling.client import Client
from tests.e2e.conftest import Cluster, tls_of
from tests.e2e.kubectl import Kubectl


async def test_configmaps_and_secrets_with_kubectl(kubectl: Kubectl) -> None:
    await kubectl("create", "configmap", "settings", "--from-literal=mode=fast", "--from-literal=level=3")
    _, out, _ = await kubectl("get", "configmap", "settings", "-o", "json")
    assert json.loads(out)["data"] == {"mode": "fast", "level": "3"}
    _, out, _ = await kubectl("get", "configmaps")
    assert out.split("\n")[1].split()[:2] == ["settings", "2"], out  # NAME DATA AGE

    await kubectl("create", "secret", "generic", "token", "--from-literal=password=s3cret")
    _, out, _ = await kubectl("get", "secret", "token", "-o", "json")
    secret = json.loads(out)
    assert secret["type"] == "Opaque" and base64.b64decode(secret["data"]["password"]) == b"s3cret"
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"},
                "stringData": {"user": "jane"}, "immutable": True}
    await kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    _, out, _ = await kubectl("get", "secret", "typed", "-o", "json")
    typed = json.loads(out)
    assert base64.b64decode(typed["data"]["user"]) == b"jane" and "stringData" not in typed
    manifest["stringData"] = {"user": "bob"}
    code, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(manifest), ok=False)
    assert code != 0 and "field is immutable when `immutable` is set" in err, err

    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"no/slash": "x"}}
    code, _, err = await kubectl("create", "-f", "-", stdin=json.dumps(bad), ok=False)
    assert code != 0 and "a valid config key must consist of alphanumeric characters" in err, err
    await kubectl("delete", "configmap", "settings")
    _, out, _ = await kubectl("get", "configmaps", "-o", "name")
    assert "settings" not in out


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: reader
  labels: {app: reader, tier: web}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: settings
    configMap: {name: settings}
  - name: creds
    secret: {secretName: creds, defaultMode: 0400}
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: creds, key: password}}
    envFrom:
    - prefix: CFG_
      configMapRef: {name: settings}
    volumeMounts:
    - {name: settings, mountPath: /etc/settings}
    - {name: creds, mountPath: /etc/creds, readOnly: true}
    - {name: info, mountPath: /etc/info}
"""


async def test_configmap_and_secret_volumes_and_env(cluster: Cluster, kubectl: Kubectl) -> None:
    await cluster.add_node(1, sync_frequency=1.0)  # updates reach volumes at the next sync
    await kubectl("create", "configmap", "settings", "--from-literal=mode=fast")
    await kubectl("create", "secret", "generic", "creds", "--from-literal=password=s3cret")
    await kubectl("apply", "-f", "-", stdin=POD)
    await cluster.wait_pod("reader", lambda p: p.status.phase == "Running", timeout=60)

    async def exec_(*command: str) -> str:
        _, out, _ = await kubectl("exec", "reader", "--", *command)
        return out

    assert await exec_("cat", "/etc/settings/mode") == "fast"
    assert await exec_("cat", "/etc/creds/password") == "s3cret"
    assert (await exec_("stat", "-L", "-c", "%a", "/etc/creds/password")).strip() == "400"
    assert await exec_("cat", "/etc/info/labels") == 'app="reader"\ntier="web"'
    env = dict(line.split("=", 1) for line in (await exec_("env")).splitlines() if "=" in line)
    assert env["PASSWORD"] == "s3cret" and env["CFG_mode"] == "fast"

    # An update reaches the running pod's files, swapped whole (..data), not its environment.
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                "data": {"mode": "slow", "extra": "1"}}
    await kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    deadline = asyncio.get_running_loop().time() + 30
    while (await exec_("cat", "/etc/settings/mode")) != "slow":
        assert asyncio.get_running_loop().time() < deadline, "the update did not reach the volume"
        await asyncio.sleep(0.5)
    assert await exec_("cat", "/etc/settings/extra") == "1"
    assert (await exec_("readlink", "/etc/settings/mode")).strip() == "..data/mode"
    env = dict(line.split("=", 1) for line in (await exec_("env")).splitlines() if "=" in line)
    assert env["CFG_mode"] == "fast"  # the environment is fixed when the container starts

    # A ConfigMap that does not exist: the pod waits, with upstream's FailedMount event.
    missing = POD.replace("name: reader", "name: waiting").replace("configMap: {name: settings}",
                                                                   "configMap: {name: absent}")
    await kubectl("apply", "-f", "-", stdin=missing)
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        events, _ = await cluster.client.events.list_all(field_selector="involvedObject.name=waiting")
        mount = [e for e in events if e.reason == "FailedMount"]
        if mount:
            break
        assert asyncio.get_running_loop().time() < deadline, events
        await asyncio.sleep(0.3)
    assert 'MountVolume.SetUp failed: configmap "absent" not found' in mount[0].message
    assert (await cluster.client.pods.get("waiting")).status.phase == "Pending"
    # Its kubelet may read what its pods reference, and nothing else (the Node authorizer's graph).
    node = next(iter(cluster.kubelets))
    async with Client(cluster.apiserver.address, tls=tls_of(cluster.pki, f"kubelet/{node}-client")) as kubelet:
        assert (await kubelet.secrets.get("creds", "default")).data["password"] == b"s3cret"
        await kubectl("create", "secret", "generic", "unrelated", "--from-literal=k=v")
        with pytest.raises(errors.Forbidden) as refused:
            await kubelet.secrets.get("unrelated", "default")
        assert f"no relationship found between node '{node}' and this object" in refused.value.message

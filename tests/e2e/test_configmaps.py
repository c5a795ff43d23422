"""ConfigMaps and Secrets with the real kubectl on a secured cluster (issue 20's first
part): created from literals (kubectl sends protobuf), read back as upstream shows them
(Secret data base64, stringData folded into data), listed, validated, and immutable ones
refused a change."""

from __future__ import annotations

import base64
import json

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

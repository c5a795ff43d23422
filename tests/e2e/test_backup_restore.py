"""`kubeling backup` and `kubeling restore` as an operator runs them: a cluster backed up
while it runs, changed after, brought down; its backup restored to a new state dir and
brought up there: the objects of the backup are back (a pod running again, a Secret
readable with the restored encryption key), what came after is not, a ServiceAccount
token and the old cluster's admin certificate still verify. A corrupt backup, a forged
one and a state dir that is not empty are refused, nothing made."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from cluster.plan import ClusterPlan
from kubeling.client import Client
from tests.e2e.kubectl import kubectl_binary
from tests.e2e.test_up import _pod, _wait

CIDR = f"10.{175 + os.getpid() % 4}.0.0/16"


def _kubeling(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(), *args], capture_output=True, text=True, timeout=60)


def _down(state: Path) -> None:
    plan = ClusterPlan.load(state)
    if plan is not None and (plan.supervisor_pid or plan.components):
        _kubeling("down", "--state-dir", str(state))


async def test_backup_then_restore_to_a_new_state_dir(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    prefix = f"b{os.getpid() % 1000}-"
    node = f"{prefix}1"
    archive = tmp_path / "backup" / "cluster.kbk"
    up = ["up", "--nodes", "1", "--detach", "--node-prefix", prefix, "--cluster-cidr", CIDR, "--no-registry",
          "--no-ingress"]
    try:
        started = _kubeling(*up, "--state-dir", str(first))
        assert started.returncode == 0, started.stdout + started.stderr
        kubectl = [f"--kubeconfig={first / 'kubeconfig'}", f"--cache-dir={tmp_path / 'kube-cache'}"]
        async with Client.from_kubeconfig(first / "kubeconfig") as client:
            await client.pods.create(_pod("kept", node, "sleep", "3600"))
            before = await _wait(client, "kept", lambda p: p.status.phase == "Running")
            first_container = before.status.containerStatuses[0].containerID
        for args in (["create", "secret", "generic", "s", "--from-literal=k=secret-value"],
                     ["create", "serviceaccount", "robot"]):
            made = _kubectl(*kubectl, *args)
            assert made.returncode == 0, made.stderr
        token = _kubectl(*kubectl, "create", "token", "robot", "--duration=1h")
        assert token.returncode == 0, token.stderr

        saved = _kubeling("backup", "--state-dir", str(first), str(archive))
        assert saved.returncode == 0, saved.stdout + saved.stderr
        assert archive.stat().st_mode & 0o777 == 0o600  # it holds the CA's and the encryption keys
        with tarfile.open(archive) as tar:
            held = set(tar.getnames())
        assert {"backup.json", "etcd.db", "pki/ca.key", "pki/sa.key", "encryption-config.yaml"} <= held

        async with Client.from_kubeconfig(first / "kubeconfig") as client:
            await client.pods.create(_pod("later", node, "sleep", "3600"))  # after the backup: not in it
        assert _kubeling("down", "--state-dir", str(first)).returncode == 0

        # refused, nothing made: a corrupt file, a forged one, a state dir in use
        corrupt = tmp_path / "corrupt.kbk"
        data = bytearray(archive.read_bytes())
        data[len(data) // 2: len(data) // 2 + 64] = bytes(64)
        corrupt.write_bytes(bytes(data))
        refused = _kubeling("restore", str(corrupt), "--state-dir", str(tmp_path / "from-corrupt"))
        assert refused.returncode == 1 and "kubeling restore:" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and not (tmp_path / "from-corrupt").exists()
        forged = tmp_path / "forged.kbk"
        with tarfile.open(forged, "w:gz") as tar:
            tar.add(first / "cluster.json", "backup.json")
        refused = _kubeling("restore", str(forged), "--state-dir", str(tmp_path / "from-forged"))
        assert refused.returncode == 1 and "is not a kubeling backup of format" in refused.stderr, refused.stderr
        assert not (tmp_path / "from-forged").exists()
        refused = _kubeling("restore", str(archive), "--state-dir", str(first))
        assert refused.returncode == 1 and "is not empty" in refused.stderr, refused.stderr
        assert not list(tmp_path.glob(".*restore-*"))

        restored = _kubeling("restore", str(archive), "--state-dir", str(second))
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert f"kubeling up --state-dir {second} --nodes 1" in restored.stdout
        started = _kubeling(*up, "--state-dir", str(second))
        assert started.returncode == 0, started.stdout + started.stderr
        plan = ClusterPlan.load(second)
        assert plan is not None
        async with Client.from_kubeconfig(second / "kubeconfig") as client:
            # the backup's status says Running; the restored node's kubelet runs it anew and says so
            await _wait(client, "kept", lambda p: p.status.phase == "Running" and p.status.containerStatuses[0].ready
                        and p.status.containerStatuses[0].containerID not in ("", first_container))
            names = {p.metadata.name for p in (await client.pods.list_all("default"))[0]}
            assert "later" not in names and "kept" in names
        kubectl = [f"--kubeconfig={second / 'kubeconfig'}", f"--cache-dir={tmp_path / 'kube-cache'}"]
        ran = _kubectl(*kubectl, "exec", "kept", "--", "cat", "/proc/1/cmdline")
        assert ran.returncode == 0 and ran.stdout.split("\0")[:2] == ["sleep", "3600"], ran.stderr
        secret = _kubectl(*kubectl, "get", "secret", "s", "-o", "jsonpath={.data.k}")
        assert secret.returncode == 0 and base64.b64decode(secret.stdout) == b"secret-value", secret.stderr
        # the token made before the backup, and the first cluster's admin certificate
        (tmp_path / "no-kubeconfig").write_text("")  # the token alone (not the merged context's certificate)
        whoami = _kubectl(f"--kubeconfig={tmp_path / 'no-kubeconfig'}", f"--server=https://{plan.rest}",
                          f"--certificate-authority={second / 'pki' / 'ca.crt'}",
                          f"--token={token.stdout.strip()}", "auth", "whoami", "-o", "json")
        assert whoami.returncode == 0, whoami.stderr
        assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"
        old_admin = _kubectl(f"--kubeconfig={first / 'kubeconfig'}", f"--server=https://{plan.rest}", "get", "pod",
                             "kept", "-o", "name")
        assert old_admin.returncode == 0 and old_admin.stdout.strip() == "pod/kept", old_admin.stderr
        # the restored PKI is the first cluster's: the same CA, a year ahead of its certificates
        listed = _kubeling("certs", "check-expiration", "--state-dir", str(second))
        assert listed.returncode == 0 and listed.stdout.split("\n")[1].split()[0] == "ca", listed.stderr
        assert (second / "pki" / "ca.crt").read_bytes() == (first / "pki" / "ca.crt").read_bytes()
        assert _kubeling("down", "--state-dir", str(second)).returncode == 0
    finally:
        _down(first)
        _down(second)
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout == ""

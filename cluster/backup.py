"""`kubeling backup FILE` and `kubeling restore FILE`: a cluster's state in one file, and a
new state dir made from it (what kubeadm's operators do with `etcdctl snapshot save` and a
copy of /etc/kubernetes/pki).

The file (mode 0600: it holds the CA's key, the ServiceAccount signing key and the key
Secrets are encrypted with) is a gzipped tar:

  backup.json              what it is: format, cluster name, revision, keys, when
  etcd.db                  etcd's snapshot (Debian's etcdctl `snapshot save`, with etcd's own
                           hash at its end, checked by `snapshot restore`)
  pki/...                  the cluster PKI (kubeling.pki's layout)
  encryption-config.yaml   the key Secrets are encrypted with in etcd
  audit-policy.yaml
  cluster.json             the plan the cluster was brought up with

`restore` refuses a state dir that is not empty and leaves nothing behind when it fails (a
file that is not a backup, a snapshot whose hash does not match). The restored cluster is
brought up with `kubeling up` on the new state dir: one etcd member with the snapshot's
data, the same CA (certificates and kubeconfigs of the old cluster still verify), the same
ServiceAccount key (its tokens still verify), the same encryption key. Its kubelets start
from nothing of their own and run the pods the API has bound to them; Node objects of the
backup no kubelet claims turn NotReady and their pods are evicted as with any lost node.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cluster import names
from cluster.certs import AUDIT_POLICY, ENCRYPTION_CONFIG
from cluster.plan import ClusterPlan
from kubeling.app import EXIT_CONFIG

__all__ = ["add_parsers", "backup", "restore", "BackupError", "FORMAT"]

FORMAT = "kubeling.io/backup/v1"
CONFIGS = (ENCRYPTION_CONFIG, AUDIT_POLICY)


class BackupError(Exception):
    """What went wrong, in one line for the user."""


def _etcdctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("etcdctl")
    if binary is None:
        raise BackupError("etcdctl is not installed: apt-get install etcd-client")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ETCDCTL_API": "3"})


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def backup(state_dir: Path, out: Path) -> dict[str, object]:
    """Write the cluster of state_dir to `out` (0600); what backup.json says."""
    plan = ClusterPlan.load(state_dir)
    if plan is None:
        raise BackupError(f"no cluster was made in {state_dir}")
    with tempfile.TemporaryDirectory(prefix="kubeling-backup-") as tmp:
        snapshot = Path(tmp) / "etcd.db"
        pki = plan.pki
        tls = ["--cacert", str(pki / "ca.crt"), "--cert", str(pki / "apiserver-etcd-client.crt"),
               "--key", str(pki / "apiserver-etcd-client.key")]
        endpoint = plan.etcd_endpoints.split(",")[0]
        saved = _etcdctl("--endpoints", endpoint, *tls, "--command-timeout", "60s", "snapshot", "save", str(snapshot))
        if saved.returncode != 0:
            raise BackupError(f"etcd at {endpoint} gave no snapshot (is the cluster up?): "
                              f"{_last_line(saved.stderr)}")
        status = _etcdctl("snapshot", "status", str(snapshot), "-w", "json")
        if status.returncode != 0:
            raise BackupError(f"the snapshot etcd gave cannot be read: {_last_line(status.stderr)}")
        info = json.loads(status.stdout)
        meta: dict[str, object] = {"format": FORMAT, "cluster": plan.name, "revision": info["revision"],
                                   "keys": info["totalKey"], "etcdSnapshotBytes": snapshot.stat().st_size,
                                   "nodes": plan.nodes, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
                _add_bytes(tar, "backup.json", json.dumps(meta, indent=2).encode())
                tar.add(snapshot, "etcd.db")
                tar.add(pki, "pki")
                for name in CONFIGS:
                    if (plan.root / name).exists():
                        tar.add(plan.root / name, name)
                _add_bytes(tar, "cluster.json", json.dumps(asdict(plan), indent=2).encode())
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(partial, out)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    return meta


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Regular files and directories under the archive's root, nothing else (Debian's
    Python 3.11.2 has no tarfile extraction filter)."""
    members = tar.getmembers()
    for m in members:
        path = Path(m.name)
        if path.is_absolute() or ".." in path.parts or not (m.isfile() or m.isdir()):
            raise BackupError(f"it holds {m.name!r}, which no backup holds")
    return members


def _json(work: Path, name: str, archive: Path) -> dict[str, Any]:
    try:
        found = json.loads((work / name).read_text())
    except FileNotFoundError:
        raise BackupError(f"{archive} is not a kubeling backup: it has no {name}") from None
    except (OSError, ValueError) as err:
        raise BackupError(f"{archive} is not a kubeling backup: its {name}: {err}") from None
    if not isinstance(found, dict):
        raise BackupError(f"{archive} is not a kubeling backup: its {name} is not an object")
    return found


def restore(archive: Path, state_dir: Path, name: str = "") -> dict[str, object]:
    """A new state dir from a backup; what backup.json said. `name`: the restored
    cluster's (default: the one backed up)."""
    if state_dir.exists() and (not state_dir.is_dir() or any(state_dir.iterdir())):
        raise BackupError(f"{state_dir} is not empty: restore makes a new state dir (another --state-dir or --name)")
    if not archive.is_file():
        raise BackupError(f"{archive}: no such file")
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{state_dir.name}.restore-", dir=state_dir.parent))
    try:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(work, members=_safe_members(tar))  # noqa: S202 (members checked above)
        except (tarfile.TarError, EOFError, OSError, ValueError) as err:  # zlib errors are OSError / ValueError
            raise BackupError(f"{archive} is not a kubeling backup: {err}") from None
        meta = _json(work, "backup.json", archive)
        if meta.get("format") != FORMAT:
            raise BackupError(f"{archive} is not a kubeling backup of format {FORMAT}")
        for needed in ("etcd.db", "cluster.json", "pki/ca.crt", "pki/ca.key", "pki/sa.key"):
            if not (work / needed).is_file():
                raise BackupError(f"{archive} is incomplete: no {needed}")
        plan_fields = _json(work, "cluster.json", archive)
        # etcd's own check: the hash `snapshot save` appended must match (a corrupt file
        # fails here); one member, named as `up` names a lone member, data where `up` keeps it
        restored = _etcdctl("snapshot", "restore", str(work / "etcd.db"), "--data-dir", str(work / "etcd"),
                            "--name", "kubeling", "--initial-cluster", "kubeling=http://127.0.0.1:2380",
                            "--initial-advertise-peer-urls", "http://127.0.0.1:2380")
        if restored.returncode != 0:
            raise BackupError(f"{archive}: etcd refused its snapshot: {_last_line(restored.stderr)}")
        try:
            plan = ClusterPlan(**{**plan_fields, "state_dir": str(state_dir), "etcd_more_ports": [],
                                  "supervisor_pid": 0, "ready": False, "error": "", "components": {},
                                  "user_kubeconfig": "", "name": name or plan_fields.get("name", names.DEFAULT_NAME)})
        except TypeError as err:
            raise BackupError(f"{archive}: its cluster.json is not a cluster's plan: {err}") from None
        (work / "etcd.db").unlink()
        (work / "backup.json").unlink()
        (work / "cluster.json").write_text(json.dumps(asdict(plan), indent=2))
        os.chmod(work, 0o755)  # mkdtemp's 0700; the pki's own modes came with it
        if state_dir.exists():
            state_dir.rmdir()  # empty, checked above
        os.rename(work, state_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return meta


def cmd_backup(args: argparse.Namespace) -> int:
    try:
        state_dir = names.state_dir_of(args)
        began = time.monotonic()
        meta = backup(state_dir, Path(args.file).resolve())
    except (names.ClusterNameError, BackupError) as err:
        print(f"kubeling backup: {err}", file=sys.stderr)
        return 1
    print(f"backed up cluster {meta['cluster']} ({meta['keys']} keys at revision {meta['revision']}, the PKI and "
          f"the encryption key) to {args.file} in {time.monotonic() - began:.1f} s; it holds keys: keep it private")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    try:
        state_dir = names.state_dir_of(args)
    except names.ClusterNameError as err:
        print(f"kubeling restore: {err}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        began = time.monotonic()
        meta = restore(Path(args.file).resolve(), state_dir, args.name)
    except BackupError as err:
        print(f"kubeling restore: {err}", file=sys.stderr)
        return 1
    nodes = meta.get("nodes") or []
    print(f"restored cluster {args.name or meta['cluster']} ({meta['keys']} keys at revision {meta['revision']}, "
          f"backed up {meta['created']}) into {state_dir} in {time.monotonic() - began:.1f} s; bring it up with: "
          f"kubeling up --state-dir {state_dir} --nodes {len(nodes) if isinstance(nodes, list) else 1}")
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    made = commands.add_parser("backup", help="the cluster's etcd snapshot, PKI and keys in one file (0600)")
    made.add_argument("file", help="where to write it")
    names.add_cluster_args(made)
    made.set_defaults(run=cmd_backup)
    back = commands.add_parser("restore", help="a new state dir from a backup; then `kubeling up` on it")
    back.add_argument("file", help="a file `kubeling backup` wrote")
    names.add_cluster_args(back, "; the restored cluster's name, default the one backed up")
    back.set_defaults(run=cmd_restore)

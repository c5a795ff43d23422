"""Machines joining at once (not a test): `python -m bench.csr [--requests 200]
[--concurrency 16] [--json OUT.json]`.

Brings up a control plane (`kubeling up --nodes 0 --detach`, a scratch state dir and
KUBELING_HOME of its own) and a bootstrap token (`kubeling token create`), then sends N
TLS bootstraps as `kubeling join` does them — a CertificateSigningRequest for a node's
client certificate over REST with the token, `concurrency` at a time — and times each from
its create to the certificate in its status (the approver's SubjectAccessReview, the
approval, the signature), seen by a watch. The anchor, in the same run: the same requests
signed by the cluster CA in this process alone (the signature's own cost, the floor of any
signer)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.output import report
from controllers.csrsigning import Authority
from kubeling import csr, dynamic
from kubeling.client import Client

CLUSTER_CIDR = "10.179.0.0/16"
_CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def _kubeling(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "cluster", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"kubeling {' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _bootstraps(state: Path, rest: str, token: str, requests: list[bytes], concurrency: int
                      ) -> tuple[list[float], float]:
    """(create→issued seconds per request, wall seconds for all)."""
    created: dict[str, float] = {}
    issued: dict[str, float] = {}
    done = asyncio.Event()
    async with Client.from_kubeconfig(state / "kubeconfig", timeout=30) as admin:
        start_rv = (await admin.certificatesigningrequests.list()).metadata.resourceVersion

        async def watch() -> None:
            async for ev in admin.certificatesigningrequests.watch(resource_version=start_rv):
                if (dynamic.content_of(ev.object).get("status") or {}).get("certificate"):
                    issued.setdefault(ev.object.metadata.name, time.monotonic())
                    if len(issued) == len(requests):
                        done.set()

        watching = asyncio.create_task(watch())
        context = ssl.create_default_context(cafile=str(state / "pki" / "ca.crt"))
        slots = asyncio.Semaphore(concurrency)
        began = time.monotonic()
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
            async def one(pem: bytes) -> None:
                async with slots:
                    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                            "metadata": {"generateName": "bench-"},
                            "spec": {"request": base64.b64encode(pem).decode(), "usages": [
                                "digital signature", "client auth"],
                                "signerName": csr.KUBE_APISERVER_CLIENT_KUBELET}}
                    sent = time.monotonic()
                    async with session.post(f"https://{rest}{_CSRS}", json=body, ssl=context) as reply:
                        made = await reply.json()
                        if reply.status != 201:
                            raise RuntimeError(f"create: {reply.status} {made}")
                    created[made["metadata"]["name"]] = sent
            await asyncio.gather(*(one(pem) for pem in requests))
            async with asyncio.timeout(600):
                await done.wait()
        wall = time.monotonic() - began
        watching.cancel()
    return [issued[name] - created[name] for name in created], wall


def run(count: int, concurrency: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="kubeling-bench-csr-"))
    env = {**os.environ, "KUBELING_HOME": str(scratch / "home")}
    state = scratch / "cluster"
    try:
        _kubeling(env, "up", "--nodes", "0", "--detach", "--name", "bench-csr", "--cluster-cidr", CLUSTER_CIDR,
                  "--no-registry", "--no-ingress", "--kubeconfig", str(scratch / "user-kubeconfig"),
                  "--state-dir", str(state))
        command = _kubeling(env, "token", "create", "--print-join-command", "--state-dir", str(state)).split()
        rest, token = command[2], command[4]
        requests = [csr.make_request(f"system:node:bench-{i}", [csr.NODES_GROUP])[0] for i in range(count)]
        latencies, wall = asyncio.run(_bootstraps(state, rest, token, requests, concurrency))
        # the anchor: the same requests signed here, by the same CA, nothing else
        authority = Authority.from_files(state / "pki" / "ca.crt", state / "pki" / "ca.key")
        began = time.monotonic()
        for pem in requests:
            authority.sign(csr.parse_request(pem), ["digital signature", "client auth"], 3600)
        sign_s = (time.monotonic() - began) / count
        return {"benchmark": "csr", "requests": count, "concurrency": concurrency,
                "issued_per_second": round(count / wall, 1), "wall_seconds": round(wall, 2),
                "create_to_issued_ms": {"p50": round(statistics.median(latencies) * 1000, 1),
                                        "p99": round(_percentile(latencies, 0.99) * 1000, 1),
                                        "max": round(max(latencies) * 1000, 1)},
                "anchor_parse_and_sign_ms": round(sign_s * 1000, 2),
                "issued_per_second_over_anchor": round((count / wall) * sign_s, 3)}
    finally:
        subprocess.run([sys.executable, "-m", "cluster", "down", "--state-dir", str(state)], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    report(run(args.requests, args.concurrency), args.json)


if __name__ == "__main__":
    main()

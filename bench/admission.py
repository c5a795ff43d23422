"""Admission extensions benchmark (not a test): `python -m bench.admission --json OUT.json`.

Starts etcd and the apiserver as processes and a webhook server in this process (TLS,
its own CA: tests/admissionwebhook.py), and creates ConfigMaps over REST (--concurrency
in flight, --creates per phase) in four phases of the same run:

- `none`: no webhook, no policy (the anchor);
- `webhooks_1`: one mutating webhook (a JSON patch adding a label) and one validating;
- `webhooks_3`: three of each;
- `policy_5`: a ValidatingAdmissionPolicy of five CEL validations, bound with Deny.

Reported per phase: create latency p50 and p99 (ms) and creates per second, and each
phase's p50 and p99 as a ratio to `none`'s.

And the aggregator: the sample extension apiserver (examples/sample-apiserver, a process)
registered with an APIService, --gets reads of one of its objects through the apiserver
against the same reads sent to it directly (with the front-proxy certificate and headers
the aggregator adds), in the same run: reads per second and p50 each, and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.output import report
from bench.rest import apiserver_on_etcd
from kubeling import pki
from tests.admissionwebhook import AdmissionWebhookServer, webhook_config

ROOT = Path(__file__).resolve().parents[1]

_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
_VALIDATIONS = ["object.metadata.name.size() < 100", "object.metadata.name.startsWith('cm-')",
                "!has(object.data) || object.data.size() < 50",
                "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
                "request.operation == 'CREATE'"]


async def _call(http: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    async with http.request(method, url, json=body) as r:
        if r.status >= 300:
            raise RuntimeError(f"{method} {url} answered {r.status}: {await r.text()}")
        return await r.json()


async def _creates(http: aiohttp.ClientSession, base: str, phase: str, creates: int,
                   concurrency: int) -> dict[str, float]:
    url = f"{base}/api/v1/namespaces/default/configmaps"
    prefix = f"cm-{phase.replace('_', '-')}"
    latencies: list[float] = []
    counter = iter(range(creates))

    async def worker() -> None:
        for i in counter:
            start = time.perf_counter()
            await _call(http, "POST", url, {"metadata": {"name": f"{prefix}-{i}"}, "data": {"k": "v"}})
            latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {"p50_ms": round(statistics.median(latencies) * 1000, 2),
            "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 2),
            "per_s": round(creates / elapsed, 1)}


async def _in_force(http: aiohttp.ClientSession, base: str, hooks: AdmissionWebhookServer, phase: str) -> None:
    """Wait until a write sees the phase's configuration (the apiserver's watch cache)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        before = len(hooks.reviews)
        made = await _call(http, "POST", f"{base}/api/v1/namespaces/default/configmaps",
                           {"metadata": {"generateName": f"cm-probe-{phase.replace('_', '-')}-"}})
        if phase.startswith("webhooks") and len(hooks.reviews) > before:
            return
        if phase == "policy_5" and made["metadata"]["name"]:
            async with http.post(f"{base}/api/v1/namespaces/default/configmaps",
                                 json={"metadata": {"name": "not-cm-probe"}}) as denied:
                if denied.status == 422:
                    return
        if phase == "none":
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"the {phase} configuration did not take effect")


async def _configure(http: aiohttp.ClientSession, base: str, hooks: AdmissionWebhookServer, phase: str) -> None:
    name = phase.replace("_", "-")
    if phase.startswith("webhooks"):
        count = int(phase.rpartition("_")[2])
        config = {"rules": _RULES}
        mutating = [{**config, "name": f"m{i}.bench.example.com",
                     "clientConfig": {"url": hooks.url("/mutate"), "caBundle": hooks.ca_bundle}} for i in range(count)]
        validating = [{**config, "name": f"v{i}.bench.example.com",
                       "clientConfig": {"url": hooks.url("/deny"), "caBundle": hooks.ca_bundle}} for i in range(count)]
        await _call(http, "POST", f"{base}{_ADMISSION}/mutatingwebhookconfigurations",
                    webhook_config("MutatingWebhookConfiguration", name, mutating))
        await _call(http, "POST", f"{base}{_ADMISSION}/validatingwebhookconfigurations",
                    webhook_config("ValidatingWebhookConfiguration", name, validating))
    elif phase == "policy_5":
        await _call(http, "POST", f"{base}{_ADMISSION}/validatingadmissionpolicies", {
            "metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": _RULES},
                                                  "validations": [{"expression": e} for e in _VALIDATIONS]}})
        await _call(http, "POST", f"{base}{_ADMISSION}/validatingadmissionpolicybindings", {
            "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    await _in_force(http, base, hooks, phase)


async def _unconfigure(http: aiohttp.ClientSession, base: str, phase: str) -> None:
    kinds = {"webhooks": ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"),
             "policy": ("validatingadmissionpolicybindings", "validatingadmissionpolicies")}.get(
        phase.partition("_")[0], ())
    for plural in kinds:
        await _call(http, "DELETE", f"{base}{_ADMISSION}/{plural}/{phase.replace('_', '-')}")


async def _timed(total: int, concurrency: int, call: Callable[[], Awaitable[None]]) -> dict[str, float]:
    latencies: list[float] = []
    counter = iter(range(total))

    async def worker() -> None:
        for _ in counter:
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"p50_ms": round(statistics.median(latencies) * 1000, 2), "per_s": round(total / elapsed, 1)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _aggregator(http: aiohttp.ClientSession, base: str, certs: Path, gets: int,
                      concurrency: int) -> dict[str, Any]:
    """Reads of a flunder through the aggregator and straight from the sample apiserver."""
    port = _free_port()
    sample = subprocess.Popen([sys.executable, str(ROOT / "examples" / "sample-apiserver" / "server.py"),
                               "--listen", f"127.0.0.1:{port}", "--tls-cert-file", str(certs / "apiserver.crt"),
                               "--tls-private-key-file", str(certs / "apiserver.key"),
                               "--requestheader-client-ca-file", str(certs / "front-proxy-ca.crt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await _call(http, "POST", f"{base}/api/v1/namespaces", {"metadata": {"name": "wardle"}})
        await _call(http, "POST", f"{base}/api/v1/namespaces/wardle/services", {
            "metadata": {"name": "api"}, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}})
        await _call(http, "POST", f"{base}/apis/discovery.k8s.io/v1/namespaces/wardle/endpointslices", {
            "metadata": {"name": "api-1", "labels": {"kubernetes.io/service-name": "api"}}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
        await _call(http, "POST", f"{base}/apis/apiregistration.k8s.io/v1/apiservices", {
            "metadata": {"name": "v1alpha1.wardle.example.com"}, "spec": {
                "group": "wardle.example.com", "version": "v1alpha1", "groupPriorityMinimum": 2000,
                "versionPriority": 200, "service": {"namespace": "wardle", "name": "api", "port": 443},
                "caBundle": base64.b64encode((certs / "ca.crt").read_bytes()).decode()}})
        path = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders"
        deadline = time.monotonic() + 30
        while True:
            async with http.post(f"{base}{path}", json={"metadata": {"name": "f"}, "spec": {"size": 1}}) as r:
                if r.status == 201:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the sample apiserver did not become available through the aggregator")
            await asyncio.sleep(0.1)
        direct_ssl = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        direct_ssl.load_cert_chain(certs / "front-proxy-client.crt", certs / "front-proxy-client.key")
        headers = {"X-Remote-User": "bench", "X-Remote-Group": "system:masters", "Accept": "application/json"}

        async def through() -> None:
            async with http.get(f"{base}{path}/f") as r:
                assert r.status == 200, await r.text()
                await r.read()

        async def direct() -> None:
            async with http.get(f"https://127.0.0.1:{port}{path}/f", ssl=direct_ssl, headers=headers) as r:
                assert r.status == 200, await r.text()
                await r.read()
        await _timed(min(100, gets), concurrency, through)
        await _timed(min(100, gets), concurrency, direct)
        via, straight = await _timed(gets, concurrency, through), await _timed(gets, concurrency, direct)
        return {"through_aggregator": via, "direct": straight,
                "per_s_ratio": round(via["per_s"] / straight["per_s"], 2)}
    finally:
        sample.terminate()
        sample.wait(10)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    phases = ("none", "webhooks_1", "webhooks_3", "policy_5")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kubeling-bench-admission-") as tmp:
        certs = Path(tmp) / "cluster-pki"
        pki.ensure(certs, {}, ["api.wardle.svc"])
        proxy = ["--proxy-client-cert-file", str(certs / "front-proxy-client.crt"),
                 "--proxy-client-key-file", str(certs / "front-proxy-client.key"),
                 "--requestheader-client-ca-file", str(certs / "front-proxy-ca.crt"),
                 "--enable-aggregator-routing", "true"]
        with apiserver_on_etcd("admission", proxy) as (_, _grpc, base):
            hooks = AdmissionWebhookServer(Path(tmp) / "pki")
            await hooks.start()
            try:
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency)) as http:
                    for phase in phases:
                        await _configure(http, base, hooks, phase)
                        await _creates(http, base, f"warm-{phase}", min(100, args.creates), args.concurrency)
                        results[phase] = await _creates(http, base, phase, args.creates, args.concurrency)
                        await _unconfigure(http, base, phase)
                    results["aggregator"] = await _aggregator(http, base, certs, args.gets, args.concurrency)
            finally:
                await hooks.stop()
    anchor = results["none"]
    for phase in phases[1:]:
        results[phase]["p50_ratio"] = round(results[phase]["p50_ms"] / anchor["p50_ms"], 2)
        results[phase]["p99_ratio"] = round(results[phase]["p99_ms"] / anchor["p99_ms"], 2)
    return {"benchmark": "admission", "cpus": os.cpu_count(), "creates": args.creates,
            "concurrency": args.concurrency, **results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--creates", type=int, default=1000, help="ConfigMaps created per phase")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--gets", type=int, default=2000, help="reads through the aggregator and direct")
    parser.add_argument("--json", default="", help="also write the result here")
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()

"""CustomResourceDefinitions benchmark (not a test): `python -m bench.crds --json OUT.json`.

Starts etcd and the apiserver as separate processes (as deployed) and measures, through
the REST API, a custom resource against the same work on ConfigMaps in the same run (the
anchor: a built-in resource on the same server, etcd and host):

- *_create_per_s: creates (--creates per kind over --rounds, kinds alternated, the median
  round kept), 64 in flight over 64 keep-alive connections, of ConfigMaps,
  of custom resources whose schema has no rules (`plain`), and of custom resources with
  three CEL rules (`cel`); cr_create_ratio = plain / configmap (goal >= 0.7);
- *_cpu_us_per_create: the apiserver process's CPU per create; cel_us_per_write =
  cel - plain: what validating the rules costs per write;
- *_list_ms: one list of every object of the kind (a consistent read); cr_list_ratio =
  configmap time / custom resource time;
- *_watch_events_per_s: --watchers REST watchers of the namespace while --watched objects
  are created as fast as 64 writers go: events delivered per second, over all watchers,
  until the last arrived (median of --rounds); cr_watch_ratio = custom resource / ConfigMap;
- crd_established_ms / crd_discovery_ms (median of --crds definitions): from the CRD's
  create to its Established condition, and to its resource listed in discovery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from bench.apiserver import CONCURRENCY, _cpu_seconds
from bench.output import report
from bench.rest import _timed_workers, apiserver_on_etcd

GROUP = "bench.example.com"
_SPEC = {"type": "object", "properties": {
    "size": {"type": "integer", "minimum": 0, "maximum": 1000},
    "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "red"},
    "replicas": {"type": "integer", "default": 1},
    "limit": {"type": "integer", "default": 10},
    "owner": {"type": "string", "maxLength": 63},
    "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 63}}}}
_RULES = [
    {"rule": "self.replicas <= self.limit", "message": "replicas must not exceed limit"},
    {"rule": "!has(self.owner) || self.owner.startsWith('team-')", "message": "owner must start with team-"},
    {"rule": "!has(self.tags) || self.tags.all(t, size(t) > 0)", "message": "tags must not be empty"},
]


def _definition(plural: str, kind: str, rules: bool) -> dict[str, Any]:
    spec = {**_SPEC, "x-kubernetes-validations": _RULES} if rules else _SPEC
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}}


# What each kind's object carries: the same data, as a ConfigMap's and as a spec.
_DATA = {"size": "3", "color": "green", "owner": "team-a", "tags": "a,b,c"}


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "bench"}},
            "data": _DATA}


def _custom(kind: str) -> Callable[[str], dict[str, Any]]:
    def make(name: str) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name, "labels": {"app": "bench"}},
                "spec": {"size": 3, "color": "green", "owner": "team-a", "tags": ["a", "b", "c"]}}
    return make


async def _define(http: aiohttp.ClientSession, base: str, crd: dict[str, Any]) -> tuple[float, float]:
    """Create the definition; (ms to Established, ms to the resource in discovery)."""
    start = time.perf_counter()
    async with http.post(f"{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
        if r.status != 201:
            raise RuntimeError(f"CRD create answered {r.status}: {await r.text()}")
    name, plural = crd["metadata"]["name"], crd["spec"]["names"]["plural"]
    established = discovered = 0.0
    deadline = time.monotonic() + 60
    while not (established and discovered):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not served within 60 s")
        if not established:
            async with http.get(f"{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") as r:
                conditions = (await r.json()).get("status", {}).get("conditions", [])
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                established = time.perf_counter() - start
        if not discovered:
            async with http.get(f"{base}/apis/{GROUP}/v1") as r:
                body = await r.json() if r.status == 200 else {}
            if any(res.get("name") == plural for res in body.get("resources", [])):
                discovered = time.perf_counter() - start
        await asyncio.sleep(0.005)
    return established * 1000, discovered * 1000


async def _creates(http: aiohttp.ClientSession, url: str, make: Callable[[str], dict[str, Any]], prefix: str,
                   total: int, pid: int) -> tuple[float, float]:
    async def create(i: int) -> None:
        async with http.post(url, json=make(f"{prefix}-{i}")) as r:
            if r.status != 201:
                raise RuntimeError(f"create answered {r.status}: {await r.text()}")
            await r.read()
    cpu = _cpu_seconds(pid)
    rate, _ = await _timed_workers(total, create)
    return rate, (_cpu_seconds(pid) - cpu) / total * 1e6


async def _list_ms(http: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    timings = []
    for _ in range(3):
        t = time.perf_counter()
        async with http.get(url) as r:
            body = json.loads(await r.read())
        timings.append((time.perf_counter() - t) * 1000)
    return statistics.median(timings), len(body["items"])


async def _watch_rate(http: aiohttp.ClientSession, url: str, make: Callable[[str], dict[str, Any]], prefix: str,
                      watchers: int, total: int) -> float:
    """Events per second delivered to all watchers while `total` objects are created."""
    async with http.get(url, params={"limit": "1"}) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    remaining = watchers * total
    done = asyncio.Event()
    last = 0.0

    async def watch() -> None:
        nonlocal remaining, last
        async with http.get(url, params={"watch": "1", "resourceVersion": rv},
                            timeout=aiohttp.ClientTimeout(total=None)) as r:
            async for line in r.content:
                event = json.loads(line)
                if event["type"] == "ADDED" and event["object"]["metadata"]["name"].startswith(prefix):
                    remaining -= 1
                    if remaining == 0:
                        last = time.perf_counter()
                        done.set()

    tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
    await asyncio.sleep(0.5)  # the watches open (their resourceVersion keeps the events either way)
    start = time.perf_counter()

    async def create(i: int) -> None:
        async with http.post(url, json=make(f"{prefix}-{i}")) as r:
            if r.status != 201:
                raise RuntimeError(f"create answered {r.status}: {await r.text()}")
            await r.read()
    await _timed_workers(total, create)
    try:
        async with asyncio.timeout(60):
            await done.wait()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return watchers * total / (last - start)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with apiserver_on_etcd("crds") as (proc, _, base):
        ns = f"{base}/api/v1/namespaces/default"
        custom = f"{base}/apis/{GROUP}/v1/namespaces/default"
        result: dict[str, Any] = {}
        connector = aiohttp.TCPConnector(limit=CONCURRENCY + args.watchers + 4)
        async with aiohttp.ClientSession(connector=connector) as http:
            served = [await _define(http, base, _definition(f"probes{i}", f"Probe{i}", rules=False))
                      for i in range(args.crds)]
            result["crd_established_ms"] = round(statistics.median(s[0] for s in served), 1)
            result["crd_discovery_ms"] = round(statistics.median(s[1] for s in served), 1)
            await _define(http, base, _definition("plains", "Plain", rules=False))
            await _define(http, base, _definition("cels", "Cel", rules=True))
            kinds = {"configmap": (f"{ns}/configmaps", _configmap), "plain": (f"{custom}/plains", _custom("Plain")),
                     "cel": (f"{custom}/cels", _custom("Cel"))}
            for url, make in kinds.values():  # a first round warms caches and connections
                await _creates(http, url, make, "warm", 200, proc.pid)
            creates: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
            for round_ in range(args.rounds):  # kinds alternated, the median kept: two cores are noisy
                for name, (url, make) in kinds.items():
                    creates[name].append(await _creates(http, url, make, f"bench{round_}",
                                                        args.creates // args.rounds, proc.pid))
            for name, runs in creates.items():
                result[f"{name}_create_per_s"] = round(statistics.median(r[0] for r in runs), 1)
                result[f"{name}_cpu_us_per_create"] = round(statistics.median(r[1] for r in runs))
            for name in ("configmap", "plain"):
                ms, count = await _list_ms(http, kinds[name][0])
                result[f"{name}_list_ms"] = round(ms, 1)
                result[f"{name}_listed"] = count
            rates: dict[str, list[float]] = {"configmap": [], "plain": []}
            for round_ in range(args.rounds):  # alternated, the median kept: two cores are noisy
                for name in rates:
                    url, make = kinds[name]
                    rates[name].append(await _watch_rate(http, url, make, f"watched{round_}", args.watchers,
                                                         args.watched))
            for name, values in rates.items():
                result[f"{name}_watch_events_per_s"] = round(statistics.median(values))
    return {"benchmark": "crds", "cpus": os.cpu_count(), "concurrency": CONCURRENCY, "creates": args.creates,
            "watchers": args.watchers, "watched": args.watched, **result,
            "cr_create_ratio": round(result["plain_create_per_s"] / result["configmap_create_per_s"], 3),
            "cel_create_ratio": round(result["cel_create_per_s"] / result["configmap_create_per_s"], 3),
            "cel_us_per_write": result["cel_cpu_us_per_create"] - result["plain_cpu_us_per_create"],
            "cr_list_ratio": round(result["configmap_list_ms"] / result["plain_list_ms"], 3),
            "cr_watch_ratio": round(result["plain_watch_events_per_s"] / result["configmap_watch_events_per_s"], 3),
            "goal_ratio": 0.7}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="", help="write the result here too")
    p.add_argument("--creates", type=int, default=2000, help="creates per kind")
    p.add_argument("--watchers", type=int, default=20)
    p.add_argument("--watched", type=int, default=500, help="objects created while watched, per kind")
    p.add_argument("--crds", type=int, default=5, help="definitions timed to Established and discovery")
    p.add_argument("--rounds", type=int, default=3, help="create and watch rounds per kind (the median is kept)")
    args = p.parse_args(argv)
    report(asyncio.run(run(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

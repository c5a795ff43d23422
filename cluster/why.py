"""`kubeling why POD [-n NS] [-o wide|json]`: why the scheduler put a pod where it did, or
nowhere, from the results its last recorded attempt left on the pod
(scheduler.framework.results): per node, the filters (passed, or the plugin that rejected
it and why) and each Score plugin's weighted score (`-o wide`: raw/normalized/weighted),
the total, the winner marked; then PreFilter, PostFilter (nominated node, victims) and
Permit. The cluster is found as kubectl finds it: `--kubeconfig`, `$KUBECONFIG`, else
`~/.kubeling/kubeconfig` (what `kubeling up` writes)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from cluster.names import kubeling_home
from kubeling import errors
from kubeling.app import EXIT_CONFIG
from kubeling.client import Client
from kubeling.kubeconfig import user_kubeconfig
from scheduler.framework.results import KEYS, PREFIX, RECORD, REJECTED

__all__ = ["add_parser", "render", "results_of"]


def kubeconfig_path(flag: str) -> Path:
    """Whose view, as kubectl chooses: --kubeconfig, $KUBECONFIG's first file, ~/.kube/config
    (where `up` merges its contexts), else the cluster kubeling's own admin kubeconfig."""
    if flag:
        return Path(flag)
    user = user_kubeconfig()
    return user if user.exists() or os.environ.get("KUBECONFIG") else kubeling_home() / "kubeconfig"


def results_of(annotations: dict[str, str]) -> dict[str, Any] | None:
    """The recorded attempt, decoded; None when the pod has none."""
    if not any(PREFIX + k in annotations for k in KEYS):
        return None
    out: dict[str, Any] = {}
    for key in KEYS:
        text = annotations.get(PREFIX + key)
        if text is None:
            continue
        try:
            out[key] = text if key == "selected-node" else json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _filters(verdicts: dict[str, str]) -> str:
    failed = [(p, v) for p, v in verdicts.items() if v != "passed"]
    if not failed:
        return "passed"
    plugin, verdict = failed[0]
    return f"{plugin}: {verdict.split(': ', 1)[-1]}"


def render(pod: str, results: dict[str, Any], wide: bool = False) -> str:
    filters: dict[str, Any] = dict(results.get("filter-result") or {})
    rejected = filters.pop(REJECTED, {})
    scores: dict[str, dict[str, dict[str, int]]] = results.get("score-result") or {}
    final: dict[str, int] = results.get("finalscore-result") or {}
    selected = results.get("selected-node", "")
    plugins = sorted({p for per_node in scores.values() for p in per_node})
    lines = [f"Pod:         {pod}", f"Attempt:     {results.get('attempt', '?')}",
             f"Selected:    {selected or '<none>'}"]
    pre = results.get("prefilter-result") or {}
    if pre:
        lines.append("PreFilter:   " + ", ".join(
            f"{p}: {v if isinstance(v, str) else 'nodes ' + ','.join(v.get('nodes', []))}" for p, v in pre.items()))
    post = results.get("postfilter-result") or {}
    if post:
        victims = post.get("victims") or []
        lines.append(f"PostFilter:  {post.get('status', '')}; nominated {post.get('nominatedNode') or '<none>'}"
                     + (f"; victims {', '.join(victims)}" if victims else ""))
    permit = results.get("permit-result") or {}
    if permit:
        lines.append("Permit:      " + ", ".join(f"{p}: {v}" for p, v in permit.items()))
    lines.append("")
    header = ["", "NODE", "FILTERS", *plugins, "TOTAL"]
    order = sorted(filters, key=lambda n: (n != selected, n not in final, -final.get(n, 0), n))
    rows = [header]
    for node in order:
        cells = []
        for p in plugins:
            s = scores.get(node, {}).get(p)
            cells.append("-" if s is None else (f"{s['raw']}/{s['normalized']}/{s['weighted']}" if wide
                                                else str(s["weighted"])))
        rows.append(["*" if node == selected else "", node, _filters(filters[node]), *cells,
                     str(final[node]) if node in final else "-"])
    if len(rows) > 1:
        lines.append(_table(rows))
    else:
        lines.append("(no node was evaluated)")
    for reason, count in rejected.items():
        lines.append(f"  and {count} more node(s): {reason}")
    if wide and plugins:
        lines.append("")
        lines.append("scores: raw/normalized/weighted per plugin")
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> int:
    path = kubeconfig_path(args.kubeconfig)
    if not path.exists():
        print(f"kubeling why: no kubeconfig at {path} (use --kubeconfig, $KUBECONFIG or `kubeling up`)",
              file=sys.stderr)
        return EXIT_CONFIG
    async with Client.from_kubeconfig(path) as client:
        try:
            pod = await client.pods.get(args.pod, args.namespace)
        except errors.ApiError as err:
            print(f"Error from server ({err.reason}): {err.message}", file=sys.stderr)
            return 1
    annotations = dict(pod.metadata.annotations)
    results = results_of(annotations)
    name = f"{pod.metadata.namespace}/{pod.metadata.name}"
    if results is None:
        print(f"pod {name} has no recorded scheduling results: give it the annotation {RECORD}: \"true\" "
              "before it is scheduled, or turn on recordResults in its scheduler profile", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(results, indent=2))
    else:
        print(render(name, results, wide=args.output == "wide"))
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("why", help="why the scheduler put a pod on its node (or nowhere)")
    p.add_argument("pod")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-o", "--output", choices=["", "wide", "json"], default="")
    p.add_argument("--kubeconfig", default="")
    p.set_defaults(run=lambda args: asyncio.run(_run(args)))

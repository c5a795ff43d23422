"""One benchmark, two commits, back to back on this machine: the ratio new / old.

    python -m bench.compare OLD [NEW] [--runs 3] [--metric A,B] [--json OUT] -- scheduler_perf --mode inprocess ...

OLD and NEW are git revisions (NEW: the working tree when omitted). Each is checked out
into a temporary worktree and the benchmark (a module of bench/) runs there with this
venv's interpreter, alternating old and new `--runs` times so that both see the same
host. The report holds, for each chosen metric (comma-separated), every run's value, the
median of each side and their ratio, and the host's speed. A metric may be a dotted path
into the report (`curve.0.cpu_ms_per_s.controller-manager`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.output import report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_METRIC = {"scheduler_perf": "throughput_overall_pods_per_s",
                  "hotpath": "lease_update_us,node_get_cached_us,floor_create_us"}


def _worktree(rev: str, parent: Path) -> Path:
    where = parent / rev.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), rev], check=True)
    return where


def _run(tree: Path, module: str, args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", f"bench.{module}", *args], cwd=tree, capture_output=True,
                         text=True, check=True)
    start = out.stdout.index("{")  # the JSON report, after whatever the benchmark logged
    result: dict[str, Any] = json.loads(out.stdout[start:])
    return result


def _value(result: dict[str, Any], metric: str) -> Any:
    """A field of the report; a dotted path reaches into it (`curve.0.cpu_ms_per_s.apiserver`:
    bench.scale's figures per N)."""
    if metric in result:
        return result[metric]
    value: Any = result
    for part in metric.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, _, bench_argv = (argv[:argv.index("--")], "--", argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, "", [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new", nargs="?", default="")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--metric", default="", help="the JSON fields compared, comma-separated (default: the "
                                                "benchmark's headline)")
    p.add_argument("--json", default="")
    args = p.parse_args(own)
    if not bench_argv:
        p.error("give the benchmark after --, e.g. -- scheduler_perf --mode inprocess")
    module, bench_args = bench_argv[0], bench_argv[1:]
    metrics = [m for m in (args.metric or DEFAULT_METRIC.get(module, "")).split(",") if m]
    if not metrics:
        p.error(f"--metric is needed for {module}")
    work = Path(tempfile.mkdtemp(prefix="kubeling-compare-"))
    trees = {"old": _worktree(args.old, work), "new": _worktree(args.new, work) if args.new else ROOT}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    try:
        for _ in range(args.runs):
            for side in ("old", "new"):
                runs[side].append(_run(trees[side], module, bench_args))
                print(f"{side}: " + ", ".join(f"{m} {_value(runs[side][-1], m)}" for m in metrics), file=sys.stderr,
                      flush=True)
    finally:
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    compared = {}
    for metric in metrics:
        olds, news = [_value(r, metric) for r in runs["old"]], [_value(r, metric) for r in runs["new"]]
        old, new = statistics.median(olds), statistics.median(news)
        compared[metric] = {"old": {"median": old, "runs": olds}, "new": {"median": new, "runs": news},
                            "ratio": round(new / old, 3) if old else None}
    report({"benchmark": f"compare {module}", "args": bench_args, "old": args.old, "new": args.new or "working tree",
            "metrics": compared, "host_speed_of_runs": {side: runs[side][-1].get("host_speed") for side in runs}},
           args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

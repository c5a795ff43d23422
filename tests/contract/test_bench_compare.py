"""`python -m bench.compare OLD [NEW] -- <benchmark>`, as the README documents it: one small
scheduler benchmark at HEAD and in the working tree, alternately, and the report of both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_compare_runs_a_benchmark_at_two_commits(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    done = subprocess.run([sys.executable, "-m", "bench.compare", "HEAD", "--runs", "1", "--json", str(out), "--",
                           "scheduler_perf", "--mode", "inprocess", "--nodes", "50", "--init-pods", "10",
                           "--pods", "100"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    compared = report["metrics"]["throughput_overall_pods_per_s"]
    assert report["old"] == "HEAD" and report["new"] == "working tree"
    assert len(compared["old"]["runs"]) == len(compared["new"]["runs"]) == 1
    assert compared["old"]["median"] > 0 and compared["new"]["median"] > 0 and compared["ratio"] > 0
    assert report["host_speed"]["python_loop_ms"] > 0
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "kubeling-compare-" not in listed  # its worktree is gone again

"""The soak, CI-sized, as its README line runs it: `python -m bench.soak --minutes 3`. It
brings up a 2-node cluster of its own, drives the steady mix (rollouts, Jobs, Services and
ConfigMaps, exec, port-forward, watches) and must find nothing: no failed round, no
restarted component, after the churn the same runc containers and IPAM allocations as
before it and each component's asyncio tasks and fds back near theirs; the slopes of every
series are reported (judged on runs of 20 minutes and more: docs/operations.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_the_soak_ci_sized_finds_no_leak(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, "-m", "bench.soak", "--minutes", "3", "--json", str(out)],
                          capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert done.returncode == 0 and not result["leaks"], result["leaks"] or done.stderr[-3000:]
    assert result["rounds"] >= 3 and not result["errors"]
    slopes = result["slopes"]
    assert {"apiserver.rss_mib", "apiserver.fds", "apiserver.asyncio_tasks", "etcd.rss_mib", "etcd_db_mib",
            "runc_containers", "ipam_allocations"} <= set(slopes), sorted(slopes)
    assert all(isinstance(s["slope_per_hour"], float | int) and s["bound_95"] >= 0 for s in slopes.values())
    before = result["before_churn"]
    # every Python component told its asyncio tasks (kubeling.vitals); etcd is not Python
    kubelets = [name for name in before["components"] if name.startswith("kubelet-")]
    assert len(kubelets) == 2 and all(before["components"][k]["asyncio_tasks"] > 0 for k in kubelets)
    assert before["components"]["apiserver"]["asyncio_tasks"] > 0
    assert "asyncio_tasks" not in before["components"]["etcd"]
    # the soak's pods were counted while they ran, and are all gone after it
    assert max(s["runc_containers"] for s in result["samples"]) >= 4
    assert max(s["ipam_allocations"] for s in result["samples"]) >= 2
    assert result["after_churn"]["runc_containers"] == before["runc_containers"]
    assert result["api_p99_first_10min_s"] > 0

"""Run the CSI spec's own suite (csi-sanity, kubernetes-csi/csi-test) against kubeling's
hostpath driver (`python -m csi.hostpath`).

    python -m tests.csisanity --csi-sanity PATH [--focus RE] [--skip RE] [--report FILE]
    make csi-sanity CSI_SANITY=PATH [FOCUS=RE] [SKIP=RE] [REPORT=FILE]

The driver runs on a state directory made for the run; csi-sanity gets its socket and a
staging and a mount directory beside it. Afterwards the run is judged twice: by the
suite (failed specs) and by the machine (a mount left under the run's directory, or a
volume or snapshot left in the driver's state, fails it too). Build csi-sanity as
../shared/CRITEST.md says; never commit it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc

from kubeling import mounts
from protos.csi.v1 import csi_pb2, csi_pb2_grpc


def log(message: str) -> None:
    print(f"[csi-sanity harness] {message}", flush=True)


def _wait_ready(socket: Path, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the driver exited with {process.returncode} before it served")
        if socket.exists():
            with grpc.insecure_channel(f"unix://{socket}") as channel:
                try:
                    answer = csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(), timeout=2)
                    if answer.ready.value:
                        return
                except grpc.RpcError:
                    pass
        time.sleep(0.1)
    raise SystemExit(f"the driver did not answer Probe on {socket} within {timeout:.0f} s")


def _summary(report: Path) -> Counter[str]:
    states: Counter[str] = Counter()
    for suite in json.loads(report.read_text()):
        for spec in suite.get("SpecReports", []):
            if spec.get("LeafNodeType") == "It":
                states[spec.get("State", "?")] += 1
    return states


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.csisanity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csi-sanity", required=True, type=Path, help="the csi-sanity binary")
    p.add_argument("--focus", default="", help="only specs matching this regular expression")
    p.add_argument("--skip", default="", help="no specs matching this regular expression")
    p.add_argument("--report", type=Path, help="keep ginkgo's JSON report here")
    args = p.parse_args(argv)
    if not os.access(args.csi_sanity, os.X_OK):
        raise SystemExit(f"{args.csi_sanity}: not an executable (build it as ../shared/CRITEST.md says)")
    work = Path(tempfile.mkdtemp(prefix="kubeling-csisanity-"))
    state, socket = work / "state", work / "state" / "csi.sock"
    driver = subprocess.Popen([sys.executable, "-m", "csi.hostpath", "--node-id", "csi-sanity-node",
                               "--state-dir", str(state), "--log-level", "WARNING"])
    report = args.report or work / "report.json"
    try:
        _wait_ready(socket, driver)
        command = [str(args.csi_sanity), "--csi.endpoint", f"unix://{socket}", "--csi.stagingdir",
                   str(work / "staging"), "--csi.mountdir", str(work / "mount"), "-ginkgo.no-color",
                   "-ginkgo.json-report", str(report)]
        command += [f"-ginkgo.focus={args.focus}"] if args.focus else []
        command += [f"-ginkgo.skip={args.skip}"] if args.skip else []
        log(" ".join(command))
        suite = subprocess.run(command, check=False).returncode
        states = _summary(report) if report.exists() else Counter()
        log("specs: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
        left = mounts.mount_points(work)
        stored = json.loads((state / "state.json").read_text()) if (state / "state.json").exists() else {}
        leftovers = [f"mount {m}" for m in left] + [f"volume {v['id']}" for v in stored.get("volumes", [])] + [
            f"snapshot {s['id']}" for s in stored.get("snapshots", [])]
        for item in leftovers:
            log(f"left behind: {item}")
        return 1 if suite != 0 or states.get("failed", 0) or leftovers else 0
    finally:
        driver.terminate()
        driver.wait(timeout=10)
        for m in reversed(mounts.mount_points(work)):
            mounts.unmount(m, lazy=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
